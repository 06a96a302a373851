"""One computation on a cluster, through dask.distributed's own client path,
observed: ``ClusterComputation(client, graph, keys, ...).run()``.

The graph goes to ``client.get(graph, keys, sync=False, **options)``
unchanged (a dict, a HighLevelGraph or a dask expression; futures,
persisted keys, annotations, P2P shuffles: whatever dask.distributed
accepts), and the results come back through ``client.gather``, as
``Client.get`` itself does; so every error is dask.distributed's own
(a task's exception, ``FutureCancelledError`` with its reason after a
cancel, close or restart, ``CancelledError`` when the scheduler is lost,
the scheduler's ``no-workers-timeout``...).  localsched only listens: the
event stream (``_stream``) brings the scheduler's view of the graph and
each task's dispatch and end, and the hooks fire from it in the caller's
thread, never concurrently.

The lifecycle is the one every localsched loop has (the core's
``Computation``): ``start(dsk)`` before the graph is sent; ``start_state``
when the scheduler has the graph (the first event of the computation);
``pretask`` at dispatch, ``posttask`` at the end; ``finish`` once, on every
exit path (success, a task's error, a cancel, close or restart from another
thread, Ctrl-C), after a barrier that makes it follow the last event.

What a callback cannot see on this path: tasks the cluster already held
(they never run); the true start of a task before its end (pretask is the
dispatch; the worker may hold the task queued); a task's result (posttask
gets None: results stay on the workers); tasks other clients run for the
same keys.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from queue import Empty, SimpleQueue
from typing import Any

from ..utils import key_split
from ..view import TaskRecord
from . import _stream
from ._state import ClusterState

#: Seconds ``finish`` waits for the barrier (every event of the computation)
#: before giving up and setting ``state.incomplete``.
BARRIER_TIMEOUT = 10.0
#: The caller wakes at least this often (seconds) to notice finished futures.
POLL = 0.05


class LazyGraph(Mapping):
    """The graph the callbacks see: the Mapping given, or an expression
    materialized on first lookup (dask hands client.get an expression; only
    a callback that reads task specs pays for materializing it).  Keys of
    the computation the graph does not hold (tasks the cluster made of
    futures) map to None."""

    def __init__(self, graph: Any):
        self.source = graph
        self._graph: Mapping | None = graph if isinstance(graph, Mapping) else None

    def _mapping(self) -> Mapping:
        if self._graph is None:
            from ..plan.graph import as_mapping

            try:
                self._graph = as_mapping(self.source)
            except Exception:  # noqa: BLE001 -- a graph only the cluster can build
                self._graph = {}
        return self._graph

    def __getitem__(self, key):
        return self._mapping().get(key)

    def __contains__(self, key) -> bool:
        return key in self._mapping()

    def __iter__(self):
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())


class ClusterComputation:
    """Send, observe, gather (see the module docstring).  ``hooks`` is the
    lifecycle (``localsched.run.lifecycle.Computation``) already started.

    Failures are dask.distributed's own: a task's exception,
    ``FutureCancelledError`` (with its reason) after ``client.cancel``,
    ``client.close`` or ``client.restart`` from another thread,
    ``CancelledError`` when the scheduler is lost; when every worker is gone,
    the computation waits as dask.distributed does
    (``distributed.scheduler.no-workers-timeout``).  ``finish`` fires with
    ``errored=True``; the next computation works.  At the stop,
    ``state.running_since`` holds the tasks a worker was executing and
    ``state.queued_since`` those dispatched but not started.  A Ctrl-C
    interrupts the computation, not the cluster.
    """

    def __init__(self, client, graph, keys, life, options: dict, rerun: bool = False,
                 timed_groups: bool = False):
        self.rerun = rerun
        self.timed_groups = timed_groups  # keep state.group_seconds
        self.client = client
        self.graph = graph
        self.keys = keys
        self.life = life
        self.options = options
        self.stream = _stream.stream_of(client)
        self.queue: SimpleQueue = SimpleQueue()
        self.offset = 0.0
        self.packed = None
        self.futures: list = []
        self.state: ClusterState | None = None

    def run(self):
        from ..plan.graph import flatten_keys

        client, stream, q = self.client, self.stream, self.queue
        flat = frozenset(flatten_keys(self.keys, []))
        self.offset = stream.offset()
        stream.expect(flat, q)
        try:
            self.packed = client.get(self.graph, self.keys, sync=False, **self.options)
            self.futures = _futures_in(self.packed)
            self._pump()
            self._barrier()
            if client.status in ("closing", "closed"):
                _raise_cancelled(self.futures)
            return client.gather(self.packed)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                self._cancel()
            else:
                self._barrier()  # (tasks that ended before the stop: their events)
            self._stopped()
            self.failed_exception(exc)
            if self.rerun and isinstance(exc, Exception) and client.status == "running":
                from ._rerun import rerun_locally

                rerun_locally(client, self, exc)
            raise
        finally:
            stream.forget(q)
            self._open(None)  # (start_state before finish, even with no graph)
            _release(client, self.futures)

    # -- the event loop ------------------------------------------------------------

    def _pump(self) -> None:
        """Fire hooks from the stream until every output future is done, one
        failed, or the Client stops (its futures are cancelled then)."""
        q, futures, client = self.queue, self.futures, self.client
        while True:
            try:
                events = q.get(timeout=POLL)
            except Empty:
                events = None
            if events:
                self._fire(events)
            if client.status in ("closing", "closed"):
                return
            pending = []
            for f in futures:
                if not f.done():
                    pending.append(f)
                elif f.status != "finished":
                    return  # (gather raises at the first failed output, as Client.get does)
            futures = pending
            if not futures:
                return

    def _barrier(self) -> None:
        """Wait for every event the scheduler sent before the outputs were
        done (the mark comes after them on the same ordered stream)."""
        import uuid

        from . import _plugin

        client = self.client
        if client.status != "running":
            return
        token = uuid.uuid4().hex
        marks = self.stream.marks
        marks[token] = self.queue
        try:
            client.log_event(_plugin.MARK_TOPIC, {"client": client.id, "token": token})
            deadline = time.monotonic() + BARRIER_TIMEOUT
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or client.status != "running":
                    if self.state is not None:
                        self.state.incomplete = True
                    return
                try:
                    events = self.queue.get(timeout=min(left, POLL))
                except Empty:
                    continue
                if events[-1][0] == "mark" and events[-1][1] == token:
                    self._fire(events[:-1])
                    return
                self._fire(events)
        finally:
            marks.pop(token, None)

    def _open(self, rows: list | None) -> ClusterState:
        state = self.state
        if state is None:
            from ..plan.graph import flatten_keys

            state = self.state = ClusterState(self.client, frozenset(flatten_keys(self.keys, [])))
            state.clock_offset = self.offset
            if self.timed_groups:
                state.group_seconds = {}
            if rows:
                graph = self.graph
                if isinstance(graph, dict):  # (its data: in memory, as locally)
                    rows = [(k, deps, done or _is_data(graph, k)) for k, deps, done in rows]
                state.load(rows)
            self.life.open(state=state)
        return state

    def _fire(self, events: list) -> None:
        state = self.state
        life = self.life
        offset = self.offset
        dsk = life.dsk
        for ev in events:
            kind, key = ev[0], ev[1]
            if kind == "graph":
                state = self._open(ev[2])
                continue
            if state is None or key not in state.status:
                continue  # (held by the cluster from the start: no hooks)
            if kind == "dispatch":
                if state.dispatch(key, ev[2] - offset, ev[3]):
                    for f in life.pretasks:
                        f(key, dsk, state)
            elif kind == "done":
                _, _, t, worker, thread, startstops, nbytes = ev
                if key not in state.dispatched:  # (keep pretask before posttask)
                    state.dispatch(key, t - offset, worker)
                    for f in life.pretasks:
                        f(key, dsk, state)
                wid = self.stream.worker_id(worker, thread)
                start, stop, activities = _startstops(startstops, t, offset)
                timed = state.group_seconds
                if timed is not None:
                    group = key_split(key)
                    timed[group] = timed.get(group, 0.0) + (stop - start)
                freed = state.done(key)
                state.worker = worker
                state.task = TaskRecord(key, start, stop, wid, freed, None, None, activities,
                                        nbytes)
                for f in life.posttasks:
                    f(key, None, dsk, state, wid)
            elif kind == "erred":
                _, _, t, worker, thread, startstops, text = ev
                start, stop, _ = _startstops(startstops, t, offset)
                state.dispatched.pop(key, None)
                state.failed[key] = (TaskFailed(text), start, stop,
                                     self.stream.worker_id(worker, thread))
            elif kind == "lost":
                since = state.dispatched.pop(key, None)
                if ev[4].startswith(("cancel", "remove-client", "client-releases")):
                    continue  # cancelled or released: not lost
                if since is not None:
                    # (the thread is unknown: the worker died before reporting)
                    state.lost.append((key, since[0], ev[2] - offset,
                                       self.stream.worker_id(since[1], None)))

    # -- stopping early ------------------------------------------------------------

    def _stopped(self) -> None:
        """The computation stopped before its end (an error, a cancel,
        Ctrl-C): say which of its dispatched tasks a worker was executing
        (asking the workers, when they can answer) and which were queued."""
        state = self.state
        if state is None or not state.dispatched:
            return
        client, offset = self.client, self.offset
        dispatched = dict(state.dispatched)
        executing: dict = {}
        if client.status == "running":
            from . import _plugin

            try:
                answers = client.run(_plugin.executing, list(dispatched), on_error="return")
            except BaseException:  # noqa: B036, BLE001 -- best effort; the stop matters more
                answers = {}
            for worker, rows in answers.items():
                if isinstance(rows, BaseException):
                    continue
                for key, start, thread in rows:
                    executing[key] = (start - offset if start is not None else None,
                                      self.stream.worker_id(worker, thread))
        for key, (t, worker) in dispatched.items():
            if key in executing:
                start, wid = executing[key]
                state.outcome.running_since[key] = (t if start is None else start, wid)
            else:
                state.queued_since[key] = (t, self.stream.worker_id(worker, None))

    def _cancel(self) -> None:
        """Ctrl-C: cancel the computation's futures on the cluster (one
        message), so its tasks stop there too."""
        if self.futures and self.client.status == "running":
            try:
                self.client.cancel(self.futures, reason="KeyboardInterrupt")
            except BaseException:  # noqa: B036, BLE001, S110 -- the interrupt matters more
                pass

    def failed_exception(self, exc: BaseException) -> None:
        """Put the real exception in ``state.failed`` of the task that raised
        it, and name that task on the exception (a note)."""
        state = self.state
        if state is None:
            return
        for key, (old, start, stop, wid) in list(state.failed.items()):
            if isinstance(old, TaskFailed):
                state.failed[key] = (exc, start, stop, wid)
                note = f"while computing task {key!r}"
                if hasattr(exc, "add_note") and note not in getattr(exc, "__notes__", ()):
                    exc.add_note(note)
                return


class TaskFailed(Exception):
    """Stands for a task's exception, known only as text, in ``state.failed``."""


