"""``performance_report``: every diagnostic on around a block, one page at the end.

>>> import os, tempfile, localsched
>>> path = os.path.join(tempfile.mkdtemp(), 'report.html')
>>> with localsched.performance_report(path, samples=False) as report:
...     localsched.get({'a': (abs, -2), 'b': (abs, 'a')}, 'b')
2
>>> sorted(r.key for r in report.data.tasks), os.path.getsize(path) > 100_000
(['a', 'b'], True)
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from functools import partial

from ..runs.rundata import RunData
from .header import run_header

__all__ = ["performance_report"]


class performance_report:
    """Record everything the computations inside a ``with`` block do, and write
    the performance report when it ends.

    Turns on a Profiler, a ResourceProfiler (every ``dt`` seconds), a
    CacheProfiler measuring results in bytes, and -- when they are available
    -- the fine metrics (``FineMetrics``) and a stack sampler
    (``SampleProfiler``, every ``interval`` seconds; ``samples=False`` turns
    it off).  After the block, ``report.data`` is the :class:`RunData`; the
    page goes to ``filename`` (None: no page), the JSON to ``json`` and the
    trace to ``trace`` when given.  The page is written even when the block
    raises -- by the process that entered the block only: a child forked
    inside it leaves it writing nothing (its profilers stopped at the fork,
    ``localsched.system.forking``).  Each file is written whole or not at all
    (``outputs.write_text``); one that cannot be written raises its
    ``OSError`` after the others are.

    >>> import localsched
    >>> with localsched.performance_report(None, samples=False) as report:
    ...     localsched.get({'a': (sum, [1, 2])}, 'a')
    3
    >>> [r.key for r in report.data.tasks], report.data.cache_metric
    (['a'], 'bytes')
    """

    def __init__(self, filename: str | None = "report.html", *, title: str | None = None,
                 dt: float = 0.25, samples: bool = True, interval: float = 0.01,
                 metrics: bool = True, json: str | None = None,
                 trace: str | None = None, mode: str | None = None,
                 scheduler: str | None = None, script: str | None = None):
        self.filename = filename
        self.title = title
        self.json_path = json
        self.trace_path = trace
        self.mode = mode
        self._dt = dt
        self._samples = samples
        self._interval = interval
        self._metrics = metrics
        self.data: RunData | None = None
        self.profilers: list = []
        self._stack: ExitStack | None = None
        #: What the header says of the run (``header.run_header``'s keywords:
        #: ``scheduler``; ``script``, ``code`` or ``name`` of what ran).
        self.header: dict = {"scheduler": scheduler, "script": script}

    def _make_profilers(self) -> list:
        from ..collectors.cache import CacheProfiler
        from ..collectors.metrics import FineMetrics
        from ..collectors.resource import ResourceProfiler
        from ..collectors.sampler import SampleProfiler
        from ..profile import Profiler

        # (metric="nbytes": cachey.nbytes measured in the workers, and on a cluster, where
        # callbacks get no results, the sizes the cluster measured)
        profilers = [ResourceProfiler(dt=self._dt), Profiler(),
                     CacheProfiler(metric="nbytes",  # type: ignore[arg-type]
                                   metric_name="bytes")]
        if self._metrics:
            profilers.append(FineMetrics())
        if self._samples:
            profilers.append(SampleProfiler(interval=self._interval))
        return profilers

    def __enter__(self) -> performance_report:
        from ..collectors.machine_load import LoadMeter
        from ..collectors.machine_speed import SpeedProbe

        self.profilers = self._make_profilers()
        self._load = LoadMeter().start()  # (the machine's load: ``busy``, the header)
        self._started = time.time()
        self._pid = os.getpid()
        with ExitStack() as stack:
            for p in self.profilers:
                stack.enter_context(p)
            self._stack = stack.pop_all()
        self._speed = SpeedProbe().start()  # (the machine's speed: ``compare``)
        return self

    def __exit__(self, *exc) -> None:
        stack, self._stack = self._stack, None
        if stack is None:
            raise RuntimeError("performance_report: __exit__ without __enter__")
        if os.getpid() != self._pid:
            return  # a forked child: the report is the parent's
        speed = self._speed.stop()
        stack.__exit__(*exc)
        from ..collectors.machine_load import blas_threads

        self.data = RunData.from_profilers(
            self.profilers, title=self.title or "localsched performance report",
            started=self._started, finished=time.time(), load=self._load.stop(),
            blas=blas_threads(), speed=speed)
        self.data.meta["header"] = self._header()
        # Each output on its own: one that cannot be written (its error is
        # raised after) costs none of the others.  The analysis is computed
        # once for both the JSON and the page.
        analysis = self.data.analysis() if self.json_path or self.filename else None
        failures = []
        for path, write in ((self.json_path, partial(self.data.save_json, analysis=analysis)),
                            (self.trace_path, self.data.to_chrome_trace),
                            (self.filename, partial(self.data.to_html, mode=self.mode,
                                                    analysis=analysis))):
            if path:
                try:
                    write(path)
                except OSError as exc:
                    failures.append(exc)
        if failures:
            raise failures[0]

    def _header(self) -> dict:
        """The run's header (``header.run_header``): the scheduler the caller
        named, else the one dask's config or localsched's default names."""
        meta = self.data.meta if self.data is not None else {}
        wanted = dict(self.header)
        if not wanted.get("scheduler"):
            wanted["scheduler"] = _scheduler_name()
        return run_header(started=meta.get("started"), finished=meta.get("finished"),
                          load=meta.get("load"), blas=meta.get("blas"), **wanted)

    def save_json(self, path) -> None:
        """Save the recorded run (after the block) as JSON."""
        self._finished().save_json(path)

    def to_chrome_trace(self, path) -> dict:
        """Export the recorded run (after the block) as a trace."""
        return self._finished().to_chrome_trace(path)

    def _finished(self) -> RunData:
        if self.data is None:
            raise RuntimeError("performance_report: the data exists once the with block ended")
        return self.data



def _scheduler_name() -> str | None:
    """The default scheduler now: dask's config ``scheduler`` (when dask is
    imported), else localsched's process default; None if neither says."""
    import sys

    chosen = None
    dask = sys.modules.get("dask")
    if dask is not None:
        try:
            chosen = dask.config.get("scheduler", None)
        except Exception:  # noqa: BLE001 -- a header is a nicety
            chosen = None
    if chosen is None:
        delayed = sys.modules.get("localsched.delayed")
        chosen = getattr(delayed, "process_default_scheduler", [None])[0]
    if chosen is None or isinstance(chosen, str):
        return chosen
    func = getattr(chosen, "func", chosen)  # (a functools.partial)
    name = f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', '')}"
    workers = getattr(chosen, "keywords", {}).get("num_workers")
    return name + (f" ({workers} workers)" if workers else "")
