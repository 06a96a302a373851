"""The findings of the dashboard's finished runs: the report's analysis
(``localsched.diagnostics.analysis``) of the same records, computed once
per run off the server's event loop and shared by every page.

``run_data(log)`` turns a finished :class:`~.recorder.RunLog` into the
``RunData`` a ``Profiler`` would have built of the same computation: the
tasks, their transfers on processes (a task record's ``transfer`` field:
without them, inputs' travel reads as hand-off overhead), the failed
tasks, the graph's dependencies with when it was handed over (the
scheduler's preparation), the workers and the wall, and the machine's
load and BLAS's threads while it ran (``meta["load"]``, ``meta["blas"]``:
the ``busy`` and ``blas`` findings) -- so the dashboard names the causes
the report names.  ``Dashboard.run_data`` (the report of
what the dashboard recorded) is built of the same.

``FindingsCache`` computes them: a thread per finished run (started when a
page first shows it, ended once its findings are in; ``close`` waits for
one under way) runs ``run_data(log).findings()``; ``get(log)`` answers at
once -- the findings, or None while they are computed (the page shows
"computing" and asks again at its next refresh) -- so a 300,000-task
run's analysis (seconds) never holds up the event loop that serves every
page and ``/json/progress.json``.  Results
are kept for the last ``KEEP`` runs.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from ...worker.records_wire import TASK_TRANSFER

__all__ = ["run_data", "run_findings", "FindingsCache", "KEEP"]

#: Finished runs whose findings a cache keeps.
KEEP = 16
#: The worker thread's name.
THREAD_NAME = "localsched-findings"


def _split(error: str) -> tuple:
    kind, _, message = str(error).partition(": ")
    return kind, message


def run_data(log, now: float | None = None):
    """The ``RunData`` of a :class:`~.recorder.RunLog` (module docstring);
    ``now``: the finish of a run still going (its records so far)."""
    from ..collectors.records import FailedTaskData, GraphData, TaskData, TransferData
    from ..runs.rundata import RunData

    finished = log.finished if log.finished is not None else now
    n = len(log.ends)
    ends = log.ends[:n]
    # (every end starts with TaskRecord's first four fields)
    tasks = [TaskData(key, None, start, end, wid) for key, start, end, wid, *_ in ends]
    transfers = []
    if not log.measured:  # (the tasks' own records: TaskRecord's fields)
        for e in ends:
            travel = e[TASK_TRANSFER] if len(e) > TASK_TRANSFER else None
            if travel and (travel[0] or travel[1]):
                key, start, end, wid, *_ = e
                send, receive = travel
                transfers.append(TransferData(key, wid, start - send, start, end,
                                              end + receive))
    failed = [FailedTaskData(k, None, s, e, w, *_split(err)) for k, s, e, w, err in log.failed]
    graphs = []
    graph, workers = log.graph or (None, None)
    if graph is not None and finished is not None:
        keys, deps, order = graph
        submitted = getattr(log, "submitted", None)
        known = submitted is not None and submitted <= log.started
        graphs.append(GraphData(keys, deps, order, log.started, finished, workers,
                                submitted if known else None, None,
                                getattr(log, "stack", None) if known else None))
    walls = [(log.started, finished)] if finished is not None else []
    meta = {k: v for k, v in (("load", getattr(log, "load", None)),
                              ("blas", getattr(log, "blas", None))) if v is not None}
    return RunData(tasks=tasks, failed=failed, transfers=transfers, graphs=graphs,
                   walls=walls, meta=meta)


def run_findings(log) -> list:
    """The findings (dicts) of a finished :class:`~.recorder.RunLog`."""
    return [f.as_dict() for f in run_data(log).findings()]


class FindingsCache:
    """Each finished run's findings, computed once in a thread of its own
    and shared (module docstring)."""

    def __init__(self, keep: int = KEEP):
        self.keep = keep
        self._lock = threading.Lock()
        self._futures: dict = {}  # RunLog number -> Future of the findings
        self._threads: list = []  # (the computations under way)
        self._closed = False

    def _future(self, log) -> Future | None:
        with self._lock:
            future = self._futures.get(log.number)
            if future is None and not self._closed:
                future = self._futures[log.number] = Future()
                while len(self._futures) > self.keep:
                    del self._futures[next(iter(self._futures))]
                thread = threading.Thread(target=_compute, args=(future, log),
                                          name=THREAD_NAME, daemon=True)
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
                thread.start()
            return future

    def get(self, log) -> list | None:
        """The findings of the finished run ``log``; None while computed
        (the first call starts it).  A failed analysis is no finding."""
        future = self._future(log)
        if future is None:
            return []
        if not future.done():
            return None
        return [] if future.exception() is not None else future.result()

    def wait(self, log, timeout: float | None = None) -> list | None:
        """``get``, waiting up to ``timeout`` seconds for the computation."""
        future = self._future(log)
        if future is not None:
            try:
                future.exception(timeout)
            except TimeoutError:
                return None
        return self.get(log)

    def close(self, timeout: float = 60.0) -> None:
        """No more computed; a computation under way is waited for."""
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
        for t in threads:
            t.join(timeout)


def _compute(future: Future, log) -> None:
    """The thread's work: the findings into ``future``."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        found = run_findings(log)
    except BaseException as exc:  # noqa: BLE001 -- a failed analysis is no finding
        future.set_exception(exc)
    else:
        future.set_result(found)
