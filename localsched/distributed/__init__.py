"""Companion mode: run graphs on a dask.distributed cluster, with localsched's
callbacks and diagnostics.

``get(dsk, keys, client=None, address=None, **options)`` has dask's get
signature and runs a dask-spec graph (hand-written dicts, dask collections,
dask's ``Task`` objects) on a dask.distributed cluster.  The cluster is
found in this order:

1. ``client=`` (a ``distributed.Client``);
2. ``address=`` (``"tcp://10.0.0.5:8786"``): a Client to that scheduler,
   made on first use, reused, closed at exit;
3. the current default Client (``Client.current()``: the last one made, or
   the one of a ``with client.as_current():`` block);
4. an embedded ``LocalCluster`` (worker processes on this machine), started
   on first use, reused, and closed at exit (or by ``shutdown()``).

(An address passed explicitly wins over a default Client made elsewhere in
the program, so what a call names is never silently ignored.)

The five callbacks fire in the caller's thread, never concurrently, from
events the scheduler streams back while the graph runs (see
``localsched/distributed/_plugin.py`` for why a scheduler plugin):

``start(dsk)``
    before the graph is validated and sent;
``start_state(dsk, state)``
    after validation, before the graph is sent; ``state`` has dask's fields
    (:class:`ClusterState`), kept up to date from the cluster's reports;
``pretask(key, dsk, state)``
    when the scheduler **dispatches** the task to a worker (the worker may
    queue it briefly: its true start is ``state.timing[0]`` at posttask, and
    in the Profiler's records).  Hearing of each start from the workers
    would cost about 17 % of the run time on tiny tasks;
``posttask(key, result, dsk, state, worker_id)``
    when the scheduler reports the task done.  ``result`` is **None**:
    results stay in the workers' memory.  ``state.timing`` holds the
    worker's ``(start, end)`` of the computation on the scheduler's clock
    (dask.distributed corrects each worker's offset); ``worker_id`` is
    ``"<worker address>#<thread number>"``; ``state.nbytes`` the result's
    size as the cluster measured it; ``state.activities`` the task's other
    startstops as ``(activity, start, stop)`` (transfer of inputs from
    peers, disk-read/-write when spilled); ``state.freed``
    the keys whose results this end released;
``finish(dsk, state, errored)``
    after the last posttask, on success, error and Ctrl-C.

A task retried after its worker died fires pretask again, and posttask
again if it had finished before (its result was lost with the worker):
the Profiler keeps both runs.  A task that finally fails (its own
exception, or ``KilledWorker`` when its workers kept dying) raises in the
caller with a note naming the task.  Ctrl-C cancels the run's futures on
the cluster and returns at once.

>>> from operator import add
>>> from distributed import LocalCluster, Client
>>> with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as lc, \\
...         Client(lc) as client:
...     get({'a': 1, 'b': (add, 'a', 2)}, ['a', 'b'], client=client)
(1, 3)

Diagnostics under ``x.compute()``: while any localsched callback is
registered (``with Profiler():`` ...), dask's ``"dask.distributed"``
scheduler name -- what dask uses when a default Client exists -- runs
through this ``get``, so dask users' own ``x.compute()`` is recorded.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import uuid
from queue import Empty, SimpleQueue
from typing import Any, Iterable, Optional

from .. import callbacks as _callbacks
from ..callbacks import active_callbacks, normalize_callback, unpack_callbacks
from ..lifecycle import Computation
from ..machine import DONE, READY, RUNNING, WAITING
from ..machine import RunState as Run
from ..utils import add_note as _add_note
from ..utils import name_tasks as _name_tasks
from ..view import State, TaskRecord
from ..graph import as_mapping, flatten_keys
from ..options import check_options

__all__ = ["get", "shutdown", "ClusterState", "default_client", "WorkerTier"]

#: distributed's own ``Client.get`` keywords, passed on to it.
CLIENT_OPTIONS = ("workers", "allow_other_workers", "resources", "retries", "priority",
                  "fifo_timeout", "actors")
#: Seconds ``finish`` waits for the barrier (every event of the run) before
#: giving up and setting ``state.incomplete``.
BARRIER_TIMEOUT = 10.0
#: Seconds a run waits for a worker when every worker has died or left
#: (a nanny restarts its worker within about two seconds) before it
#: raises and cancels its futures.
NO_WORKERS_TIMEOUT = 5.0
#: The caller wakes at least this often (seconds) to notice finished futures
#: and Ctrl-C.
POLL = 0.05

_lock = threading.Lock()
_embedded: list = []  # [LocalCluster, Client] once started
_by_address: dict = {}  # address -> Client
_streams: dict = {}  # client id -> _Stream
_thread_numbers: dict = {}  # (worker address, thread ident) -> "addr#n"


# -- finding the cluster ---------------------------------------------------------


def default_client(client=None, address: Optional[str] = None):
    """The Client ``get`` would use (see the module docstring for the order).

    >>> from distributed import LocalCluster, Client
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as lc, \\
    ...         Client(lc) as c:
    ...     default_client() is c
    True
    """
    from distributed import Client

    if client is not None:
        if not isinstance(client, Client):
            raise TypeError(f"client= must be a distributed.Client, got {client!r}")
        return client
    if address is not None:
        with _lock:
            c = _by_address.get(address)
            if c is None or c.status not in ("running", "connecting", "newly-created"):
                c = _by_address[address] = Client(address, set_as_default=False)
                _ensure_exit_hook()
            return c
    try:
        return Client.current(allow_global=True)
    except ValueError:
        pass
    with _lock:
        if not _embedded or _embedded[1].status != "running":
            from distributed import LocalCluster

            cluster = LocalCluster(host="127.0.0.1", dashboard_address="127.0.0.1:0")
            _embedded[:] = [cluster, Client(cluster, set_as_default=False)]
            _ensure_exit_hook()
        return _embedded[1]


_exit_hooked: list = []


def _ensure_exit_hook() -> None:
    if not _exit_hooked:
        _exit_hooked.append(True)
        atexit.register(shutdown)


def shutdown() -> None:
    """Close the Clients this module made (``address=``) and the embedded
    LocalCluster, if any.  The next ``get`` starts afresh.

    >>> shutdown()
    """
    with _lock:
        clients = list(_by_address.values())
        _by_address.clear()
        embedded = list(_embedded)
        _embedded.clear()
    for c in clients + embedded[1:]:
        _streams.pop(getattr(c, "id", None), None)
        try:
            c.close()
        except Exception:  # noqa: BLE001 -- closing at exit: nothing to report to
            pass
    if embedded:
        try:
            embedded[0].close()
        except Exception:  # noqa: BLE001
            pass


# -- the event stream --------------------------------------------------------


class _Stream:
    """One client's subscription to its scheduler plugin: the handler runs on
    the client's IO-loop thread and only routes events, by key, into the
    queues of the runs that wait for them (several threads may run graphs on
    one client at once)."""

    def __init__(self, client):
        import cloudpickle

        from . import _plugin

        self.client = client
        self.routes: dict = {}  # key -> list of run queues
        self.marks: dict = {}  # barrier token -> run queue
        self.lock = threading.Lock()
        # Shipped by value: the scheduler need not have localsched installed.
        cloudpickle.register_pickle_by_value(_plugin)
        client.register_plugin(_plugin.StreamPlugin(client.id), name=_plugin.plugin_name(client.id))
        client.subscribe_topic(_plugin.topic_name(client.id), self.handle)

    def handle(self, event) -> None:
        _, batch = event
        routes = self.routes
        out: dict = {}
        for ev in batch:
            if ev[0] == "mark":
                q = self.marks.get(ev[1])
                if q is not None:
                    out.setdefault(id(q), (q, []))[1].append(ev)
                continue
            if ev[0] == "workers":  # for every run of this client
                for qs in list(routes.values()):
                    for q in qs:
                        out.setdefault(id(q), (q, []))[1].append(ev)
                continue
            key = ev[1]
            if type(key) is list:  # (a serializer that turned a tuple key into a list)
                key = _tuplify(key)
                ev = (ev[0], key) + tuple(ev[2:])
            for q in routes.get(key, ()):
                out.setdefault(id(q), (q, []))[1].append(ev)
        for q, events in out.values():
            q.put(events)

    def add(self, keys: Iterable, q: SimpleQueue) -> None:
        with self.lock:
            routes = self.routes
            for k in keys:
                qs = routes.get(k)
                if qs is None:
                    routes[k] = [q]
                else:
                    routes[k] = qs + [q]  # (copy on write: the handler reads without the lock)

    def remove(self, keys: Iterable, q: SimpleQueue) -> None:
        with self.lock:
            routes = self.routes
            for k in keys:
                qs = routes.get(k)
                if qs is None:
                    continue
                rest = [x for x in qs if x is not q]
                if rest:
                    routes[k] = rest
                else:
                    del routes[k]


def _tuplify(x):
    return tuple(_tuplify(v) for v in x) if type(x) is list else x


def _stream_of(client) -> _Stream:
    with _lock:
        for cid, other in list(_streams.items()):  # (don't keep closed Clients alive)
            if other.client.status == "closed":
                del _streams[cid]
        s = _streams.get(client.id)
        if s is None or s.client is not client:
            s = _streams[client.id] = _Stream(client)
        return s


def _worker_id(worker: Optional[str], thread: Optional[int]) -> Optional[str]:
    """``"tcp://127.0.0.1:40123#0"``: the worker, and its threads numbered
    in the order this process first saw them."""
    if worker is None:
        return None
    wid = _thread_numbers.get((worker, thread))
    if wid is None:
        n = sum(1 for w, _ in _thread_numbers if w == worker)
        wid = _thread_numbers[(worker, thread)] = f"{worker}#{n}"
    return wid


# -- the state ------------------------------------------------------------------


class _ClusterRun(Run):
    """The compiled graph and the client's view of the cluster's progress:
    ``dispatched`` holds the tasks the scheduler has handed to a worker
    (key -> (time, worker address))."""

    def __init__(self, dsk, keys):
        super().__init__(dsk, keys)
        self.dispatched: dict = {}

    def running_keys(self) -> set:
        return set(list(self.dispatched))


class ClusterState(State):
    """:class:`localsched.core.State` for a cluster run: the same fields, as
    the scheduler reports them.  ``cache`` maps keys in the cluster's memory
    to None (the values stay on the workers; the outputs' values are filled
    in before ``finish``).  Extra attributes, for the task whose posttask is
    firing: ``worker`` (address), ``nbytes`` (the result's size as the
    cluster measured it), ``activities`` (``(activity, start, stop)`` of the
    task's startstops other than compute: transfer, disk-read, disk-write; or
    None), ``probe`` (None: no per-task CPU split; see
    ``cluster_metrics``); at
    ``finish``: ``lost`` (``(key, dispatched, lost, worker_id)`` of attempts
    whose worker died), ``incomplete`` (True if the event stream did not
    confirm its end in time) and ``client`` (the Client that ran it)."""

    __slots__ = ("worker", "nbytes", "lost", "incomplete", "client", "cluster_metrics",
                 "detail_errors")

    def __init__(self, run: _ClusterRun, client):
        super().__init__(run)
        self.worker: Optional[str] = None
        self.nbytes: Optional[int] = None
        self.lost: list = []
        self.incomplete = False
        self.client = client
        #: at finish, when a FineMetrics listens: dask.distributed's fine
        #: metrics of the run, ``(span, group, activity, unit) -> value``
        self.cluster_metrics: Optional[dict] = None
        self.detail_errors: list = []


class _TaskFailed(Exception):
    """Stands for a task's exception, known only as text, in ``state.failed``."""


