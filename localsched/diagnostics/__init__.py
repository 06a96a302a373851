"""Diagnostics built on the five scheduler callbacks.

Wrap a computation in ``with`` blocks (or ``register()`` them once):

>>> from localsched.diagnostics import Profiler, ResourceProfiler, CacheProfiler
>>> from localsched.local import get_sync
>>> with Profiler() as prof, CacheProfiler() as cprof:
...     get_sync({'a': (abs, -1), 'b': (abs, 'a')}, 'b')
1
>>> [r.key for r in prof.results], [r.key for r in cprof.results]
(['a', 'b'], ['a', 'b'])

then ``visualize([prof, rprof, cprof])`` for one page: a summary (wall
time, tasks, workers, parallel efficiency, the task groups that took the
time; also ``prof.summary()``), then the task stream, resources and cache on
a shared time axis.  Every record's times are epoch seconds
(``time.time()``), taken where the event happened, so the profilers line up.
Failed, interrupted and travelling tasks are recorded beside dask's
``TaskData`` records (``prof.failed``, ``prof.interrupted``,
``prof.transfers``).

Where the time went inside the tasks: ``FineMetrics`` (seconds per span,
task group and activity, every worker-second booked once) and
``SampleProfiler`` (call stacks sampled per task group, as totals or a
flame-graph tree).

They also work around dask's own schedulers (``dask.threaded.get``, a
dask collection's ``.compute()``), as dask's diagnostics do.

Writing your own: subclass ``localsched.callbacks.Callback`` and override
any of ``_start(dsk)``, ``_start_state(dsk, state)``, ``_pretask(key, dsk,
state)``, ``_posttask(key, result, dsk, state, worker_id)``, ``_finish(dsk,
state, errored)``:

>>> from localsched.callbacks import Callback
>>> class PrintKeys(Callback):
...     def _pretask(self, key, dsk, state):
...         print("starting", key)
>>> with PrintKeys():
...     get_sync({'x': (len, [1, 2])}, 'x')
starting x
2

``performance_report`` (also ``localsched.performance_report``) turns all of
them on around a block of code and writes one self-contained HTML page;
its ``RunData`` saves the records as JSON and exports a Chrome/Perfetto
trace (``localsched.diagnostics.report``).  Every profiler and ``RunData``
has ``to_pandas()``; ``Summary`` and ``RunData`` show as tables in a notebook.

How the package is laid out
---------------------------
The modules here are the public names (dask's ``profile``, ``progress``,
``profile_visualize``, and ``report``); the rest lies in folders, imports
pointing down only; bokeh is imported only when you plot, pandas only by
``to_pandas()``::

    collectors/  callbacks that record, cheaply, and the plain records
                 everything else reads (``records``)
    runs/        one run's records as one object (``RunData``): saved as
                 JSON, checked when read back, exported as a trace
    analysis/    what to change: findings, the critical path, memory at
                 the peak, the what-if, run comparison -- pure functions
    reporting/   the numbers, tables and texts, and the pages
                 (``visualize``, ``performance_report``)
    figures/     the bokeh figures, one module a figure
    live/        the live dashboard

Every module, one line each: ``docs/explanation/layout.md``.
"""

from __future__ import annotations

from .collectors.cache import CacheProfiler
from .collectors.metrics import FineMetrics
from .collectors.records import (
    ActivityData,
    CacheData,
    FailedTaskData,
    InterruptedTaskData,
    MetricData,
    ResourceData,
    SampleData,
    TaskData,
    TransferData,
    WorkerResourceData,
)
from .collectors.resource import ResourceProfiler
from .collectors.sampler import SampleProfiler
from .profile import Profiler
from .progress import ProgressBar
from .reporting.summary import GroupSummary, Summary

__all__ = [
    "Profiler",
    "ResourceProfiler",
    "CacheProfiler",
    "ProgressBar",
    "FineMetrics",
    "SampleProfiler",
    "TaskData",
    "FailedTaskData",
    "InterruptedTaskData",
    "TransferData",
    "ResourceData",
    "WorkerResourceData",
    "CacheData",
    "MetricData",
    "ActivityData",
    "SampleData",
    "Summary",
    "GroupSummary",
    "visualize",
    "performance_report",
    "RunData",
    "RunFileError",
    "to_chrome_trace",
    "load_json",
    "Dashboard",
    "dashboard",
]

_LAZY = {"performance_report", "RunData", "RunFileError", "to_chrome_trace", "load_json"}


def __getattr__(name: str):
    # The live dashboard (and so bokeh's server) loads on first use.
    if name in ("Dashboard", "dashboard"):
        from . import live

        return getattr(live, name)
    # The report module (JSON, trace, the page) loads on first use.
    if name in _LAZY:
        from . import report

        return getattr(report, name)
    raise AttributeError(f"module 'localsched.diagnostics' has no attribute {name!r}")


def visualize(profilers, filename="profile.html", show=True, save=True, mode=None,
              **figure_kwargs):
    """Stack the profilers' Bokeh plots on one aligned time axis, under a summary.

    See ``localsched.diagnostics.reporting.plots.visualize`` (bokeh is imported here,
    on first use).
    """
    from .reporting.plots import visualize as _visualize

    return _visualize(profilers, filename=filename, show=show, save=save, mode=mode,
                      **figure_kwargs)
