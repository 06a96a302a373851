"""A run's task records, kept by column (``state.outcome.records``).

While a callback asks for them (``Needs.records``) a run keeps one record
per finished task: :class:`~localsched.view.TaskRecord`'s fields ``(key,
start, end, worker_id, freed, transfer, probe, activities, nbytes)``.  A
long run has hundreds of thousands of them, so how they are kept is part of
the scheduler's hot path: a tuple per task is a new object the garbage
collector tracks (a young collection every few hundred tasks, and more full
collections over a heap that holds the whole graph), which cost more than
building the tuple.  So the columns are kept instead: the keys in a list
(the graph's own key objects), start and end in an array of doubles, the
workers in a list, the freed keys of all tasks in one list with each task's
end offset in an array, ``probe`` and ``nbytes`` in lists, and the rarer
fields of process runs (``transfer``, ``activities``) in a dict by record
number, only for the records that have them.  Nothing per task is a new
object for the collector to track (but a probe, which the worker made).

Readers see a sequence of plain tuples, built on read::

    n = len(records)            # records complete up to here (appends go on)
    for key, start, end, worker_id, freed, *rest in records[seen:n]: ...
    TaskRecord._make(records[-1])

Writers: ``records.append(tuple)`` (any loop; a ``TaskRecord`` will do) and
the local loops' fast path ``add = records.adder()``, ``add(key, start,
end, worker_id, freed, probe, nbytes)``, which builds no tuple.  One thread
writes; any thread may read: a record's offset is written last, so
``len()`` counts only records whose every column is written.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from typing import Any, overload

__all__ = ["TaskRecords"]

_NO_EXTRA = (None, None, None, None)


class TaskRecords(Sequence):
    """The records of one run's finished tasks, in the order they ended
    (see the module docstring)."""

    __slots__ = ("_keys", "_times", "_workers", "_freed", "_ends", "_probes", "_sizes",
                 "_extra")

    def __init__(self) -> None:
        self._keys: list = []
        self._times = array("d")  # start, end of each record
        self._workers: list = []
        self._freed: list = []  # every record's freed keys, one after another
        self._ends = array("q")  # where each record's freed keys end in _freed
        self._probes: list = []
        self._sizes: list = []
        self._extra: dict = {}  # record number -> (transfer, activities), where not None

    # -- writing (one thread) --------------------------------------------------------

    def adder(self) -> Callable[..., None]:
        """The fast writer: ``add(key, start, end, worker_id, freed, probe=None,
        nbytes=None)``, ``freed`` any sequence of keys (empty for none)."""
        freed_keys = self._freed
        key_append, time_append, worker_append = (self._keys.append, self._times.append,
                                                  self._workers.append)
        probe_append, size_append = self._probes.append, self._sizes.append
        freed_extend, end_append = freed_keys.extend, self._ends.append

        def add(key, start, end, worker_id, freed, probe=None, nbytes=None) -> None:
            key_append(key)
            time_append(start)
            time_append(end)
            worker_append(worker_id)
            if freed:
                freed_extend(freed)
            probe_append(probe)
            size_append(nbytes)
            end_append(len(freed_keys))  # (last: the record is complete)

        return add

    def append(self, record: Sequence) -> None:
        """Keep one record given as a tuple of ``TaskRecord``'s fields."""
        key, start, end, worker_id, freed, *rest = record
        self._keys.append(key)
        self._times.append(start)
        self._times.append(end)
        self._workers.append(worker_id)
        if freed:
            self._freed.extend(freed)
        transfer, probe, activities, nbytes = tuple(rest) + _NO_EXTRA[len(rest):]
        self._probes.append(probe)
        self._sizes.append(nbytes)
        if transfer is not None or activities is not None:
            self._extra[len(self._ends)] = (transfer, activities)
        self._ends.append(len(self._freed))

    # -- reading (any thread) --------------------------------------------------------

    def __len__(self) -> int:
        return len(self._ends)

    def _record(self, i: int) -> tuple:
        start_of_freed = self._ends[i - 1] if i else 0
        transfer, activities = self._extra.get(i, _NO_EXTRA[:2])
        return (self._keys[i], self._times[2 * i], self._times[2 * i + 1], self._workers[i],
                tuple(self._freed[start_of_freed:self._ends[i]]), transfer, self._probes[i],
                activities, self._sizes[i])

    @overload
    def __getitem__(self, index: int) -> tuple: ...

    @overload
    def __getitem__(self, index: slice) -> list: ...

    def __getitem__(self, index: Any) -> Any:
        n = len(self._ends)
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
        times, ends, freed_keys = self._times, self._ends, self._freed
        offsets = ends[max(start - 1, 0):stop]
        if start == 0:
            offsets.insert(0, 0)
        if offsets[0] == offsets[-1]:  # (no task in the range freed anything)
            freed: Any = repeat(())
        else:
            freed = [tuple(freed_keys[a:b]) if a != b else ()
                     for a, b in zip(offsets, offsets[1:], strict=False)]
        extra = self._extra
        transfers: Any
        activities: Any
        if extra:
            none = _NO_EXTRA[:2]
            pairs = [extra.get(i, none) for i in range(start, stop)]
            transfers, activities = zip(*pairs, strict=True)
        else:
            transfers = activities = repeat(None)
        return list(zip(self._keys[start:stop], times[2 * start:2 * stop:2],
                        times[2 * start + 1:2 * stop:2], self._workers[start:stop], freed,
                        transfers, self._probes[start:stop], activities,
                        self._sizes[start:stop], strict=False))

    def __iter__(self) -> Iterator[tuple]:
        n, step = len(self._ends), 4096
        for start in range(0, n, step):
            yield from self._slice(start, min(start + step, n))

    def columns(self, start: int = 0, stop: int | None = None) -> tuple[list, array, list]:
        """Records ``start`` to ``stop`` as columns, without a tuple per
        record: ``(keys, times, worker_ids)``, ``times`` holding each
        record's start and end one after the other (for readers that loop
        over many records, such as a progress bar catching up)."""
        stop = len(self._ends) if stop is None else min(stop, len(self._ends))
        return (self._keys[start:stop], self._times[2 * start:2 * stop],
                self._workers[start:stop])

    def __repr__(self) -> str:
        return f"<TaskRecords: {len(self)} tasks>"