# -- get ------------------------------------------------------------------------


def get(dsk: Any, keys: Any, client=None, address: Optional[str] = None, *,
        callbacks: Optional[Iterable] = None, **options):
    """Compute ``keys`` of ``dsk`` on a dask.distributed cluster.

    Parameters
    ----------
    dsk : Mapping or object with ``__dask_graph__``
        A dask-spec graph: tuples, aliases, containers, dask's Task objects.
    keys : key or nested list of keys
        The result has the same nesting, lists becoming tuples.
    client : distributed.Client, optional
    address : str, optional
        The scheduler's address; see the module docstring for which cluster
        runs the graph when neither is given.
    callbacks : iterable of Callback or 5-tuples, optional
        Fired for this call instead of the registered ones.
    **options
        distributed's ``Client.get`` keywords (``workers``, ``resources``,
        ``retries``, ``priority``, ...) are passed on;
        ``rerun_exceptions_locally=True`` re-runs a failed task in the caller
        (with its inputs, recomputed here) so a debugger stops in it;
        other keywords dask schedulers take are accepted and ignored; a near
        miss is a TypeError.

    >>> from distributed import LocalCluster, Client
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as lc, \\
    ...         Client(lc) as c:
    ...     get({'x': 2, 'y': (pow, 'x', 10)}, [['y'], 'x'], client=c)
    ((1024,), 2)
    """
    if options:
        check_options(options, "localsched.distributed.get")
    client_options = {k: options[k] for k in CLIENT_OPTIONS if k in options}
    rerun = options.get("rerun_exceptions_locally")
    if rerun is None:
        from ..options import dask_config

        rerun = dask_config("rerun_exceptions_locally", False)
    client_options["rerun_exceptions_locally"] = rerun
    client = default_client(client, address)
    comp = Computation(dsk, callbacks)
    dsk = comp.dsk
    with comp:
        run = _ClusterRun(dsk, keys)
        state = comp.open(run, ClusterState(run, client))
        detail = _Detail(client, state, comp.needs.measure, comp.needs.sample)
        hooks = (None, comp.start_states, comp.pretasks, comp.posttasks, comp.finishes)
        try:
            result = _Computation(client, dsk, run, state, hooks, client_options).run()
        finally:
            detail.collect(run)
    return result


