"""The scheduler side of the dashboard: what the hooks record, and nothing else.

Every hook is an append to a list of the current run's :class:`RunLog`: no
lock, no Bokeh.  On localsched's schedulers, unless result sizes are
measured, there is no per-task hook at all: the run's own task records
(``state.outcome.records``, ``Needs.records``) are the log's ``ends``.
The server thread reads the lists with a cursor (``n = len(log.ends);
new = log.ends[cursor:n]``): appends are atomic and the lists
only grow, so a reader never sees a half-written entry and the scheduler
never waits for the reader.

There is no ``pretask`` hook on localsched's schedulers: hearing each start
makes the workers announce every batch and hand records over before each
next task (figures: ``benchmarks/README.md``).  What runs
now is read instead, about ten times a second and only while a page is
open, from the run's live state (``StateView.at_work``: on threads each
worker's task slot, which its batch runner writes per task anyway, says
which task it runs, and so which tasks of its batch have ended though
their records are still on their way: the counts move as tasks end, not
as batches do; elsewhere dask's ``state["running"]``, the tasks handed to
workers).  dask's own schedulers fire ``pretask`` anyway; there it dates
the starts.
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any

from ...metrics import sizeof
from ...run.task_records import TaskRecords
from ...view import state_view
from ..collectors.call_site import caller_stack

__all__ = ["RunLog", "Recorder", "DEFAULT_HISTORY"]

#: Task records a Recorder keeps of past computations (the latest is kept
#: whole whatever its size): about 130 bytes each, some 25 MB.  Past it the
#: oldest computations are forgotten, as distributed's dashboard keeps its
#: task stream in a bounded deque.  At most ``max(history // 100, 10)``
#: computations are kept, however small.
DEFAULT_HISTORY = 200_000

#: Numbers of runs logged without a Recorder (a Recorder numbers its own from 1).
_run_numbers = itertools.count(1)


def _nbytes(value: Any) -> int:
    """Bytes of a result, its items included (``metrics.sizeof``, as the
    report and the budget count them); -1 (not counted) when it cannot be
    measured: a size is a nicety, never an error."""
    try:
        n = sizeof(value)
    except Exception:  # noqa: BLE001 -- a size is a nicety, never an error
        return -1
    return n if n is not None and n >= 0 else -1


def _meter() -> Any:
    """A started ``LoadMeter`` (the findings' ``busy``), None without
    psutil; it looks for worker processes only while a localsched process
    pool is alive (the scan costs milliseconds a computation)."""
    pools = getattr(sys.modules.get("localsched._pool.pool"), "_live_pools", None)
    try:
        from ..collectors.machine_load import LoadMeter

        return LoadMeter(descendants=bool(pools)).start()
    except (ImportError, OSError):
        return None


class RunLog:
    """One computation as the hooks saw it.

    ``keys``: the tasks that will run (set once, at ``start_state``);
    ``state``: the run's live state until it finishes; ``ends``: per finished
    task a tuple starting ``(key, start, end, worker_id, ...)``: the task's
    own record (``state.task``, a TaskRecord) when sizes are not measured,
    else ``(key, start, end, worker_id, nbytes, freed)`` (freed: the keys
    whose results its end released); at the finish,
    ``failed`` (``(key, start, end, worker_id, error)``), ``finished``,
    ``errored`` and ``graph`` (``(keys, deps, order)`` and the workers, for
    the findings of the finished run; ``profile.graph_of``), ``load`` and
    ``blas`` (the machine's load while it ran and BLAS's threads, as a
    report measures them: ``machine_load``).  ``link``: the
    dask.distributed dashboard the run used; ``number``: its place among its
    Recorder's runs (1 for the first a page shows).
    """

    __slots__ = ("number", "started", "keys", "ends", "failed", "finished",
                 "errored", "link", "dask_starts", "state", "measured", "_workers", "graph",
                 "submitted", "stack", "memory", "load", "blas", "_meter")

    def __init__(self, keys: list, link: str | None = None, state: Any = None,
                 measured: bool = False, number: int | None = None):
        self.number = next(_run_numbers) if number is None else number
        self.started = time.time()
        self.keys = keys
        self.state = state
        self.measured = measured
        self.ends: list | TaskRecords = []
        self.failed: list = []
        self.finished: float | None = None
        self.errored = False
        self.link = link
        self.dask_starts: dict = {}
        self._workers: int | None = None
        self.graph: tuple | None = None
        self.submitted: float | None = None  # (when the caller handed the graph over)
        self.stack: tuple | None = None  # (and by which frames: call_site)
        self.memory: Any = None  # (the BudgetRecord, kept at the finish)
        self.load: dict | None = None  # (LoadMeter's reading, at the finish)
        self.blas: dict | None = None
        self._meter: Any = None

    def workers(self) -> int | None:
        """The workers the computation runs on (its scheduler's
        ``num_workers``, as localsched's schedulers say in
        ``state.outcome.extra``), None if its scheduler does not say."""
        if self._workers is None and self.state is not None:
            n = state_view(self.state).outcome.extra.get("workers")
            if isinstance(n, int) and n > 0:
                self._workers = n
        return self._workers

    def budget(self) -> Any:
        """The computation's memory budget record (``state.outcome.memory``,
        filled as it runs; None without a budget)."""
        state = self.state
        if state is not None:
            return state_view(state).outcome.memory
        return self.memory

    def at_work(self) -> tuple:
        """``(keys, ended)``: the keys of the tasks running now (from the
        live state) and of the tasks that ended whose records are still on
        their way (``StateView.at_work``); ``([], [])`` once finished,
        ``(None, [])`` if the state cannot tell."""
        if self.finished is not None:
            return [], []
        state = self.state
        if state is None:
            return None, []
        for _ in range(3):
            try:
                keys, ended = state_view(state).at_work()
                return list(keys), list(ended)
            except (RuntimeError, KeyError, TypeError, IndexError, ValueError):
                continue  # (changed while read: again)
        return None, []


class Recorder:
    """The hooks' state: the runs recorded so far (``runs``, oldest first),
    the oldest forgotten past ``history`` task records (``DEFAULT_HISTORY``)."""

    def __init__(self, measure_memory: bool = False, history: int = DEFAULT_HISTORY):
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise ValueError(f"Dashboard history must be a positive int (task records kept), "
                             f"got {history!r}")
        self.measure_memory = measure_memory
        self.history = history
        self.max_runs = max(history // 100, 10)
        #: Runs forgotten so far (the oldest of ``runs`` is the next).
        self.forgotten = 0
        #: The posttask hook to install (sizes measured or not).
        self.posttask_hook = self.measured_posttask if measure_memory else self.posttask
        self.runs: list = []
        self._numbers = itertools.count(1)  # (a page's "run #1" is its first)
        self._live: dict = {}  # id(state) -> RunLog
        self._current: tuple = (None, None)  # (state, RunLog) whose hook fired last
        self._submitted: float | None = None  # the last start hook's time
        self._stack: tuple | None = None  # and the caller's frames then

    def _log(self, state) -> RunLog:
        current = self._current
        if current[0] is not state:
            current = self._current = (state, self._live[id(state)])
        return current[1]

    # -- hooks (scheduler thread) ------------------------------------------------

    def start(self, dsk) -> None:
        # (when the caller handed a graph over, before it is compiled and
        # ordered: the findings tell that preparation from the caller's time)
        self._submitted = time.time()
        self._stack = caller_stack()

    def start_state(self, dsk, state) -> None:
        view = state_view(state)
        log = RunLog(view.task_keys(), view.dashboard_link, state, self.measure_memory,
                     next(self._numbers))
        log.submitted, self._submitted = self._submitted, None
        log.stack, self._stack = self._stack, None
        log._meter = _meter()
        records = view.outcome.records
        if not self.measure_memory and records is not None:
            # localsched's run keeps every task's record (``Needs.records``):
            # the page reads them; nothing of ours runs per task.
            log.ends = records
        self._live[id(state)] = log
        self._current = (state, log)
        self.runs.append(log)  # last: a reader sees a complete RunLog
        self._forget_old()

    def _forget_old(self) -> None:
        """Drop the oldest runs past the history bound (never the latest,
        nor one still running).  Readers take ``runs[-1]`` or a copy of the
        list: deleting from its head is one atomic operation for them."""
        runs = self.runs
        kept = sum(len(log.ends) or len(log.keys) for log in runs[:-1])
        drop = 0
        while drop < len(runs) - 1 and (kept > self.history or
                                        len(runs) - drop > self.max_runs):
            if runs[drop].finished is None:  # (a computation still running: kept)
                break
            kept -= len(runs[drop].ends) or len(runs[drop].keys)
            drop += 1
        if drop:
            del runs[:drop]
            self.forgotten += drop

    def posttask(self, key, result, dsk, state, worker_id) -> None:
        # The task's record as it is: one append, no tuple built per task.
        current = self._current
        log = current[1] if current[0] is state else self._log(state)
        log.ends.append(state.task)

    def measured_posttask(self, key, result, dsk, state, worker_id) -> None:
        task = state.task
        self._log(state).ends.append((key, task.start, task.end, worker_id, _nbytes(result),
                                      tuple(task.freed)))

    def dask_pretask(self, key, dsk, state) -> None:
        self._log(state).dask_starts[key] = time.time()

    def dask_posttask(self, key, result, dsk, state, worker_id) -> None:
        end = time.time()
        log = self._log(state)
        nbytes = _nbytes(result) if self.measure_memory else -1
        log.ends.append((key, log.dask_starts.pop(key, end), end, worker_id, nbytes, ()))

    def finish(self, dsk, state, errored) -> None:
        log = self._live.pop(id(state), None)
        if log is None:
            return
        if self._current[1] is log:
            self._current = (None, None)
        failed = state_view(state).failed
        log.failed = [(k, s, e, w, f"{type(exc).__name__}: {exc}"[:300])
                      for k, (exc, s, e, w) in dict(failed).items()]
        log.errored = bool(errored)
        log.workers()  # (read while the state is there)
        view = state_view(state)
        log.graph = (view.task_graph(), view.outcome.extra.get("workers"))
        log.memory = view.outcome.memory
        meter, log._meter = log._meter, None
        if meter is not None:
            from ..collectors.machine_load import blas_threads

            log.load = meter.stop()
            # (threadpoolctl takes milliseconds; a run this short has no
            # blas finding: causes.MIN_SECONDS of waits)
            log.blas = blas_threads() if log.load["seconds"] >= 0.05 else None
        log.finished = time.time()
        log.state = None  # (don't keep the graph and its results alive)
