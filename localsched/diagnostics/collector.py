"""What the profilers share: raw events collected cheaply in the hot path,
plain records built on read, ``clear()``, ``visualize()`` and a ``with``
block that starts from a clean slate."""

from __future__ import annotations

import threading
import time
from timeit import default_timer
from typing import ClassVar

from ..callbacks import Callback

__all__ = ["Collector"]

# Placeholder for Collector._current when no computation runs.
_NO_RUN = (None,)


class Collector(Callback):
    """Base of the profilers that record per task.

    Each computation gets a run ``(state, events, dsk)``; a subclass's
    ``_posttask`` appends one small tuple of plain values to
    ``self._events(state)`` -- no graph, no records: tuples of atoms are
    dropped from the garbage collector's tracking, so a 100,000-task profile
    does not slow the collections down.  When the computation finishes
    (also on error) its events are kept as one raw entry, and
    ``_records(dsk, events, finish_time)`` turns them into records when
    ``results`` is read.
    """

    #: The record class of ``results`` (read by the plotting code).
    record_type: ClassVar[type]

    def __init__(self):
        # Runs in progress, by id(state): computations in several threads
        # (or nested in a task) don't mix.  _current is the run whose
        # callback fired last, so the common case needs no dict lookup.
        self._live: dict = {}
        self._current: tuple = _NO_RUN
        # One (dsk, events, finish_time) per finished computation.
        self._raw: list = []
        # Records built from the first self._done raw entries.
        self._built: list = []
        self._done = 0
        # Guards the lazy build against two readers extending _built at once.
        self._build_lock = threading.Lock()

    def _records(self, dsk, events: list, finish_time: float) -> list:
        raise NotImplementedError

    def __enter__(self):
        self.clear()
        # dask's attributes: when the with block began and ended, on
        # timeit.default_timer's clock (as dask's profilers keep them).
        self.start_time = default_timer()
        return super().__enter__()

    def __exit__(self, *args):
        try:
            super().__exit__(*args)
        finally:
            self.end_time = default_timer()

    def _start_state(self, dsk, state):
        run = (state, [], dsk)
        self._live[id(state)] = run
        self._current = run

    def _events(self, state) -> list:
        """The event list of the computation ``state`` belongs to."""
        run = self._current
        if run[0] is not state:  # another computation's callbacks interleaved
            run = self._current = self._live[id(state)]
        return run[1]

    def _finish(self, dsk, state, errored):
        run = self._live.pop(id(state), None)
        if run is None:  # the computation failed before its state was built
            return
        if self._current is run:
            self._current = _NO_RUN  # don't keep the graph and results alive
        self._raw.append((run[2], run[1], time.time()))  # append: atomic

    @property
    def results(self) -> list:
        """The records of the finished computations, oldest first (a copy)."""
        with self._build_lock:
            raw, built = self._raw, self._built
            if self._done < len(raw):
                for entry in raw[self._done:]:
                    built.extend(self._records(*entry))
                self._done = len(raw)
            return list(built)

    def clear(self) -> None:
        """Forget all records."""
        with self._build_lock:
            # Rebind rather than .clear(): a computation finishing right now
            # then lands in the old list, never half in each.
            self._raw = []
            self._built = []
            self._done = 0

    def visualize(self, **kwargs):
        """Plot the records with bokeh; see ``localsched.diagnostics.plots.visualize``."""
        from .plots import visualize

        return visualize(self, **kwargs)

    def _plot(self, **kwargs):
        """This profiler's figure alone (what dask's ``visualize`` asks each
        profiler for)."""
        from .plots import visualize

        return visualize(self, show=False, save=False, **kwargs)