class _Computation:
    """One graph on the cluster: send it, fire the hooks from the event
    stream in this (the caller's) thread, wait for the barrier, gather."""

    def __init__(self, client, dsk, run: _ClusterRun, state: ClusterState, hooks, client_options):
        self.client = client
        self.dsk = dsk
        self.run_ = run
        self.state = state
        self.pretasks, self.posttasks = hooks[2], hooks[3]
        self.client_options = client_options
        self.queue: SimpleQueue = SimpleQueue()
        self.complete = run.mover()
        self.failed_key = None
        self.no_workers_since: Optional[float] = None
        self.rerun = bool(client_options.pop("rerun_exceptions_locally", False))

    def run(self):
        run, client = self.run_, self.client
        keys = run.keys
        needed = run.needed
        graph = {keys[i]: self.dsk[keys[i]] for i in needed}
        flat = list(dict.fromkeys(flatten_keys(run.out_keys, [])))
        stream = _stream_of(client)
        q = self.queue
        routed = [keys[i] for i in run.order]
        stream.add(routed, q)
        futures: list = []
        try:
            if run.ntasks:
                # (no Future.add_done_callback: it runs on a process-wide
                # thread of distributed's that outlives every client; the
                # outputs' own events, or a short poll, say they are done)
                futures = client.get(graph, flat, sync=False, **self.client_options)
                self._pump(futures)
                self._barrier(stream)
            return self._results(futures, flat)
        except (KeyboardInterrupt, RuntimeError):
            self._interrupted(futures)
            raise
        finally:
            stream.remove(routed, q)
            # Release the run's keys on the cluster now, not when a traceback
            # that holds this frame is collected: a next graph with the same
            # keys must not find this run's (possibly erred) results.
            _release(client, futures)

    def _pump(self, futures: list) -> None:
        """Fire hooks from the stream until every output future is done."""
        q = self.queue
        while True:
            try:
                events = q.get(timeout=POLL)
            except Empty:
                events = None
            if events:
                self._fire(events)
            if all(f.done() for f in futures):
                return
            since = self.no_workers_since
            if since is not None and time.monotonic() - since > NO_WORKERS_TIMEOUT:
                run = self.run_
                lost = list(dict.fromkeys(k for k, *_ in self.state.lost))
                pending = lost + [run.keys[i] for i in run.order
                                  if run.status[i] != DONE and run.keys[i] not in lost]
                raise RuntimeError(
                    f"every worker of the cluster died or left while computing "
                    f"{_name_tasks(pending)}; none came back within "
                    f"{NO_WORKERS_TIMEOUT:g} s. The run's futures were cancelled.")

    def _barrier(self, stream: _Stream) -> None:
        """Wait for every event the scheduler sent before the outputs were
        done (the mark comes after them on the same ordered stream)."""
        from . import _plugin

        token = uuid.uuid4().hex
        stream.marks[token] = self.queue
        try:
            self.client.log_event(_plugin.MARK_TOPIC, {"client": self.client.id, "token": token})
            deadline = time.monotonic() + BARRIER_TIMEOUT
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.state.incomplete = True
                    return
                try:
                    events = self.queue.get(timeout=min(left, POLL))
                except Empty:
                    continue
                if events is None:
                    continue
                if events[-1][0] == "mark" and events[-1][1] == token:
                    self._fire(events[:-1])
                    return
                self._fire(events)
        finally:
            stream.marks.pop(token, None)

    def _fire(self, events: list) -> None:
        run, state, dsk = self.run_, self.state, self.dsk
        index, status, in_run = run.index, run.status, run.in_run
        dispatched = run.dispatched
        pretasks, posttasks = self.pretasks, self.posttasks
        for ev in events:
            kind, key = ev[0], ev[1]
            if kind == "workers":
                self.no_workers_since = None if key else time.monotonic()
                continue
            i = index.get(key)
            if i is None or not in_run[i]:
                continue
            if kind == "dispatch":
                if status[i] in (WAITING, READY):
                    self._adopt_inputs(i)
                    status[i] = RUNNING
                dispatched[key] = (ev[2], ev[3])
                for f in pretasks:
                    f(key, dsk, state)
            elif kind == "done":
                _, _, t, worker, thread, startstops, nbytes = ev
                if key not in dispatched and status[i] != DONE:
                    # (never seen dispatched: keep pretask before posttask)
                    self._adopt_inputs(i)
                    dispatched[key] = (t, worker)
                    status[i] = RUNNING
                    for f in pretasks:
                        f(key, dsk, state)
                wid = _worker_id(worker, thread)
                start, stop, activities = _startstops(key, startstops, wid, t)
                dispatched.pop(key, None)
                if status[i] == RUNNING:
                    freed = self.complete(i, None)
                else:  # run again (its result was lost with a worker)
                    freed = []
                state.task = TaskRecord(key, start, stop, wid, freed, None, None, activities,
                                        nbytes)
                state.worker = worker
                state.nbytes = nbytes
                for f in posttasks:
                    f(key, None, dsk, state, wid)
            elif kind == "erred":
                _, _, t, worker, thread, startstops, text = ev
                wid = _worker_id(worker, thread)
                start, stop, _ = _startstops(key, startstops, wid, t)
                dispatched.pop(key, None)
                state.failed[key] = (_TaskFailed(text), start, stop, wid)
                if self.failed_key is None:
                    self.failed_key = key
            elif kind == "lost":
                since = dispatched.pop(key, None)
                if since is not None:
                    # (the thread is unknown: the worker died before reporting)
                    state.lost.append((key, since[0], ev[2], f"{since[1]}#?"))

    def _adopt_inputs(self, i: int) -> None:
        """Task i runs, so its inputs are in the cluster's memory, even those
        this run never saw computed: the cluster already held them (an
        earlier graph's results not yet released, persisted data, another
        client's identical keys).  Count them as done, without hooks."""
        run = self.run_
        status, deps = run.status, run.deps
        todo = [d for d in deps[i] if status[d] != DONE]
        while todo:
            d = todo[-1]
            missing = [e for e in deps[d] if status[e] != DONE]
            if missing:
                todo.extend(missing)
                continue
            todo.pop()
            if status[d] != DONE:
                status[d] = RUNNING
                run.dispatched.pop(run.keys[d], None)
                self.complete(d, None)

    def _results(self, futures: list, flat: list):
        run, client = self.run_, self.client
        values: dict = {}
        if futures:
            bad = [f for f in futures if f.status != "finished"]
            if bad:
                self._raise(bad)
            values = dict(zip(flat, client.gather(futures)))
        cache = run.cache
        for k in flat:
            if k in values:
                cache[k] = values[k]

        def build(k):
            if type(k) is list:
                return tuple(build(x) for x in k)
            return cache[k]

        return build(run.out_keys)

    def _raise(self, bad: list):
        state = self.state
        f = next((f for f in bad if f.status == "error"), bad[0])
        try:
            exc = f.exception()
        except BaseException as e:  # noqa: B036 -- a cancelled future raises here
            exc = e
        key = self.failed_key
        if key is None:
            key = f.key
        if key in state.failed:
            _, start, stop, wid = state.failed[key]
            state.failed[key] = (exc, start, stop, wid)
        tb = getattr(exc, "__traceback__", None)
        if f.status == "error":
            tb = f.traceback() or tb
        _add_note(exc, f"while computing task {key!r}")
        if self.rerun and f.status == "error" and key in self.run_.index:
            # Re-run the failing task here, so that a debugger stops in it:
            # its inputs are recomputed here too (they may be gone from the
            # cluster).  (distributed's recreate_error_locally fails on graphs
            # given as dicts in 2026.8.)
            from ..local import get_sync

            get_sync(self.dsk, key)  # raises again, with the task's own frames
            _add_note(exc, f"task {key!r} failed on the cluster but succeeded "
                           f"when re-run locally")
        raise exc.with_traceback(tb)

    def _interrupted(self, futures: list) -> None:
        """Ctrl-C: cancel the run's futures on the cluster (one round trip)
        and say what was running."""
        if futures:
            try:
                self.client.cancel(futures)
            except BaseException:  # noqa: B036 -- the interrupt matters more
                pass
        now = time.time()
        for key, (t, worker) in list(self.run_.dispatched.items()):
            self.state.running_since[key] = (min(t, now), _worker_id(worker, None))


