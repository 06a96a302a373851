"""Profiler: when each task ran, and on which worker.

The hot path is one tuple append per task (``_posttask``); the
:class:`~localsched.diagnostics.records.TaskData` records are built only when
``results`` is read, and only for the tasks added since the last read.

Times are the worker's own measurement, ``state.timing``: epoch seconds
(``time.time()``) taken in the worker thread or worker process around the
task's execution.  So a task that waited in a process pool's queue is not
charged for the wait, and records of all profilers share one clock.
"""

from __future__ import annotations

from .collector import Collector
from .records import TaskData

__all__ = ["Profiler"]


class Profiler(Collector):
    """Record the start and end time (epoch seconds) and the worker of every task.

    Entering a ``with`` block clears earlier results; every computation inside
    the block adds to them.  A computation that fails keeps the records of the
    tasks that finished before the failure.  The profiler can also be passed
    per call (``callbacks=[prof]``) or registered with ``register()``; then it
    accumulates until ``clear()``.

    ``worker_id`` is the thread ident for the sync and threaded schedulers
    and the worker's process id for the process scheduler.

    Examples
    --------
    >>> from operator import add, mul
    >>> from localsched.local import get_sync
    >>> dsk = {'x': 1, 'y': (add, 'x', 10), 'z': (mul, 'y', 2)}
    >>> with Profiler() as prof:
    ...     get_sync(dsk, 'z')
    22
    >>> [r.key for r in prof.results]
    ['y', 'z']
    >>> r = prof.results[0]
    >>> r.task == (add, 'x', 10) and r.start_time <= r.end_time
    True
    >>> prof.clear()
    >>> prof.results
    []

    See Also
    --------
    ResourceProfiler, CacheProfiler, localsched.diagnostics.plots.visualize
    """

    record_type = TaskData

    def _posttask(self, key, result, dsk, state, worker_id):
        # One small append per task; the task itself is looked up in dsk
        # only when results are read.
        self._events(state).append((key, state.timing, worker_id))

    @staticmethod
    def _records(dsk, events: list, finish_time: float) -> list:
        return [TaskData(key, dsk[key], t[0], t[1], wid) for key, t, wid in events]

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self._raw)} computations>"
