"""CacheProfiler: how long each task result stayed in the scheduler's cache.

A result enters the cache when its task ends (``state.task.end``, measured
by the worker) and leaves it when the scheduler drops it, which happens when
its last dependent has finished; requested outputs stay until the end.

Leaving is read from each task record's ``freed``: the keys the scheduler
released when that task ended.  With no metric or ``"nbytes"`` (a size the
worker measured, ``TaskRecord.nbytes``) nothing of the profiler runs per
task: it reads the run's task records (``Needs(records=True)``).  A metric
function must see each result: its ``posttask`` appends one tuple per task
-- (key, end, metric, freed).  Entries are matched with exits when
``results`` is read.  Whatever is still cached when the computation ends is
freed at the finish time.  All times are epoch seconds (time.time).

A result whose size cannot be measured (``metrics.sizeof`` gives None, a
metric function raises or returns no number) gets ``metric`` NaN: unknown,
which the report notes and draws as 0; the computation goes on.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...callbacks import Needs
from ...metrics import sizeof
from ...utils import funcname
from ...worker.records_wire import TASK_END, TASK_FREED, TASK_KEY, TASK_NBYTES, TaskRecord
from .collector import Collector, FinishedRun
from .records import CacheData

__all__ = ["CacheProfiler"]

class CacheProfiler(Collector):
    """Record when each task result entered and left the scheduler's cache.

    Parameters
    ----------
    metric : callable or "nbytes", optional
        Applied to each result to give its size, e.g. ``len`` or
        ``cachey.nbytes``.  Default: every result counts 1.  ``"nbytes"``:
        the bytes the result holds, its items included
        (``localsched.metrics.sizeof``), measured where the
        result lives -- in the worker process, which sends only the number,
        so no result travels to be measured -- or the size the cluster
        measured on ``localsched.distributed``.  With no metric or
        ``"nbytes"`` the profiler never reads results.
    metric_name : str, optional
        Label of the metric in plots.  Default: the metric's name, or
        ``"tasks"`` when no metric is given.

    Notes
    -----
    ``cache_time`` is the end of the task (measured by its worker) and
    ``free_time`` the end of the task whose completion released the result,
    or the end of the computation for results still cached then (outputs).
    Both are epoch seconds (``time.time``).  Entering a ``with`` block clears
    earlier results; data keys of the graph (not tasks) are not recorded.

    Examples
    --------
    >>> from operator import add
    >>> from localsched.local import get_sync
    >>> dsk = {'x': [1, 2, 3], 'y': (sum, 'x'), 'z': (add, 'y', 1)}
    >>> with CacheProfiler() as cprof:
    ...     get_sync(dsk, 'z')
    7
    >>> sorted((r.key, r.metric) for r in cprof.results)
    [('y', 1), ('z', 1)]
    >>> all(r.cache_time <= r.free_time for r in cprof.results)
    True
    >>> cprof.metric_name
    'tasks'
    >>> CacheProfiler(metric=len).metric_name
    'len'

    See Also
    --------
    Profiler, ResourceProfiler, localsched.diagnostics.reporting.plots.visualize
    """

    record_type = CacheData

    def __init__(self, metric: Callable[[Any], float] | None = None,
                 metric_name: str | None = None):
        if metric is not None and not callable(metric) and metric != "nbytes":
            raise TypeError(f"CacheProfiler metric= must be callable, got {metric!r}")
        if metric_name is not None and not isinstance(metric_name, str):
            raise TypeError(f"CacheProfiler metric_name= must be a str, got {metric_name!r}")
        self._metric = metric
        # What the scheduler must provide: results only for a metric of ours
        # to apply (then a hook per task); else the run's task records,
        # with each result's size measured in the workers for "nbytes".
        if callable(metric):
            self.needs = Needs(results=True)
            self._posttask = self._measure_result
        else:
            self.needs = Needs(results=False, sizes=metric == "nbytes", records=True)
        if metric_name is None:
            metric_name = ("tasks" if metric is None else
                           "nbytes" if metric == "nbytes" else funcname(metric))
        #: Label of the metric (read by the plotting code).
        self.metric_name = metric_name

        super().__init__()

    def _measure_result(self, key, result, dsk, state, worker_id):
        # (the posttask of a metric function) One small append per task
        # (freed keys as a tuple: tuples of atoms leave the garbage
        # collector's tracking).
        task = state.task
        freed = task.freed
        self._events(state).append((key, task.end, _measured(self._metric, result),
                                    tuple(freed) if freed else ()))

    def _dask_posttask(self, key, result, dsk, state, worker_id):
        # dask's state has no timing and no freed: the result entered now,
        # and the inputs this task's end released are those of its
        # dependencies now in state["released"].
        end = time.time()
        metric = self._metric
        released = state["released"]
        freed = tuple(d for d in state["dependencies"].get(key, ()) if d in released)
        if callable(metric):
            self._events(state).append((key, end, _measured(metric, result), freed))
        else:  # (the layout of a task record, as localsched's runs keep them)
            # (the result lives here: dask's schedulers run no worker process)
            size = _size_or_nan(sizeof(result)) if metric == "nbytes" else None
            self._events(state).append(TaskRecord(key, end, end, worker_id, freed, nbytes=size))

    def to_pandas(self):
        """The cache stays as a pandas DataFrame: one row per ``CacheData``
        (``key``, ``task``, ``metric``, ``cache_time``, ``free_time``) plus ``group``."""
        from ..reporting.tables import records_frame

        return records_frame(self.results, CacheData)

    @property
    def _metric_name(self) -> str:
        # dask's name for it.
        return self.metric_name

    def _build(self, run: FinishedRun) -> None:
        events = run.events
        metric = self._metric
        if not callable(metric):  # task records: (key, end, metric, freed) of each
            sized = metric == "nbytes"
            events = [(task[TASK_KEY], task[TASK_END],
                       _size_or_nan(task[TASK_NBYTES]) if sized else 1, task[TASK_FREED])
                      for task in events]
        self._built.extend(self._records(run.dsk, events, run.finished))

    @staticmethod
    def _records(dsk, events: Sequence, finish_time: float) -> list:
        """The CacheData of one computation, in order of freeing."""
        entered: dict = {}
        out = []
        for key, end, metric, freed in events:
            entered[key] = (metric, end)
            for dep in freed:
                entry = entered.pop(dep, None)
                if entry is not None:  # None: a data key, not a task
                    out.append(CacheData(dep, dsk[dep], entry[0], entry[1], end))
        for key, (metric, cache_time) in entered.items():  # still cached at the end
            out.append(CacheData(key, dsk[key], metric, cache_time,
                                 max(finish_time, cache_time)))
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__} metric={self.metric_name}: {len(self._raw)} computations>"


def _measured(metric, result) -> Any:
    """``metric(result)``, or NaN (unknown) when it raises or gives no
    number: a metric never fails the computation it measures."""
    try:
        value = metric(result)
        return value if isinstance(value, numbers.Real) else math.nan
    except Exception:  # noqa: BLE001 -- a size is a nicety, never an error
        return math.nan


def _size_or_nan(size):
    return math.nan if size is None else size