def _release(client, futures: list) -> None:
    """Release the futures' keys on the cluster, queued *now*: the public
    ``Future.release()`` defers the message by two IO-loop hops, so a next
    graph with the same keys, sent from this thread right after, reached
    the scheduler first and found this computation's (possibly erred)
    results.  (Private Client API, guarded: the fallback is the public call.)"""
    for f in futures:
        try:
            if not f._cleared and client.generation == f._generation:
                f._cleared = True
                client._dec_ref(f.key)
        except AttributeError:
            f.release()


def _is_data(graph: dict, key) -> bool:
    """Whether ``graph[key]`` is data (no task, no reference to a key)."""
    from dask.core import get_dependencies, istask

    value: Any = graph.get(key)
    node_type = getattr(sys.modules.get("dask._task_spec"), "DataNode", None)
    if node_type is not None and isinstance(value, node_type):
        return True
    if istask(value) or hasattr(value, "dependencies"):
        return False
    try:
        return not get_dependencies(graph, task=value)
    except Exception:  # noqa: BLE001 -- not a dask spec: let the cluster say
        return False


def _raise_cancelled(futures: list) -> None:
    """The Client was closed under the computation: raise what its
    cancelled futures hold (dask.distributed's FutureCancelledError), as a
    gather would have; gathering on a closed Client fails otherwise."""
    from distributed.client import FutureCancelledError

    for f in futures:
        if f.status == "cancelled":
            exc = getattr(getattr(f, "_state", None), "exception", None)
            raise exc if isinstance(exc, BaseException) else \
                FutureCancelledError(f.key, "client closed")


def _futures_in(packed) -> list:
    """The Futures in client.get's packed result (nested lists/tuples)."""
    from distributed import Future

    out: list = []
    todo = [packed]
    while todo:
        x = todo.pop()
        if isinstance(x, Future):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
    return out


def _startstops(startstops, t: float, offset: float) -> tuple:
    """(start, stop) of the computation and the task's other startstops, on
    the caller's clock."""
    start = stop = None
    activities = []
    for ss in startstops or ():
        action = ss.get("action")
        a, b = ss.get("start"), ss.get("stop")
        if a is None or b is None:
            continue
        if action == "compute":
            start, stop = a - offset, b - offset
        else:
            activities.append((action, a - offset, b - offset))
    if start is None:
        start = stop = t - offset
    return start, stop, (tuple(activities) if activities else None)