class _Detail:
    """What FineMetrics and SampleProfiler ask of a cluster run, collected
    around it (only when one listens): the scheduler's cumulative fine
    metrics before and after (after making every worker report at once),
    and the workers' stack samples of the run's window by task group.  Set
    on the state before ``finish``: ``cluster_metrics`` and ``samples``."""

    def __init__(self, client, state: ClusterState, measure: bool, sample: float):
        self.client, self.state = client, state
        self.measure, self.sample = measure, sample
        self.t0 = time.time()
        self.before = None
        if measure:
            from . import _plugin

            try:
                self.before = client.run_on_scheduler(_plugin.scheduler_metrics)
            except Exception as exc:  # noqa: BLE001 -- detail is best effort
                state.detail_errors.append(f"metrics: {exc!r}")

    def collect(self, run) -> None:
        if not (self.measure or self.sample):
            return
        from . import _detail, _plugin

        client, state = self.client, self.state
        try:
            client.run(_plugin.worker_flush)
        except Exception as exc:  # noqa: BLE001
            state.detail_errors.append(f"flush: {exc!r}")
        if self.before is not None:
            try:
                after = client.run_on_scheduler(_plugin.scheduler_metrics)
                span = state.outcome.span
                state.cluster_metrics = {(span,) + k[1:]: v for k, v in
                                         _detail.metrics_delta(self.before, after).items()}
            except Exception as exc:  # noqa: BLE001
                state.detail_errors.append(f"metrics: {exc!r}")
        if self.sample:
            try:
                samples = _detail.profile_samples(client, state.finished, self.t0, time.time())
                state.outcome.samples = [tuple(s) for s in samples]  # (with seconds)
            except Exception as exc:  # noqa: BLE001
                state.detail_errors.append(f"samples: {exc!r}")


