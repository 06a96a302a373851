"""A run's task records, kept by column (``state.outcome.records``).

While a callback asks for them (``Needs.records``) a run keeps one record
per finished task: :class:`~localsched.worker.records_wire.TaskRecord`'s fields ``(key,
start, end, worker_id, freed, transfer, probe, activities, nbytes)``.  A
long run has hundreds of thousands of them, so how they are kept is part of
the scheduler's hot path.  A tuple per task is an object the garbage
collector tracks, and a kept one makes its young collections come more
often -- that cost more than building it.  So a
record is kept as plain values instead, with nothing per task for the
collector:

- ``rows``: one flat list, ``ROW_WIDTH`` entries per record
  (``records_wire``'s ``ROW_*``): key (the graph's own object), start,
  end, worker id, how many keys its end freed;
- ``freed``: every record's freed keys, one after another (a reader turns
  the counts into offsets, kept in an array as far as it has read);
- ``measured`` (measured runs): each task's probe, as the worker made it:
  None for most tasks on pools, a tuple of plain values for what only the
  task has (what it metered, its batch's start marks, its result's size);
- ``notes`` (measured runs on pools): a worker reads its thread's CPU
  clock once per hand-off and sends the seconds, with how many tasks and
  wall seconds they cover, before those tasks' records; a note is kept as
  ``(first record, count, CPU seconds, wall seconds)`` and split among its
  records by wall time when they are read (``cpu_share``), so nothing is
  built per task for it (the probe's ``cpu`` is that share);
- ``sizes`` (runs that measure results): each result's size;
- the rarer fields of process runs (``transfer``, ``activities``) in a dict
  by record number, for the records that have them.

Readers see a sequence of plain tuples in ``TaskRecord``'s field order,
built on read (``records_wire`` declares every layout and its positions)::

    n = len(records)            # records complete up to here (appends go on)
    for key, start, end, worker_id, freed, *rest in records[seen:n]: ...
    TaskRecord._make(records[-1])
    keys, starts, ends, worker_ids = records.columns(seen, n)   # no tuple per record

Writers (one thread): ``records.append(fields)`` (any loop; a
``TaskRecord`` will do), and the local loops' hot path, ``writer =
records.writer(measured, sized)``: per task ``writer.keep(key, start, end,
worker_id, freed, probe, size)`` (the one function that keeps a record:
its parts first, the row last -- ``len()`` counts rows, so a reader in
another thread only sees records whose every part is written);
``records.cpu_note(seconds, count, wall)`` before the ``count`` records
it covers.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, repeat
from typing import Any, overload

from ..worker.records_wire import (
    PROBE_CPU,
    ROW_END,
    ROW_FREED_COUNT,
    ROW_KEY,
    ROW_START,
    ROW_WIDTH,
    ROW_WORKER_ID,
)
from ..worker.records_wire import probe as make_probe

__all__ = ["TaskRecords", "Writer", "cpu_share", "with_cpu_share"]

_WIDTH = ROW_WIDTH  # entries per record in rows


class Writer:
    """The hot path's writer of one run's records: :meth:`keep` per task
    (see the module docstring)."""

    __slots__ = ("_records", "_rows", "_freed", "_probes", "_sizes", "measured", "sized")

    def __init__(self, records: TaskRecords, measured: bool, sized: bool):
        # (bound C methods of the records' lists: no Python runs in them)
        self._rows: Callable[[tuple], None] = records._rows.extend
        self._freed: Callable[[Sequence], None] = records._freed.extend
        self._probes: Callable[[Any], None] = records._measured.append
        self._sizes: Callable[[Any], None] = records._sizes.append
        self._records = records
        self.measured, self.sized = measured, sized

    def keep(self, key: Any, start: float, end: float, worker_id: Any, freed: Sequence,
             probe: Any = None, size: Any = None, transfer: tuple | None = None,
             activities: tuple | None = None) -> None:
        """Keep one finished task's record (``TaskRecord``'s fields): its
        freed keys, probe (a measured run), size (a sized run) and rarer
        fields first, its row last."""
        if freed:
            self._freed(freed)
        if self.measured:
            self._probes(probe)
        if self.sized:
            self._sizes(size)
        if transfer is not None or activities is not None:
            records = self._records
            records._extra[len(records)] = (transfer, activities)
        self._rows((key, start, end, worker_id, len(freed)))


class TaskRecords(Sequence):
    """The records of one run's finished tasks, in the order they ended
    (see the module docstring)."""

    __slots__ = ("_rows", "_freed", "_offsets", "_read_lock", "_measured", "_probes",
                 "_sizes", "_extra", "_columns", "_notes", "_shares", "_next_note")

    def __init__(self) -> None:
        self._rows: list = []
        self._freed: list = []
        self._offsets = array("q", [0])  # where record i's freed keys start, as far as read
        self._read_lock = threading.Lock()  # (readers extend _offsets)
        self._measured: list = []  # each record's probe, in a run a writer measures
        self._probes: dict = {}  # record number -> probe, of appended records
        self._sizes: list = []
        self._extra: dict = {}  # record number -> (transfer, activities), where not None
        self._columns: set = set()  # the per-record columns a writer keeps ("probe", "size")
        self._notes: list = []  # CPU notes, flat: first record, count, seconds, wall seconds
        self._shares = array("d")  # each record's share of its note (NaN: none), as far as read
        self._next_note = 0  # the first note whose records may not all have a share yet

    # -- writing (one thread) --------------------------------------------------------

    def writer(self, measured: bool = False, sized: bool = False) -> Writer:
        """The hot path's writers for a run that does (not) measure its tasks
        (``Needs.measure``) or their results' sizes: every record then has
        a probe, resp. a size (C calls: nothing of Python runs per task)."""
        # (records appended before: their columns padded, so that these line up)
        if measured:
            self._measured.extend(repeat(None, len(self) - len(self._measured)))
            self._columns.add("probe")
        if sized:
            self._sizes.extend(repeat(None, len(self) - len(self._sizes)))
            self._columns.add("size")
        return Writer(self, measured, sized)

    def cpu_note(self, seconds: float, count: int, wall: float) -> None:
        """The CPU ``seconds`` of the next ``count`` records, which ran for
        ``wall`` seconds (a measuring worker's hand-off, see runtime)."""
        self._notes.extend((len(self), count, seconds, wall))

    def append(self, record: Sequence) -> None:
        """Keep one record given as a tuple of ``TaskRecord``'s fields."""
        key, start, end, worker_id, freed, *rest = record
        # (the fields after freed, None where the record stops early)
        transfer, probe, activities, nbytes = (*rest, None, None, None, None)[:4]
        i = len(self)
        if probe is not None:
            self._probes[i] = probe
        if "probe" in self._columns:  # (a column a writer keeps: this record's place in it)
            self._measured.append(None)
        if nbytes is not None or "size" in self._columns:
            self._sizes.extend(repeat(None, i - len(self._sizes)))
            self._sizes.append(nbytes)
        if transfer is not None or activities is not None:
            self._extra[i] = (transfer, activities)
        if freed:
            self._freed.extend(freed)
        self._rows.extend((key, start, end, worker_id, len(freed) if freed else 0))

    # -- reading (any thread) --------------------------------------------------------

    def __len__(self) -> int:
        return len(self._rows) // _WIDTH

    def _starts_of_freed(self, stop: int) -> array:
        """``_offsets`` extended to at least ``stop + 1`` entries."""
        offsets = self._offsets
        if len(offsets) <= stop:
            with self._read_lock:
                done = len(offsets) - 1
                if done < stop:
                    counts = self._rows[_WIDTH * done + ROW_FREED_COUNT:_WIDTH * stop:_WIDTH]
                    running = accumulate(counts, initial=offsets[-1])
                    next(running)  # (the initial value: there already)
                    offsets.extend(running)
        return offsets

    def _cpu_shares(self, stop: int) -> array:
        """``_shares`` extended to at least ``stop`` entries: each record's
        share of the CPU note covering it, NaN where none does."""
        shares = self._shares
        if len(shares) >= stop or not self._notes:
            return shares
        with self._read_lock:
            done = len(shares)
            # (the notes of these records are all written: a note precedes its
            # records; the list only grows, four entries per extend)
            rows, notes = self._rows, self._notes
            n_notes = len(notes)
            k = self._next_note
            while done < stop:
                while k < n_notes and notes[k] + notes[k + 1] <= done:
                    k += 4  # (a note whose records all have their shares)
                if k < n_notes and notes[k] <= done:
                    first, count, seconds, wall = notes[k:k + 4]
                    end = min(first + count, stop)
                    shares.extend(cpu_share(seconds, count, wall, rows[_WIDTH * j + ROW_END]
                                            - rows[_WIDTH * j + ROW_START])
                                  for j in range(done, end))
                else:  # records no note covers (up to the next note)
                    end = min(notes[k], stop) if k < n_notes else stop
                    shares.extend(repeat(math.nan, end - done))
                done = end
            self._next_note = k
        return shares

    def _probe(self, i: int) -> Any:
        measured = self._measured
        probe = measured[i] if i < len(measured) else None
        if probe is None:
            probe = self._probes.get(i)
        if self._notes:
            share = self._cpu_shares(i + 1)[i]
            if share == share:  # (not NaN: a note covers the record)
                return with_cpu_share(probe, share)
        return probe

    def _record(self, i: int) -> tuple:
        offsets = self._starts_of_freed(i + 1)
        key, start, end, worker_id, _ = self._rows[_WIDTH * i:_WIDTH * i + _WIDTH]
        transfer, activities = self._extra.get(i, (None, None))
        sizes = self._sizes
        return (key, start, end, worker_id, tuple(self._freed[offsets[i]:offsets[i + 1]]),
                transfer, self._probe(i), activities, sizes[i] if i < len(sizes) else None)

    @overload
    def __getitem__(self, index: int) -> tuple: ...

    @overload
    def __getitem__(self, index: slice) -> list: ...

    def __getitem__(self, index: Any) -> Any:
        n = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step != 1:
                return [self._record(i) for i in range(start, stop, step)]
            return self._slice(start, max(start, stop))
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("task record index out of range")
        return self._record(i)

    def _slice(self, start: int, stop: int) -> list:
        """Records ``start`` to ``stop`` as tuples, built column by column
        (in C but for the freed keys and the rarer fields)."""
        if start == stop:
            return []
        rows = self._rows[_WIDTH * start:_WIDTH * stop]
        offsets = self._starts_of_freed(stop)
        freed_keys = self._freed
        freed: Any = repeat(())
        if offsets[start] != offsets[stop]:  # (some task of the range freed keys)
            bounds = offsets[start:stop + 1]
            freed = [tuple(freed_keys[a:b]) if a != b else ()
                     for a, b in zip(bounds, bounds[1:], strict=False)]
        transfers: Any = repeat(None)
        activities: Any = repeat(None)
        if self._extra:
            pairs = [self._extra.get(i, (None, None)) for i in range(start, stop)]
            transfers, activities = zip(*pairs, strict=True)
        probes: Any = repeat(None)
        if self._probes or self._notes:
            self._cpu_shares(stop)  # (once for the range, not once per record)
            probes = [self._probe(i) for i in range(start, stop)]
        elif self._measured:
            probes = self._measured[start:stop]
            probes += [None] * (stop - start - len(probes))
        sizes: Any = repeat(None)
        if self._sizes:
            sizes = self._sizes[start:stop]
            sizes += [None] * (stop - start - len(sizes))
        return list(zip(rows[ROW_KEY::_WIDTH], rows[ROW_START::_WIDTH], rows[ROW_END::_WIDTH],
                        rows[ROW_WORKER_ID::_WIDTH],
                        freed, transfers, probes, activities, sizes, strict=False))

    def __iter__(self) -> Iterator[tuple]:
        n, step = len(self), 4096
        for start in range(0, n, step):
            yield from self._slice(start, min(start + step, n))

    def columns(self, start: int = 0, stop: int | None = None) -> tuple[list, list, list, list]:
        """Records ``start`` to ``stop`` as columns, without a tuple per
        record: ``(keys, starts, ends, worker_ids)`` (for readers that loop
        over many records, such as a progress bar catching up)."""
        n = len(self)
        stop = n if stop is None else min(stop, n)
        rows, a, b = self._rows, _WIDTH * start, _WIDTH * stop  # (no copy of the range first)
        return (rows[a + ROW_KEY:b:_WIDTH], rows[a + ROW_START:b:_WIDTH],
                rows[a + ROW_END:b:_WIDTH], rows[a + ROW_WORKER_ID:b:_WIDTH])

    def __repr__(self) -> str:
        return f"<TaskRecords: {len(self)} tasks>"


def cpu_share(seconds: float, count: int, wall: float, task_wall: float) -> float:
    """A task's part of the CPU ``seconds`` of a note covering ``count``
    tasks that ran ``wall`` seconds: by wall time (evenly if none)."""
    return seconds * task_wall / wall if wall > 0.0 else seconds / count


def with_cpu_share(probe: Any, share: float) -> Any:
    """A task's probe with its CPU seconds, ``share``, where the worker left
    them to its CPU note (its ``cpu`` None, or no probe)."""
    if probe is None:
        return make_probe(share, None)
    if probe[PROBE_CPU] is None:
        return (share, *probe[PROBE_CPU + 1:])
    return probe
