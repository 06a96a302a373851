"""Profiler: when each task ran, and on which worker.

Nothing of it runs per task: it reads the run's task records
(``Needs(records=True)``, see ``collector``); the
:class:`~localsched.diagnostics.collectors.records.TaskData` records are built only when
``results`` is read, and only for the computations finished since the last read.

Times are the worker's own measurement, ``state.timing``: epoch seconds
(``time.time()``) taken in the worker thread or worker process around the
task's execution.  So a task that waited in a process pool's queue is not
charged for the wait, and records of all profilers share one clock.  On the
process scheduler ``state.transfer`` adds, per task, the seconds spent
shipping its inputs there and its result back (``transfers``).

What did not finish is kept apart from ``results`` (whose records are
dask's five-field ``TaskData``): ``failed`` (tasks that raised, read from
``state.failed`` at the finish) and ``interrupted`` (tasks still running when
the computation stopped, from ``state.running_since``; on a cluster also
the attempts whose worker died under them, ``state.lost``).
"""

from __future__ import annotations

import time

from ..callbacks import Needs
from ..view import TaskRecord, state_view
from .collectors.budgets import snapshot
from .collectors.call_site import caller_stack
from .collectors.collector import Collector, FinishedRun, LiveRun
from .collectors.literals import graph_inputs
from .collectors.records import (
    FailedTaskData,
    GraphData,
    InterruptedTaskData,
    TaskData,
    TransferData,
)
from .reporting.summary import Summary, summarize

__all__ = ["Profiler", "graph_of"]

#: Longest exception message kept in a FailedTaskData (messages can embed
#: whole arrays).
MESSAGE_LIMIT = 500


