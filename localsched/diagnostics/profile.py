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

import threading

from ..callbacks import Callback
from .records import TaskData

__all__ = ["Profiler"]


class Profiler(Callback):
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

    #: The record class of ``results`` (read by the plotting code).
    record_type = TaskData

    def __init__(self):
        # Raw (key, (start, end), worker_id, dsk) tuples appended by
        # _posttask; list.append is atomic, so computations running in
        # several threads at once can share one profiler.
        self._raw: list = []
        # TaskData built from the first len(self._built) raw entries.
        self._built: list[TaskData] = []
        # Guards the lazy build against two readers extending _built at once.
        self._build_lock = threading.Lock()

    def __enter__(self):
        self.clear()
        return super().__enter__()

    def _posttask(self, key, result, dsk, state, worker_id):
        # Keep this to one append: it runs once per task in the scheduler's
        # loop.  The task itself is looked up in dsk only when reading results.
        self._raw.append((key, state.timing, worker_id, dsk))

    @property
    def results(self) -> list[TaskData]:
        """One :class:`TaskData` per executed task, in order of completion."""
        with self._build_lock:
            raw, built = self._raw, self._built
            if len(built) < len(raw):
                built.extend(
                    TaskData(key, dsk[key], timing[0], timing[1], worker_id)
                    for key, timing, worker_id, dsk in raw[len(built):]
                )
            return list(built)

    def clear(self) -> None:
        """Forget all records."""
        with self._build_lock:
            # Rebind rather than .clear(): a computation appending right now
            # then lands in the old list, never half in each.
            self._raw = []
            self._built = []

    def visualize(self, **kwargs):
        """Plot the task stream with bokeh; see ``localsched.diagnostics.plots.visualize``."""
        from .plots import visualize

        return visualize(self, **kwargs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self._raw)} tasks>"
