"""The layouts of every record, in one place: what workers send back, what
callbacks read.

A task's record takes these shapes on its way from the worker to a
profiler's result, each declared here once:

- :class:`Record`: a worker's report of one task (a plain 7-tuple), with
  its ``probe``, laid out as :class:`Probe` (a plain 6-tuple);
- :class:`TaskRecord`: what the scheduler keeps of a finished task
  (``state.task``, re-exported by ``localsched.view``, where callbacks
  find it); the run's records keep it by column, a row of ``ROW_WIDTH``
  plain values each (``localsched.run.task_records``);
- the profilers' records (``localsched.diagnostics.collectors.records.TaskData`` ...)
  are built from ``TaskRecord``'s fields.

The hot paths read these tuples without building a NamedTuple instance: by
unpacking, or by index through the positions below (``probe[PROBE_NBYTES]``,
never ``probe[5]``: ``tests/run/test_record_layout.py`` checks that no reader
uses a bare number and that each position matches its class's field).

A worker (a thread or a process, ``runtime.run_batch``) hands the scheduler
lists of records as tasks end.  Each record is a **plain tuple** laid out as
:class:`Record`; the classes here name the fields, but the hot path never
builds an instance: a tuple is made once per task and pickles small (a
NamedTuple instance costs several times as much to build and to pickle).
Read them by unpacking, or name them with ``Record._make(r)``.

A record with ``ok`` None is not a task's end:

- ``index >= 0``: an announcement, the batch starting with task ``index``
  at ``start`` (``announcement``);
- ``index < 0``: a note; its kind is the index, its content ``value``:
  ``HANDOFF_NOTE`` (how an earlier hand-off of results travelled),
  ``SAMPLES_NOTE`` (stack samples taken in a worker process),
  ``CPU_NOTE`` (the CPU seconds of the task records after it in its list).

A task's ``probe`` (None unless a callback measures or asks for sizes) is a
plain tuple of six fields laid out as :class:`Probe`, always six, None
where nothing was measured.  It reaches callbacks as ``state.task.probe``.

>>> r = (3, True, 42, 1.0, 1.5, 7, None)
>>> Record._make(r).value, is_note(r)
(42, False)
>>> note = cpu_note(0.25, 2, 0.5, 7)
>>> is_note(note), note[0] == CPU_NOTE, note[2]
(True, True, (0.25, 2, 0.5))
>>> Probe._make(probe(None, None, marks=(1.0, 1.1, True), size=8)).started
1.1
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["Record", "Probe", "TaskRecord", "HANDOFF_NOTE", "SAMPLES_NOTE", "CPU_NOTE", "NO_MARKS",
           "announcement", "cpu_note", "handoff_note", "samples_note", "probe", "is_note"]

#: Note kinds (a record's negative ``index``).
HANDOFF_NOTE = -1
SAMPLES_NOTE = -2
CPU_NOTE = -3


class Record(NamedTuple):
    """What a worker reports per task (sent as a plain tuple of this layout).

    ``ok`` is True (``value`` is the result, or None when only the batch
    needed it), False (``value`` is the exception) or None: not a task's
    end (an announcement or a note, see the module docstring).
    """

    index: int  # type: ignore[assignment]  # (the field shadows tuple.index)
    ok: bool | None
    value: Any
    start: float
    end: float
    worker_id: Any
    probe: tuple | None = None


class Probe(NamedTuple):
    """What only one task has, measured (sent as a plain 6-tuple of this layout).

    ``cpu``: its thread CPU seconds (None in a worker's list: its share of
    the list's ``CPU_NOTE``, given when read, ``task_records``); ``metrics``:
    the user metrics it recorded (``localsched.metrics``), or None; for the
    first task of a batch on a measuring worker, ``received`` (in a worker
    process, the ``(received, decoded, imported)`` of its job (epoch seconds,
    whether decoding it imported modules), else
    None), ``started`` (when the batch started) and ``fresh`` (whether the
    worker process was new); ``nbytes``: its result's size (``Needs.sizes``).
    """

    cpu: float | None = None
    metrics: list | None = None
    received: tuple | None = None
    started: float | None = None
    fresh: bool | None = None
    nbytes: int | None = None


class TaskRecord(NamedTuple):
    """One finished task, as its posttask hooks see it (``state.task``).

    ``start``/``end``: epoch seconds the worker measured around the call;
    ``worker_id``: the thread ident, worker pid or cluster worker;
    ``freed``: keys whose results the task's end released from the cache
    (a tuple on local runs);
    ``transfer``: None, or on processes ``(send seconds, receive seconds)``:
    its inputs' travel before ``start`` (first task of a batch) and its
    result's after ``end``; ``probe`` (only while a callback needs
    ``measure`` or sizes): a 6-tuple laid out as :class:`Probe`, ``(thread
    CPU seconds, user metrics, received, batch started, fresh worker,
    size)``, None where not measured (on pools a worker reads its CPU clock
    once per hand-off: a task's seconds are its share of that reading by
    wall time); ``activities``: None, or ``(activity, start, stop)``
    stretches outside the call (on processes the batch's inputs:
    serialize, transfer, deserialize; on a cluster its startstops);
    ``nbytes``: the result's size where the scheduler knows it.
    """

    key: Any
    start: float
    end: float
    worker_id: Any
    freed: Sequence[Any]
    transfer: tuple | None = None
    probe: Any = None
    activities: tuple | None = None
    nbytes: int | None = None


# Field positions, for the hot paths that index a plain tuple (each matches
# its class's field of the same name; a test keeps them so).
#: In a :class:`Record`.
REC_INDEX, REC_OK, REC_VALUE, REC_START, REC_END, REC_WORKER_ID, REC_PROBE = range(7)
#: In a :class:`Probe`.
PROBE_CPU, PROBE_METRICS, PROBE_RECEIVED, PROBE_STARTED, PROBE_FRESH, PROBE_NBYTES = range(6)
#: In a :class:`TaskRecord`.
(TASK_KEY, TASK_START, TASK_END, TASK_WORKER_ID, TASK_FREED, TASK_TRANSFER, TASK_PROBE,
 TASK_ACTIVITIES, TASK_NBYTES) = range(9)
#: In a row of the run's records (``task_records``): a ``TaskRecord``'s
#: first four fields, then how many keys its end freed (the keys kept apart).
ROW_KEY, ROW_START, ROW_END, ROW_WORKER_ID, ROW_FREED_COUNT = range(5)
ROW_WIDTH = 5

#: A probe's ``(received, started, fresh)`` where a task has none.
NO_MARKS = (None, None, None)


def probe(cpu: float | None, metrics: list | None, marks: tuple = NO_MARKS,
          size: int | None = None) -> tuple:
    """A task's probe, as a plain tuple (``marks``: ``(received, started,
    fresh)``)."""
    return (cpu, metrics, *marks, size)


def announcement(index: int, start: float, worker_id: Any) -> tuple:
    """The batch starts with task ``index`` at ``start``."""
    return (index, None, None, start, 0.0, worker_id, None)


def cpu_note(seconds: float, count: int, wall: float, worker_id: Any) -> tuple:
    """The CPU ``seconds`` of the ``count`` task records after it in its list,
    which ran ``wall`` seconds."""
    return (CPU_NOTE, None, (seconds, count, wall), 0.0, 0.0, worker_id, None)


def handoff_note(sent: tuple, start: float, dumped: float, stop: float,
                 worker_id: Any) -> tuple:
    """How an earlier hand-off travelled: the indices of the tasks whose
    results it carried, its start, its pickling seconds, its end."""
    return (HANDOFF_NOTE, None, (sent, start, dumped, stop), 0.0, 0.0, worker_id, None)


def samples_note(samples: list, worker_id: Any) -> tuple:
    """Stack samples ``(time, key, stack, seconds)`` taken in a worker process."""
    return (SAMPLES_NOTE, None, samples, 0.0, 0.0, worker_id, None)


def is_note(record: tuple) -> bool:
    """Whether a record is a note (not a task's end, not an announcement)."""
    return record[REC_OK] is None and record[REC_INDEX] < 0