class Profiler(Collector):
    """Record the start and end time (epoch seconds) and the worker of every task.

    Entering a ``with`` block clears earlier results; every computation inside
    the block adds to them.  A computation that fails keeps the records of the
    tasks that finished before the failure in ``results``; the task that
    raised is in ``failed`` and the tasks cut short in ``interrupted``.  The
    profiler can also be passed per call (``callbacks=[prof]``) or registered
    with ``register()``; then it accumulates until ``clear()``.

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
    >>> s = prof.summary()
    >>> s.tasks, s.failed, sorted(g.name for g in s.groups)  # (by time spent: a tie here)
    (2, 0, ['y', 'z'])
    >>> prof.clear()
    >>> prof.results
    []

    See Also
    --------
    ResourceProfiler, CacheProfiler, localsched.diagnostics.reporting.plots.visualize
    """

    # No hook per task: it reads the run's records; results may stay in the workers.
    needs = Needs(results=False, records=True)

    record_type = TaskData

    def _reset_built(self) -> None:
        self._built = []
        self._failed: list = []
        self._interrupted: list = []
        self._transfers: list = []
        self._walls: list = []  # (start_state, finish) epoch seconds per computation
        self._graphs: list = []  # GraphData per computation (its dependencies)
        self._budgets: list = []  # BudgetRecord per computation run with a memory budget
        self._submitted: float | None = None  # when the last graph was handed over
        self._stack: tuple | None = None  # and by which frames (call_site)
        self.dashboard: str | None = None  # a cluster run's own dashboard link

    def _start(self, dsk):
        # (when and where the caller handed a graph over: before it is compiled
        # and ordered; once per computation)
        self._submitted = time.time()
        self._stack = caller_stack()

    def _dask_posttask(self, key, result, dsk, state, worker_id):
        end = time.time()
        run = self._run_of(state)
        run.events.append(TaskRecord(key, run.starts.pop(key, end), end, worker_id, []))

    def _at_finish(self, run: LiveRun, state):
        """(failed, running) at the finish, as plain values: exceptions become text."""
        view = state_view(state)
        self.dashboard = view.dashboard_link or self.dashboard
        failed = []
        for key, (exc, start, end, worker) in dict(view.failed).items():
            failed.append((key, start, end, worker, type(exc).__name__, _message(exc)))
        since = view.running_since
        if since is not None:
            running = [(key, start, worker) for key, (start, worker) in dict(since).items()]
        else:
            # dask's schedulers: handed out (pretask) but never reported back.
            running = [(key, start, None) for key, start in run.starts.items()]
        # localsched.distributed: attempts whose worker died under them (the
        # task ran again); dispatch time to the loss, on the lost worker.
        stopped = [(key, start, worker, None) for key, start, worker in running]
        stopped += [(key, start, worker, stop) for key, start, stop, worker in view.lost]
        submitted, stack = self._submitted, self._stack
        if submitted is None or submitted > run.started:  # (another computation's start)
            submitted = stack = None
        workers = view.outcome.extra.get("workers")
        return failed, stopped, graph_of(state), workers, submitted, snapshot(state), stack

    def _build(self, run: FinishedRun) -> None:
        dsk = run.dsk
        # (run.events: tuples of TaskRecord's fields, the run's TaskRecords or our own)
        self._built.extend(TaskData(key, dsk[key], start, end, worker_id)
                           for key, start, end, worker_id, *_ in run.events)
        for key, t0, t1, w, _, transfer, *_ in run.events:
            if transfer and (transfer[0] or transfer[1]):
                send, receive = transfer
                self._transfers.append(TransferData(key, w, t0 - send, t0, t1, t1 + receive))
        failed, running, graph, workers, submitted, budget, stack = (
            run.extra or ((), (), None, None, None, None, None))
        if budget is not None:
            self._budgets.append(budget)
        if graph is not None:
            keys, deps, order = graph
            self._graphs.append(GraphData(keys, deps, order, run.started, run.finished,
                                          workers, submitted,
                                          graph_inputs(dsk, keys, deps, order), stack))
        for key, start, end, worker, exc_type, message in failed:
            self._failed.append(
                FailedTaskData(key, dsk.get(key), start, end, worker, exc_type, message))
        for key, start, worker, stop in running:
            stop = max(run.finished if stop is None else stop, start)
            self._interrupted.append(InterruptedTaskData(key, dsk.get(key), start, stop, worker))
        self._walls.append((run.started, run.finished))

    def _read(self, name: str) -> list:
        with self._build_lock:
            self._ensure_built()
            return list(getattr(self, name))

    @property
    def failed(self) -> list:
        """:class:`FailedTaskData` of the tasks that raised, oldest run first (a copy)."""
        return self._read("_failed")

    @property
    def interrupted(self) -> list:
        """:class:`InterruptedTaskData` of the tasks running when a computation
        was stopped (Ctrl-C, another task's error), up to the stop (a copy)."""
        return self._read("_interrupted")

    @property
    def transfers(self) -> list:
        """:class:`TransferData` of the process-pool tasks that spent time
        travelling (empty on threads and sync) (a copy)."""
        return self._read("_transfers")

    @property
    def walls(self) -> list:
        """``(start, finish)`` epoch seconds of every finished computation."""
        return self._read("_walls")

    @property
    def graphs(self) -> list:
        """:class:`GraphData` of every finished computation: its dependencies
        and run order, kept once per computation (the analysis reads them)."""
        return self._read("_graphs")

    @property
    def budgets(self) -> list:
        """:class:`~localsched.run.budget_record.BudgetRecord` of every finished
        computation that ran within a memory budget (``memory_limit=``)."""
        return self._read("_budgets")

    def summary(self, top: int = 10) -> Summary:
        """The numbers to read first: wall time, tasks, workers, efficiency, top groups.

        See :class:`localsched.diagnostics.reporting.summary.Summary`.
        """
        with self._build_lock:
            self._ensure_built()
            return summarize(self._built, self._failed, self._interrupted,
                             walls=self._walls, top=top, dashboard=self.dashboard)

    def to_pandas(self):
        """The finished tasks as a pandas DataFrame: one row per ``TaskData``
        (``key``, ``task``, ``start_time``, ``end_time``, ``worker_id``) plus
        ``group`` (dask's ``key_split``) and ``duration`` in seconds."""
        from .reporting.tables import records_frame

        return records_frame(self.results, TaskData)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self._raw)} computations>"


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not break the profile
        text = "<unprintable>"
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "\u2026"


def graph_of(state) -> tuple | None:
    """``(keys, deps, order)`` of a computation's graph, as cheaply as the
    scheduler allows: localsched's own lists as they are (no copy); a
    cluster's or dask's key -> dependencies mapping turned into the same
    layout (once per computation, at its finish; order None)."""
    return state_view(state).task_graph()