def _release(client, futures: list) -> None:
    """Release the futures' keys on the cluster, queued *now*: the public
    ``Future.release()`` defers the release message by two IO-loop hops, so
    a next graph with the same keys, sent from this thread right after,
    reached the scheduler first and found this run's results still there.
    (Private Client API, guarded: the fallback is the public call.)"""
    for f in futures:
        try:
            if not f._cleared and client.generation == f._generation:
                f._cleared = True
                client._dec_ref(f.key)
        except AttributeError:
            f.release()


def _startstops(key, startstops, wid, t) -> tuple:
    """(start, stop) of the computation and the task's other startstops."""
    start = stop = None
    activities = []
    for ss in startstops or ():
        action = ss.get("action")
        a, b = ss.get("start"), ss.get("stop")
        if a is None or b is None:
            continue
        if action == "compute":
            start, stop = a, b
        else:
            activities.append((action, a, b))
    if start is None:
        start = stop = t
    return start, stop, (tuple(activities) if activities else None)


def __getattr__(name):
    if name == "WorkerTier":  # (lazily: it is only needed for the detail)
        from ._detail import WorkerTier

        return WorkerTier
    raise AttributeError(name)


# -- dask's default-Client path ----------------------------------------------


_routing: dict = {}  # what was in dask's named_schedulers before we routed


def _client_get(dsk, keys, **options):
    """What ``x.compute()`` calls when a default Client exists while a
    localsched callback is registered (dask's ``"dask.distributed"``)."""
    from distributed import Client

    return get(dsk, keys, client=Client.current(allow_global=True), **options)


def _route(on: bool) -> None:
    """Make dask's ``"dask.distributed"`` / ``"distributed"`` scheduler names
    (what a default Client sets in dask's config) run through ``get`` while
    ``on``, and restore them after."""
    base = sys.modules.get("dask.base")
    if base is None:
        return
    named = base.named_schedulers
    with _lock:
        if on and not _routing:
            for name in ("dask.distributed", "distributed"):
                _routing[name] = named.get(name)
                named[name] = _client_get
        elif not on and _routing:
            for name, old in _routing.items():
                if named.get(name) is _client_get:
                    if old is None:
                        named.pop(name, None)
                    else:
                        named[name] = old
            _routing.clear()
