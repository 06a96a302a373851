"""What the profilers share: raw events collected cheaply in the hot path,
plain records built on read, ``clear()``, ``visualize()`` and a ``with``
block that starts from a clean slate.

Two kinds of scheduler fire the hooks.  localsched's own keeps a
:class:`~localsched.view.TaskRecord` of every finished task (start, end,
freed keys ...) in the run's ``state.outcome.records`` for the callbacks
that ask (``Needs(records=True)``): a profiler that only reads what
happened takes those records (a ``TaskRecords``, read as tuples) as its
events and has no hook per task at all
(the Profiler, FineMetrics, CacheProfiler without a metric function); one
that must see results (``CacheProfiler(metric=len)``) appends one small
tuple per task in its ``posttask``.  dask's schedulers
(``dask.threaded.get`` and friends, which fire the hooks a profiler
registers with dask, see ``_dask_callback``) hand over a plain dict and
keep no records, so there a profiler appends a record per task in its
posttask and also needs ``pretask`` to learn when a task starts;
localsched's own runs never pay for those hooks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from timeit import default_timer
from typing import Any, ClassVar, NamedTuple

from ...callbacks import Callback
from ...system.forking import renew_in_child
from ...view import state_view

__all__ = ["Collector", "FinishedRun", "LiveRun"]


class LiveRun(NamedTuple):
    """One computation in progress, as a profiler collects it.

    ``events``: the run's task records when the profiler reads them, else
    its own list (see :class:`Collector`); ``started``: epoch seconds of
    ``start_state``; ``starts``: key -> epoch seconds of its ``pretask``
    (dask's schedulers only).
    """

    state: Any
    events: Any
    dsk: Any
    started: float
    starts: Any


# Placeholder for Collector._current when no computation runs.
_NO_RUN = LiveRun(None, None, None, 0.0, None)


class FinishedRun(NamedTuple):
    """The raw material of one finished computation, turned into records on read.

    ``started``/``finished``: epoch seconds of ``start_state`` and ``finish``;
    ``extra``: what a profiler kept from the state at the finish (or None).
    """

    dsk: Any
    events: Sequence  # the run's TaskRecords, or a profiler's own list
    started: float
    finished: float
    extra: Any


class Collector(Callback):
    """Base of the profilers that record per task.

    Each computation gets a :class:`LiveRun`:
    ``events`` is the run's task records when the profiler reads them
    (``needs.records``, localsched's runs: shared with the other readers,
    never changed), else a list of its own that a ``_posttask`` or
    ``_dask_posttask`` appends one small tuple of plain values to (no graph,
    no records built per task).  (``starts`` is only used under
    dask's schedulers: key -> epoch seconds of its ``pretask``.)  When the
    computation finishes (also on error) it is kept as one
    :class:`FinishedRun`, and ``_build(run)`` turns it into records when
    ``results`` is read.

    ``start_time`` and ``end_time`` are when the last ``with`` block was
    entered and left, in ``timeit.default_timer()`` seconds as dask's
    profilers have them (durations only: record times are epoch seconds).
    """

    #: The record class of ``results`` (read by the plotting code).
    record_type: ClassVar[type]

    def __init__(self):
        # Runs in progress, by id(state): computations in several threads
        # (or nested in a task) don't mix.  _current is the run whose
        # callback fired last, so the common case needs no dict lookup.
        self._live: dict = {}
        self._current: LiveRun = _NO_RUN
        # One FinishedRun per finished computation.
        self._raw: list = []
        # Records built from the first self._done raw entries.
        self._done = 0
        self._reset_built()
        # Guards the lazy build against two readers extending at once.
        self._build_lock = threading.Lock()
        renew_in_child(self)
        self.start_time: float | None = None
        self.end_time: float | None = None

    def _after_fork_in_child(self) -> None:
        self._build_lock = threading.Lock()  # (a copy may be held by a parent's thread)

    def _reset_built(self) -> None:
        """Forget the records built so far (subclasses keep more lists)."""
        self._built: list = []

    def _build(self, run: FinishedRun) -> None:
        """Turn one finished computation into records, appended to ``_built``."""
        raise NotImplementedError

    def _at_finish(self, run: LiveRun, state) -> Any:
        """What to keep from ``state`` when a computation finishes (the
        ``extra`` of its FinishedRun); called once per computation."""
        return None

    # -- the with block ----------------------------------------------------------

    def __enter__(self):
        self.clear()
        self.start_time = default_timer()
        return super().__enter__()

    def __exit__(self, *args):
        try:
            super().__exit__(*args)
        finally:
            self.end_time = default_timer()

    # -- the hooks -------------------------------------------------------------------

    def _start_state(self, dsk, state):
        events = None
        if self.needs.records:  # (None from dask's schedulers: the hooks record)
            events = state_view(state).outcome.records
        run = LiveRun(state, [] if events is None else events, dsk, time.time(), {})
        self._live[id(state)] = run
        self._current = run

    def _run_of(self, state) -> LiveRun:
        """The run the computation ``state`` belongs to."""
        run = self._current
        if run.state is not state:  # another computation's callbacks interleaved
            run = self._current = self._live[id(state)]
        return run

    def _events(self, state) -> list:
        """The event list of the computation ``state`` belongs to."""
        run = self._current
        if run.state is not state:
            run = self._current = self._live[id(state)]
        return run.events

    def _finish(self, dsk, state, errored):
        run = self._live.pop(id(state), None)
        if run is None:  # the computation failed before its state was built
            return
        if self._current is run:
            self._current = _NO_RUN  # don't keep the graph and results alive
        finished = time.time()
        extra = self._at_finish(run, state)
        self._raw.append(FinishedRun(run.dsk, run.events, run.started, finished, extra))  # atomic

    def _dask_pretask(self, key, dsk, state):
        # dask's schedulers fire pretask when they hand the task to a worker.
        self._run_of(state).starts[key] = time.time()

    @property
    def _dask_callback(self) -> tuple:
        """The hooks dask's own schedulers fire (see the module docstring)."""
        return (None, self._start_state, self._dask_pretask, self._dask_posttask, self._finish)

    def _dask_posttask(self, key, result, dsk, state, worker_id):
        raise NotImplementedError

    # -- reading ------------------------------------------------------------------------

    def _ensure_built(self) -> None:
        """Build the records of runs finished since the last read (under the lock)."""
        raw = self._raw
        if self._done < len(raw):
            for run in raw[self._done:]:
                self._build(run)
            self._done = len(raw)

    @property
    def results(self) -> list:
        """The records of the finished computations, oldest first (a copy)."""
        with self._build_lock:
            self._ensure_built()
            return list(self._built)

    def clear(self) -> None:
        """Forget all records."""
        with self._build_lock:
            # Rebind rather than .clear(): a computation finishing right now
            # then lands in the old list, never half in each.
            self._raw = []
            self._done = 0
            self._reset_built()
        self.start_time = self.end_time = None

    def visualize(self, **kwargs):
        """Plot the records with bokeh; see ``localsched.diagnostics.reporting.plots.visualize``."""
        from ..reporting.plots import visualize

        return visualize(self, **kwargs)

    def _plot(self, **kwargs):
        """This profiler's figure alone (what dask's ``visualize`` asks each
        profiler for)."""
        from ..reporting.plots import visualize

        return visualize(self, show=False, save=False, **kwargs)
