"""The one scheduling loop, executor-agnostic: ``get_async``.

Design
======

Data flow for a pool (threads or processes)::

    caller thread (the scheduler)                    workers
    ─────────────────────────────                    ───────
    compile graph ─► cull ─► order (priorities)
    ready stack ─Planner──► batch ──submit(run_batch)──► run_batch: for each task
         ▲                                                 t0, execute spec, t1
         │                                                 emit([record, ...])
    Run.complete(record) ◄── events (SimpleQueue) ◄────────┘  (as tasks end)
      cache result, release inputs,                      future done ──► events
      newly ready dependents ─► ready stack              (the worker is free again)

Only the caller's thread touches the scheduler state and fires callbacks, so
the callbacks of one computation never run concurrently.  There is no
process-wide callback lock: a callback that blocks stalls its own
computation only.

State.  Tasks are integers (positions in the compiled graph).  ``Run``
holds the state and makes every move; ``status[i]`` moves through named
states, and a move the state does not allow raises InvalidStateError::

    WAITING ──► READY ──► RUNNING ──► DONE           (data keys start as DONE)
    WAITING ─────────────► RUNNING                   (joined a batch, see below)

``waiting[i]`` counts the unfinished dependencies of i; ``refs[i]`` the
unfinished dependents of i.  When ``refs[i]`` drops to zero the result leaves
the cache, unless i is a requested output.  Both loops (inline and pool)
finish tasks through the same ``Run._mover`` step.

Task selection.  ``order.order`` gives each task a static priority: its
position in a depth-first post-order from the outputs.  Ready tasks sit on a
stack: those a finished task made ready go on top, sorted so the lowest
priority is taken first.  The branch just advanced is continued before older
ready work (dask's rule), which holds fewer results than following the
static order strictly.

Batches.  ``batching.Planner`` hands a worker a contiguous stretch of that
order (about ``BATCH_BUDGET`` seconds of measured work), so a batch runs
exactly as the sequential order would and memory stays depth-first; see
``localsched/batching.py``.

Timing.  Workers hand records over in lists, about once a millisecond, and
at once when a list holds a few results (so records in flight hold few
results).  When someone listens for task starts, a worker announces each
batch as it starts and hands over finished records before each next task
starts; that is when ``pretask`` fires.  ``posttask`` fires when the record
arrives, and ``state.timing`` holds the ``(start, end)`` epoch seconds the
worker measured around the call itself.

Fine metrics and sampling.  Runs nobody measures pay nothing per task: the
callbacks say once per computation what they want (``wants``).  For a
``FineMetrics``, workers read the thread's CPU clock once per task boundary
and give each record a ``probe`` (CPU seconds, the task's own
``localsched.metrics`` entries); process workers also report how inputs
and results travelled.  For a ``SampleProfiler``, each worker thread
publishes the task it runs in ``_running_tasks`` for the sampler thread
(worker processes sample themselves and send the samples back as records).

The synchronous scheduler passes ``submit=None``: the same state machine runs
tasks inline, in priority order, in the caller's thread.

>>> from operator import add
>>> get_async(None, 1, {'a': 1, 'b': (add, 'a', 1), 'c': [(add, 'b', 1), 'a']}, ['c', 'b'])
([3, 1], 2)
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import time
from collections.abc import Mapping
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

if TYPE_CHECKING:
    from concurrent.futures import Future

from . import callbacks as _callbacks
from . import metrics as _metrics
from . import batching as _batching
from .batching import DONE, READY, RUNNING, STATE_NAMES, WAITING, Planner
from .callbacks import active_callbacks, normalize_callback, unpack_callbacks
from .graph import DATA, as_mapping, compile_graph, execute, flatten_keys
from .options import dask_config
from .order import order_and_consumers

__all__ = ["get_async", "State", "InvalidStateError", "in_task"]

# In a worker process, its pid: records then name the process, not the thread.
_process_worker_id: int = 0

# The package's directory: frames from here are trimmed off task tracebacks.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def in_task() -> bool:
    """Whether the calling code runs inside a computation (in a task, or in
    a callback of a running computation)."""
    return _callbacks._local_active.get() is not None


class InvalidStateError(RuntimeError):
    """A task made a move its state does not allow (e.g. finished twice)."""


class State(Mapping):
    """The scheduler state handed to callbacks.

    A read-only Mapping with dask's documented fields:

    - ``cache`` (live dict key -> result), ``finished`` (live set of finished
      keys), ``released`` (live set of keys whose results left the cache);
    - ``dependencies`` and ``dependents`` (key -> set of keys, per lookup);
    - ``ready`` (list of keys, next first), ``running`` (set), ``waiting``
      (Mapping key -> set of unfinished dependencies, for tasks not yet
      ready), ``waiting_data`` (dict key -> set of unfinished dependents, for
      cached keys): snapshots built on access from what is live -- ready and
      running tasks, the cache -- so an access costs O(ready + running +
      cache), never a walk of the graph (``len(state["waiting"])`` included),
      and a run nobody asks about pays nothing.

    Attributes, for the task whose posttask is firing: ``timing`` (its
    ``(start, end)`` epoch seconds, measured by the worker), ``freed`` (the
    keys whose results its end released from the cache) and ``transfer``
    (None, or on processes ``(send_seconds, receive_seconds)``: the time
    its inputs took to reach the worker before ``timing[0]``, for the
    first task of a batch, and its result to come back after ``timing[1]``).
    And ``ntasks`` (tasks that will run); at ``finish``: ``failed`` (key ->
    ``(exception, start, end, worker_id)`` of a task that raised) and
    ``running_since`` (key -> ``(start, worker_id)`` of tasks still running
    when the computation stopped; worker_id may be None).

    For fine metrics (only filled while a callback asks for them, see
    ``wants``): ``span`` (the caller's ``localsched.span`` names when the
    computation started); per task, ``probe`` (the record's probe: thread
    CPU seconds and user metrics, see ``batching.Record``) and
    ``activities`` (None, or on processes, for the first task of a batch,
    ``(activity, start, stop)`` stretches its inputs spent travelling:
    ``serialize`` in the caller, ``transfer``, ``deserialize`` in the worker);
    ``late``: ``(keys, start, pickling seconds, stop, received)`` per
    hand-off of results from a worker process, learnt after those tasks'
    posttask; ``samples``: stack samples taken in worker processes
    (SampleData tuples); at ``finish``, ``overhead``: ``(scheduler CPU
    seconds, worker-seconds idle)``.
    """

    FIELDS = (
        "dependencies",
        "dependents",
        "waiting",
        "waiting_data",
        "cache",
        "ready",
        "running",
        "finished",
        "released",
    )

    # Slots: callbacks read state.timing and state.freed once per task.
    __slots__ = ("_run", "cache", "finished", "released", "ntasks", "timing", "freed",
                 "transfer", "failed", "running_since", "span", "probe", "activities",
                 "late", "samples", "overhead", "_static", "__weakref__")

    def __init__(self, run: "Run"):
        self._run = run
        self.cache: dict = run.cache
        self.finished: set = set()
        self.released: set = set()
        self.ntasks: int = run.ntasks
        self.timing: tuple = (0.0, 0.0)
        self.freed: list = []
        self.transfer: Optional[tuple] = None
        self.failed: dict = {}
        self.running_since: dict = {}
        self.span: tuple = ()
        self.probe = None
        self.activities: Optional[tuple] = None
        self.late: list = []
        self.samples: list = []
        self.overhead: Optional[tuple] = None
        self._static: dict = {}

    def __getitem__(self, name: str):
        if name == "cache":
            return self.cache
        if name == "finished":
            return self.finished
        if name == "released":
            return self.released
        run = self._run
        if name in ("dependencies", "dependents"):
            if name not in self._static:
                self._static[name] = _Adjacency(run, name == "dependencies")
            return self._static[name]
        if name == "ready":
            return run.ready_keys()
        if name == "running":
            return run.running_keys()
        if name == "waiting":
            return _Waiting(run)
        if name == "waiting_data":
            keys, status, index, dependents = run.keys, run.status, run.index, run.dependents
            # (a snapshot of the keys: callbacks such as dask's ProgressBar
            # read the state from their own thread while the run goes on)
            return {k: {keys[j] for j in dependents[index[k]] if status[j] != DONE}
                    for k in list(run.cache)}
        raise KeyError(name)

    def __iter__(self):
        return iter(self.FIELDS)

    def __len__(self) -> int:
        return len(self.FIELDS)

    def __repr__(self) -> str:
        return f"<State: {len(self.finished)}/{self.ntasks} tasks finished>"


class _Waiting(Mapping):
    """``state["waiting"]``: key -> its unfinished dependencies, for tasks not
    yet ready.  Its length counts the states' bytes, in C (dask's
    ProgressBar asks for it ten times a second); a lookup costs one task's
    dependencies; only iterating it walks the graph."""

    def __init__(self, run: "Run"):
        self._run = run

    def __getitem__(self, key):
        run = self._run
        i = run.index.get(key)
        if i is None or not run.in_run[i] or run.status[i] != WAITING:
            raise KeyError(key)
        keys, status = run.keys, run.status
        return {keys[d] for d in run.deps[i] if status[d] != DONE}

    def __iter__(self):
        run = self._run
        keys, status = run.keys, run.status
        return (keys[i] for i in run.order if status[i] == WAITING)

    def __len__(self) -> int:
        run = self._run
        status = run.status
        # (Only tasks of the run are ever READY or RUNNING; counting bytes
        # runs in C: 40 µs for 57,000 tasks, against 2.7 ms for a walk.)
        return max(0, run.remaining - status.count(READY) - status.count(RUNNING))

    def __repr__(self) -> str:
        return repr(dict(self))


class _Adjacency(Mapping):
    """``state["dependencies"]`` / ``state["dependents"]``: key -> set of keys,
    computed per lookup from the compiled graph (building the whole dict
    would cost more than a typical callback spends on a run)."""

    def __init__(self, run: "Run", forward: bool):
        self._run = run
        self._forward = forward

    def __getitem__(self, key):
        run = self._run
        i = run.index[key]
        if not run.in_run[i]:
            raise KeyError(key)
        keys = run.keys
        adjacency = run.deps if self._forward else run.dependents
        return {keys[j] for j in adjacency[i]}

    def __iter__(self):
        keys = self._run.keys
        return (keys[i] for i in self._run.needed)

    def __len__(self) -> int:
        return len(self._run.needed)


class _Overlay(dict):
    """A batch's own results, falling back to the shared cache (set as
    ``.shared``): dict lookups stay in C except on a miss."""

    __slots__ = ("shared",)

    def __missing__(self, key):
        return self.shared[key]


# A worker hands finished records over at least this often (seconds): many
# short tasks share one hand-off, and the scheduler still learns within about
# a millisecond when a task ends (a long task's record goes out at once).
FLUSH_INTERVAL = 1e-3
# ... and as soon as this many records carrying results wait, so that the
# results in flight between worker and scheduler stay few (memory).
FLUSH_RESULTS = 8
# Batches handed to a process pool beyond one per worker: they wait in the
# pool, so a worker that finishes gets its next batch from the pool's
# listener thread at once, without a round trip through the scheduler's
# thread (thread pools need none: the hand-off is a queue).
QUEUE_AHEAD = 1
# When someone listens for task starts, finished records go out before the
# next task starts if this long has passed since the last hand-off: a
# pretask fires at most this late, and microsecond tasks do not pay one
# hand-off each (dask's ProgressBar listens for starts).
ANNOUNCE_INTERVAL = 1e-4


def run_batch(
    batch: list,
    data: dict,
    cancelled=None,
    announce: bool = False,
    *,
    emit: Callable,
    where: Optional[list] = None,
    measure: bool = False,
    sample: float = 0.0,
):
    """Run a batch of tasks in order, on a worker; emit lists of records.

    ``batch`` holds ``BatchItem`` tuples ``(i, key, spec, store, drop,
    send)`` (see ``localsched.batching``); dependency results are read from
    ``data`` (the shared cache, an overlay of it, or the inputs shipped to a
    process).  A record is a ``Record`` tuple ``(i, ok, value, start, end,
    worker_id, probe)``; the batch stops at the first failure.  Records are handed
    to ``emit`` in lists: whenever ``FLUSH_INTERVAL`` has passed since the
    last hand-off or ``FLUSH_RESULTS`` records carry results, on a failure,
    and at the end.  With ``announce`` (someone listens for task starts), a
    first record ``(i, None, None, start, 0.0, worker_id, None)`` says at once that
    the batch has started, and finished records are handed over before the
    next task starts (at most every ``ANNOUNCE_INTERVAL``), so its start is
    known within that when it happens.  ``where`` (a list shared with the
    scheduler, threads only) receives ``(worker_id, start)`` once, so a batch
    that is stopped before it reports anything can still be placed.

    ``measure`` (a FineMetrics listens): each record's ``probe`` holds the
    task's thread CPU time and what it metered (``localsched.metrics``);
    ``thread_time`` is read once per task boundary (about 0.5 µs a call), so a
    task's CPU includes the few steps of bookkeeping before it.  In a
    worker process, each hand-off's own cost (how long its results waited,
    were pickled and sent) is reported in the next one as a record with
    index -1.  ``sample`` (a SampleProfiler listens, its interval): the
    thread's running task is published in ``_running_tasks`` for the
    sampler thread; in a worker process the worker's own sampler runs and
    its samples travel back as records with index -2.
    """
    # Inside tasks, Callback.active is a registry of their own (empty).
    token = _callbacks.enter_computation()
    wid = _process_worker_id or threading.get_ident()
    now = time.time
    buf: list = []
    carried = 0
    probe = None
    if measure or sample:
        # The rare path's set-up, out of the loop below.
        tid = threading.get_ident()
        running = _running_tasks if sample else None
        outer_task = running.get(tid) if sample else None
        sampler = _worker_sampler(sample) if sample and _process_worker_id else None
        local = _metrics._local
        outer_sink = getattr(local, "sink", None)
        if measure:
            # One list for the batch's user metrics, emptied after each task
            # (cheaper than a list and a thread-local store per task).
            sink = local.sink = []
        cpu = _thread_time
        arrival = _take_job_arrival() if _process_worker_id else None
        if _process_worker_id:  # the cost of each hand-off, reported in the next
            emit = _MeasuredEmit(emit, wid, sampler)
        c_prev = cpu()
    try:
        last = now()
        if where is not None:  # (threads) who runs the batch, from when
            where.append((wid, last))
        if announce:
            emit([(batch[0][0], None, None, last, 0.0, wid, None)])
        for i, key, spec, store, drop, send in batch:
            if cancelled:
                break
            if announce and buf and now() - last >= ANNOUNCE_INTERVAL:
                emit(buf)
                buf = []
                carried = 0
                last = now()
            if sample:
                running[tid] = key
            t0 = now()
            try:
                value = execute(spec, data)
            except BaseException as exc:  # noqa: B036 -- reported, not swallowed
                buf.append((i, False, exc, t0, now(), wid, None))
                break
            t1 = now()
            if sample:
                running[tid] = None  # between tasks: the worker's own work
            if measure:
                c = cpu()
                user = None
                if sink:
                    user = sink[:]
                    sink.clear()
                probe = (c - c_prev, user) if arrival is None else (c - c_prev, user, arrival)
                c_prev = c
                arrival = None
            if store:
                data[key] = value
            for k in drop:
                del data[k]
            if send:
                buf.append((i, True, value, t0, t1, wid, probe))
                carried += 1
            else:
                buf.append((i, True, None, t0, t1, wid, probe))
            value = None
            if t1 - last >= FLUSH_INTERVAL or carried >= FLUSH_RESULTS:
                emit(buf)
                buf = []
                carried = 0
                last = t1
    finally:
        _callbacks._local_active.reset(token)
        if measure or sample:
            local.sink = outer_sink
            if sample:
                if outer_task is None:
                    running.pop(tid, None)
                else:  # a computation nested in a task (sync): its task again
                    running[tid] = outer_task
        if buf:
            emit(buf)
        if (measure or sample) and _process_worker_id:
            emit.close()


# -- fine metrics and sampling support (only used while someone listens) -----

_thread_time = time.thread_time

# thread ident -> key of the task it runs, while a SampleProfiler listens
# (read by the sampler thread: plain dict operations are atomic).
_running_tasks: dict = {}

# In a worker process: (received, unpacked) epoch seconds of the job being
# started, set by the worker before it calls run_batch.
_job_arrival: Optional[tuple] = None
# In a worker process: seconds the last hand-off spent pickling its records
# (set by the worker's emit).
_dump_seconds: float = 0.0


def _take_job_arrival() -> Optional[tuple]:
    global _job_arrival
    arrival, _job_arrival = _job_arrival, None
    return arrival


def _worker_sampler(interval: float):
    """The worker process's sampler, enabled for this job."""
    from .diagnostics.sampler import worker_sampler

    sampler = worker_sampler()
    sampler.enable(interval)
    return sampler


class _MeasuredEmit:
    """``emit`` in a worker process while measuring: times each hand-off
    and reports it (and the worker's stack samples) at the head of the next
    one, or in a last list of its own when the batch ends."""

    __slots__ = ("emit", "wid", "sampler", "pending")

    def __init__(self, emit: Callable, wid: int, sampler):
        self.emit = emit
        self.wid = wid
        self.sampler = sampler
        self.pending: list = []

    def __call__(self, records: list) -> None:
        global _dump_seconds
        if self.pending:
            records = self.pending + records
        _dump_seconds = 0.0
        start = time.time()
        self.emit(records)
        stop = time.time()
        # (indices of the tasks whose results went, hand-off start, pickling
        # seconds, hand-off end)
        sent = tuple(r[0] for r in records if r[1] and r[2] is not None)
        self.pending = [(-1, None, (sent, start, _dump_seconds, stop), 0.0, 0.0, self.wid, None)]
        if self.sampler is not None:
            samples = self.sampler.drain()
            if samples:
                self.pending.append((-2, None, samples, 0.0, 0.0, self.wid, None))

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.disable()
            samples = self.sampler.drain()
            if samples:
                self.pending.append((-2, None, samples, 0.0, 0.0, self.wid, None))
        pending, self.pending = self.pending, []
        if pending:
            self.emit(pending)


def get_async(
    submit: Optional[Callable[..., Future]],
    num_workers: int,
    dsk: Any,
    keys: Any,
    *,
    callbacks: Optional[Iterable] = None,
    rerun_exceptions_locally: bool = False,
    pack_data: bool = False,
    stream: bool = True,
    unpack_exception: Optional[Callable] = None,
    chunksize: Optional[int] = None,
    on_interrupt: Optional[Callable[[list], None]] = None,
    cache: Optional[dict] = None,
    transport: Any = None,
):
    """Compute ``keys`` of the graph ``dsk``; the core of every scheduler.

    Parameters
    ----------
    submit : callable or None
        ``submit(fn, *args, **kwargs) -> Future``, e.g. an Executor's submit.
        None runs every task inline in the caller's thread.
    num_workers : int
        How many batches may run at once (the executor's worker count).
    dsk : Mapping or object with ``__dask_graph__``
    keys : key or nested list of keys
        The result has the same nesting, lists becoming tuples.
    callbacks : iterable of Callback or 5-tuples, optional
        Fired for this call instead of the registered ones (as dask does).
    rerun_exceptions_locally : bool
        Re-run a failed task in the caller's thread, so a debugger stops in it.
    pack_data : bool
        Workers do not share memory with the caller: send each batch the
        dependency values it needs (process pools).
    stream : bool
        ``submit`` accepts an ``emit=`` keyword that delivers per-task records
        to the caller as tasks end (thread pools, localsched's process pool).
        Otherwise records arrive with the batch's result.
    unpack_exception : callable, optional
        Turns a failed record's value into the exception to raise.
    chunksize : int, optional
        At most this many tasks per batch (default: adaptive).
    on_interrupt : callable, optional
        Called with the running futures when the computation is abandoned
        (KeyboardInterrupt); may cancel or kill them.
    cache : dict, optional
        Results known already (key -> value): those tasks do not run.  The
        computation stores its live results here, as dask's ``cache=`` does.
    transport : module, optional
        ``localsched._pool.shm`` when results may arrive as ``SharedValue``
        handles to shared memory: the cache (and ``state.cache``) keeps the
        handles, posttask callbacks and the caller get the values, and a
        computation that stops releases the handles it holds.

    Examples
    --------
    >>> from operator import add
    >>> get_async(None, 1, {'a': 1, 'b': (add, 'a', 1)}, ['b', ['a']])
    (2, (1,))
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers!r}")
    if chunksize is not None and chunksize < 1:
        raise ValueError(f"chunksize must be at least 1, got {chunksize!r}")
    if callbacks is None:
        cbs = active_callbacks()
    else:  # per call: these instead of the registered ones, as dask does
        if hasattr(callbacks, "_callback") or _is_raw_callback(callbacks):
            callbacks = [callbacks]  # one callback, not a collection of them
        cbs = []
        for c in callbacks:
            c = normalize_callback(c)
            if c not in cbs:
                cbs.append(c)
    starts, start_states, pretasks, posttasks, finishes = unpack_callbacks(cbs)
    measure, sample = wants(cbs)

    # Callbacks see the graph as a Mapping (dask hands schedulers an
    # expression object with __dask_graph__; dask's callbacks expect a dict).
    dsk = as_mapping(dsk)
    if cache is None:
        cache = dask_config("cache")  # as dask's get_async reads it
        if cache is not None and not isinstance(cache, dict):
            cache = None  # (dask also allows a cachey.Cache here; not a results dict)
    started: list = []  # finish hooks of callbacks whose start ran
    errored = True
    run = None
    state = None
    # From here on, code in this context (callbacks, and tasks run inline or
    # in a copy of it) sees a callback registry of its own: a nested get
    # does not fire this computation's callbacks.
    token = _callbacks.enter_computation()
    try:
        if starts or finishes:
            for cb in cbs:
                if cb[0] is not None:
                    cb[0](dsk)
                if cb[4] is not None:
                    started.append(cb[4])
        run = Run(dsk, keys, cache)
        state = run.state = State(run)
        state.span = _metrics._span.get()
        if measure:
            run.measure = True
            run.cpu_start = _thread_time()
        run.sample = sample
        for f in start_states:
            f(dsk, state)
        if submit is None:
            run.run_inline(dsk, pretasks, posttasks)
        else:
            run.run_pool(
                submit,
                num_workers,
                dsk,
                pretasks,
                posttasks,
                pack_data=pack_data,
                stream=stream,
                unpack_exception=unpack_exception,
                chunksize=chunksize,
                rerun_exceptions_locally=rerun_exceptions_locally,
                on_interrupt=on_interrupt,
                transport=transport,
            )
        result = run.results()
        errored = False
    finally:
        if measure and run is not None:
            # The scheduler's own overhead: CPU time of the caller's thread in
            # this call (compiling, ordering, the loop, the callbacks), minus
            # the tasks it ran itself (sync).  Waiting for workers costs no CPU.
            cpu = _thread_time() - run.cpu_start - run.inline_cpu
            state.overhead = (max(0.0, cpu), run.idle)
        try:
            _finish_all(started, dsk, state, errored)
        finally:
            _callbacks._local_active.reset(token)
    return result


def wants(cbs: Iterable[tuple]) -> tuple[bool, float]:
    """What the callbacks ask the run to measure: ``(measure, sample)``.

    A Callback object asks through class attributes, read here once per
    computation so that runs nobody measures pay nothing per task:
    ``_localsched_measure = True`` (FineMetrics: thread CPU time and user
    metrics per task, idle and scheduler time) and ``_localsched_sample``
    (SampleProfiler: its sampling interval in seconds, 0 for none).

    >>> wants([(None, print, None, None, None)])
    (False, 0.0)
    """
    measure, sample = False, 0.0
    for cb in cbs:
        for f in cb:
            owner = getattr(f, "__self__", None)
            if owner is None:
                continue
            measure = measure or getattr(owner, "_localsched_measure", False) is True
            interval = getattr(owner, "_localsched_sample", 0.0)
            if type(interval) is float and interval > 0:
                sample = interval if not sample else min(sample, interval)
            break
    return measure, sample


def needs_results(posttasks: Iterable[Callable]) -> bool:
    """Whether some posttask hook reads the task's result.

    A Callback says it does not with the class attribute
    ``_localsched_result = False`` (the Profiler, FineMetrics, the
    ProgressBar): on pools, results that stay inside a batch then stay in
    the worker, and every posttask hook gets ``result=None``.  Plain
    functions and other callbacks get every result, as dask gives them.

    >>> needs_results([]), needs_results([print])
    (False, True)
    """
    for f in posttasks:
        owner = getattr(f, "__self__", None)
        if owner is None or getattr(owner, "_localsched_result", True) is not False:
            return True
    return False


def exact_starts(pretasks: Iterable[Callable]) -> bool:
    """Whether some pretask hook must hear of a task when it starts.

    On pools, hearing each start costs a hand-off per batch and records
    sent every ``ANNOUNCE_INTERVAL``.  A Callback that only needs to hear
    of each task before its posttask says so with the class attribute
    ``_localsched_exact_start = False``; dask's own ProgressBar, whose
    pretask only keeps the state for its timer thread, is taken as such.
    Its pretask then fires when the task's record arrives, just before its
    posttask.

    >>> exact_starts([]), exact_starts([print])
    (False, True)
    """
    dask_bar = getattr(sys.modules.get("dask.diagnostics.progress"), "ProgressBar", None)
    for f in pretasks:
        owner = getattr(f, "__self__", None)
        if owner is None:
            return True
        if getattr(owner, "_localsched_exact_start", True) is False:
            continue
        if dask_bar is None or type(owner) is not dask_bar:
            return True
    return False


def _finish_all(hooks: list, dsk, state, errored: bool) -> None:
    """Call every finish hook, even when one raises; then raise the first
    error (chained to the computation's own error, if any)."""
    first = None
    for f in hooks:
        try:
            f(dsk, state, errored)
        except BaseException as exc:  # noqa: B036 -- re-raised below
            if first is None:
                first = exc
    if first is not None:
        raise first


class Run:
    """One computation: the compiled, culled graph and its live state.

    Every state move is checked: a task starts only from READY (or joins a
    batch from WAITING), and finishes only from RUNNING (``_mover``).
    """

    def __init__(self, dsk: Mapping, keys: Any, known: Optional[dict] = None):
        self.out_keys = keys
        flat = flatten_keys(keys, [])
        for k in flat:
            try:
                hash(k)
            except TypeError:
                raise TypeError(f"key {k!r} is unhashable; keys are str, bytes, int, "
                                f"float or tuples of these") from None
        for k in flat:
            if k not in dsk and not (known and k in known):
                raise KeyError(f"key {k!r} is not in the graph")
        # Results given in advance (dask's cache=) are data.
        g = compile_graph(dsk, known)
        index = g.index
        outputs = [index[k] for k in flat]
        keys = self.keys = g.keys
        self.index = index
        deps = self.deps = g.deps
        self.specs = specs = g.specs
        is_data = g.is_data
        # The run order also culls: tasks no output needs are left out.
        self.order, self.dependents = order_and_consumers(deps, is_data, outputs, keys)
        run_order = self.order
        self.ntasks = len(run_order)
        self.priority = priority = [0] * len(keys)
        for p, i in enumerate(run_order):
            priority[i] = p
        self.is_output = is_output = bytearray(len(deps))
        for i in outputs:
            is_output[i] = 1
        self.status = status = bytearray(len(deps))  # all WAITING
        # refs[i]: the dependents of i that will run.  Data they need goes
        # into the cache up front, as does requested data.
        self.refs = refs = [0] * len(deps)
        self.cache = cache = known if known is not None else {}
        self.in_run = in_run = bytearray(len(deps))  # runs, or is data it uses
        # waiting[i]: unfinished dependencies.  READY tasks wait on a stack,
        # the next on top (lowest priority last): see ``_mover``.
        self.waiting = waiting = [0] * len(keys)
        ready = []
        for i in run_order:  # (deps come before their dependents here)
            in_run[i] = 1
            w = 0
            for d in deps[i]:
                refs[d] += 1
                if is_data[d]:
                    if not in_run[d]:
                        in_run[d] = 1
                        status[d] = DONE
                        cache[keys[d]] = specs[d][1]
                else:
                    w += 1
            waiting[i] = w
            if not w:
                status[i] = READY
                ready.append(i)
        for i in outputs:
            if is_data[i]:
                in_run[i] = 1
                status[i] = DONE
                cache[keys[i]] = specs[i][1]
        ready.reverse()
        self.ready: list = ready
        self.remaining = self.ntasks
        self.state: Optional[State] = None
        # Batches on their way (pool loop), or the task running inline.
        self.flights: dict = {}
        self.current: Optional[int] = None
        # Fine metrics / sampling (see get_async): off unless asked for.
        self.measure = False
        self.sample = 0.0
        self.cpu_start = 0.0
        self.inline_cpu = 0.0  # CPU seconds of the tasks run inline
        self.idle = 0.0  # worker-seconds with a free worker and nothing ready

    def _drain_notes(self, inflight: dict, get_event, flights: dict, mark: list) -> None:
        """All tasks are done; wait for the batches still in flight (their
        last lists, measurements only: see run_batch) to end, reading them."""
        while inflight:
            try:
                item = get_event(True, 0.1)
            except Empty:
                continue
            if type(item) is list:
                for i, ok, value, _, _, wid, _ in item:
                    if ok is None and i < 0:
                        self._note(i, value, flights, mark, wid)
            else:
                flights.pop(mark[inflight.pop(item).batch[0]], None)

    def _note(self, i: int, value, flights: dict, mark: list, wid) -> None:
        """A worker process's measurement record (index < 0, see run_batch)."""
        state = self.state
        if i == -2:  # stack samples: (time, key, stack) each
            state.samples.extend((t, wid, key, stack) for t, key, stack in value)
            return
        sent, start, dumped, stop = value
        if not self.measure or not sent:
            return
        flight = flights.get(mark[sent[0]])
        if flight is not None:
            keys = self.keys
            state.late.append(([keys[j] for j in sent], start, dumped, stop, flight.arrived))

    @property
    def needed(self) -> list:
        """The indices taking part: data the tasks use, then the tasks."""
        specs, in_run = self.specs, self.in_run
        return [i for i, r in enumerate(in_run) if r and specs[i][0] == DATA] + self.order

    def results(self):
        cache = self.cache

        def build(k):
            if type(k) is list:
                return tuple(build(x) for x in k)
            return cache[k]

        return build(self.out_keys)

    def ready_keys(self) -> list:
        """Keys of the READY tasks, the next first (O(ready))."""
        keys, status = self.keys, self.status
        # Snapshots (list() of a list or dict view runs in C, under the GIL):
        # callbacks may read the state from their own thread mid-run.
        stack = list(self.ready)
        if status.count(READY) == len(stack):  # no stale entry: all in C
            stack.reverse()
            return list(map(keys.__getitem__, stack))
        return [keys[i] for i in reversed(stack) if status[i] == READY]

    def running_keys(self) -> set:
        """Keys of the tasks running now (O(running))."""
        keys, status = self.keys, self.status
        current = self.current  # (read once: another thread may be asking)
        if current is not None:  # (sync: the task this thread runs, if any)
            return {keys[current]} if status[current] == RUNNING else set()
        return {keys[i] for f in list(self.flights.values()) for i in f.batch
                if status[i] == RUNNING}

    # -- the moves ------------------------------------------------------------

    def _mover(self):
        """``complete(i, value)``: RUNNING -> DONE: store the result, wake
        dependents, release inputs no task needs any more; returns the
        released keys.  A closure over the run's structures (it runs once
        per task; locals are faster than attributes), used by both loops."""
        status, keys, cache = self.status, self.keys, self.cache
        waiting, dependents, deps, priority = self.waiting, self.dependents, self.deps, self.priority
        refs, is_output, ready = self.refs, self.is_output, self.ready
        finished, released = self.state.finished, self.state.released
        push, by_priority = ready.extend, priority.__getitem__

        def complete(i: int, value) -> list:
            if status[i] != RUNNING:
                raise InvalidStateError(
                    f"task {keys[i]!r} reported as finished while {STATE_NAMES[status[i]]}")
            key = keys[i]
            cache[key] = value
            status[i] = DONE
            finished.add(key)
            self.remaining -= 1
            new = None
            for d in dependents[i]:
                w = waiting[d] - 1
                waiting[d] = w
                if not w and status[d] == WAITING:
                    status[d] = READY
                    if new is None:
                        new = [d]
                    else:
                        new.append(d)
            if new is not None:
                # The ready rule (dask's): the dependents a task just made
                # ready go on top of the stack, lowest priority last, so the
                # branch it advanced is continued before older ready work.
                if len(new) > 1:
                    new.sort(key=by_priority, reverse=True)
                push(new)
            freed = []
            for d in deps[i]:
                r = refs[d] - 1
                refs[d] = r
                if not r and not is_output[d]:
                    k = keys[d]
                    del cache[k]
                    released.add(k)
                    freed.append(k)
            return freed

        return complete

    # -- synchronous -------------------------------------------------------

    def run_inline(self, dsk, pretasks, posttasks):
        """Run every task in this thread, by the ready rule."""
        keys, specs, cache = self.keys, self.specs, self.cache
        state = self.state
        status = self.status
        complete = self._mover()
        now = time.time
        wid = threading.get_ident()
        ready = self.ready
        measure, sample = self.measure, self.sample
        if measure or sample:
            local = _metrics._local
            outer_sink = getattr(local, "sink", None)
            running = _running_tasks
            outer_task = running.get(wid)
        probe = None
        if measure:
            cpu = _thread_time
        try:
            while ready:
                i = ready.pop()
                key = keys[i]
                if status[i] != READY:
                    raise InvalidStateError(f"task {key!r} started while {STATE_NAMES[status[i]]}")
                status[i] = RUNNING  # (before pretask: it sees the task running, as in dask)
                self.current = i
                if pretasks:
                    for f in pretasks:
                        f(key, dsk, state)
                if measure:
                    sink = local.sink = []
                    c0 = cpu()
                if sample:
                    _running_tasks[wid] = key
                t0 = now()
                try:
                    value = execute(specs[i], cache)
                except BaseException as exc:
                    t1 = now()
                    if isinstance(exc, Exception):
                        state.failed[key] = (exc, t0, t1, wid)
                        _add_note(exc, f"while computing task {key!r}")
                        raise exc.with_traceback(_trim_traceback(exc.__traceback__))
                    state.running_since[key] = (t0, wid)  # interrupted
                    raise
                t1 = now()
                if measure:
                    c = cpu() - c0
                    self.inline_cpu += c
                    probe = (c, sink or None)
                self.current = None
                freed = complete(i, value)
                if posttasks:
                    state.timing = (t0, t1)
                    state.freed = freed
                    state.probe = probe
                    for f in posttasks:
                        f(key, value, dsk, state, wid)
        finally:
            if measure or sample:
                local.sink = outer_sink
                if outer_task is None:
                    running.pop(wid, None)
                else:  # a computation nested in a task: its task again
                    running[wid] = outer_task

    # -- pools -------------------------------------------------------------

    def run_pool(
        self,
        submit,
        num_workers,
        dsk,
        pretasks,
        posttasks,
        *,
        pack_data,
        stream,
        unpack_exception,
        chunksize,
        rerun_exceptions_locally,
        on_interrupt,
        transport=None,
    ):
        keys, specs, cache, status = self.keys, self.specs, self.cache, self.status
        state = self.state
        complete = self._mover()
        # (Only results that cross processes in shared memory are "large":
        # see batching, "Across computations".  A process's batch holds a
        # copy of each input it is sent: see MAX_INPUTS.)
        planner = Planner(self, limit=chunksize, learn=transport is not None,
                          max_inputs=_batching.MAX_INPUTS if pack_data else None)
        unconfirmed = planner.unconfirmed  # (a set the planner changes in place)
        mark = planner.mark
        events: SimpleQueue = SimpleQueue()
        put = events.put
        get_event = events.get
        cancelled: list = []  # made non-empty to stop in-process batches early
        inflight: dict = {}  # future -> _Flight
        flights = self.flights  # batch serial -> _Flight
        # After position p of a batch finishes, the next one starts.
        successor: dict = {}
        # Every result goes back to the scheduler only when a posttask hook
        # reads results (or a failed task may be re-run here): a Profiler,
        # FineMetrics or ProgressBar alone leaves a batch's inner results
        # in its worker, as a run without callbacks does.
        results_wanted = needs_results(posttasks)
        # Whether the workers announce each task's start (else pretask fires
        # as its record arrives, just before posttask).
        exact = bool(pretasks) and exact_starts(pretasks)
        late_starts = bool(pretasks) and not (stream and exact)
        keep_all = results_wanted or rerun_exceptions_locally
        ctx = contextvars.copy_context()
        now = time.time
        state.transfer = None
        # Results in shared memory arrive as handles (see localsched/_pool/shm.py):
        # records come in through an Inbox that releases them once the run stops.
        load = inbox = None
        emit = put
        shared_type = None  # (the type of a result that arrived as a handle)
        if transport is not None:
            load = transport.load
            shared_type = getattr(transport, "SharedValue", None)
            emit = inbox = transport.Inbox(put)
        measure, sample = self.measure, self.sample
        # What a worker is asked to measure (nothing, usually: no keywords).
        probes = {}
        if measure:
            probes["measure"] = True
        if sample:
            probes["sample"] = sample

        def dispatch(spare: int) -> None:
            batch = planner.next_batch(spare)
            items, data = planner.items(batch, keep_all=keep_all, pack_data=pack_data)
            if not pack_data and len(batch) > 1:
                # Results made inside the batch stay in the worker's overlay:
                # only this thread writes the shared cache.
                data = _Overlay()
                data.shared = cache
            elif not pack_data:
                data = cache
            announce = False
            if exact and stream:
                # The worker announces when the batch starts; each later task
                # starts as soon as its predecessor's record is sent.
                announce = True
                for a, b in zip(batch, batch[1:]):
                    successor[a] = b
            flight = _Flight(batch, now())
            try:
                if stream and not pack_data:  # threads: in a copy of the caller's context
                    fut = submit(ctx.copy().run, run_batch, items, data, cancelled,
                                 announce, emit=put, where=flight.where, **probes)
                elif stream:  # a process pool that routes ``emit`` back to this process
                    fut = submit(run_batch, items, data, None, announce, emit=emit, **probes)
                    if measure:  # the inputs were pickled by submit
                        flight.sent = (flight.dispatched, now())
                else:
                    fut = submit(_run_batch_collect, items, data)
            except Exception as exc:  # e.g. a task or an input that cannot be pickled
                _add_note(exc, "while sending " + _name_tasks([keys[i] for i in batch]))
                raise
            inflight[fut] = flight
            flights[planner.serial] = flight
            fut.add_done_callback(put)

        def fail(i: int, exc: BaseException, t0, t1, wid):
            key = keys[i]
            if unpack_exception is not None:
                exc = unpack_exception(exc)
            state.failed[key] = (exc, t0, t1, wid)
            if rerun_exceptions_locally:
                inputs = cache
                if load is not None:  # the values, not their handles
                    inputs = {keys[d]: load(cache[keys[d]]) for d in self.deps[i]}
                _rerun_locally(specs[i], inputs, key, exc)
            if isinstance(exc, Exception):
                _add_note(exc, f"while computing task {key!r}")
            if exc.__traceback__ is not None:
                exc = exc.with_traceback(_trim_traceback(exc.__traceback__))
            raise exc

        try:
            # Processes: one batch more than there are workers, queued in
            # the pool, which hands it to the first worker that finishes
            # without waiting for this thread (bench_shm: 0.245 against
            # 0.256 s).
            ahead = QUEUE_AHEAD if pack_data else 0
            idle = num_workers + ahead  # batches that may start now
            while self.remaining:
                while idle and planner.has_ready():
                    # (spare: the other workers idle now; the batch leaves
                    # them as many ready tasks)
                    dispatch(max(0, idle - ahead - 1))
                    idle -= 1
                if not inflight:  # nothing runs and nothing is ready: a bug
                    raise InvalidStateError("scheduler stalled with tasks left")
                if inbox is not None and events.empty():
                    inbox.idle()  # unlink released segments while workers work
                try:
                    # A timeout, so a Ctrl-C that lands just before the wait
                    # starts (and so cannot interrupt it) is seen promptly.
                    if measure and idle > ahead:  # free workers, and nothing ready
                        w0 = now()
                        try:
                            item = get_event(True, 0.1)
                        finally:
                            self.idle += (idle - ahead) * (now() - w0)
                    else:
                        item = get_event(True, 0.1)
                except Empty:
                    continue
                if type(item) is list:  # records, about a millisecond's worth
                    records = item
                else:  # a batch's future: the worker is free again
                    flight = inflight.pop(item)
                    flights.pop(mark[flight.batch[0]], None)
                    idle += 1
                    exc = item.exception()
                    if exc is not None:
                        # The whole batch failed (a worker died, a batch could
                        # not be sent): name the task that was running.
                        # Records a worker had not sent yet died with it: any
                        # unreported task of the batch may have been running.
                        lost = [keys[i] for i in flight.batch if status[i] == RUNNING]
                        naming = getattr(exc, "for_task", None)
                        if naming is not None:
                            raise naming(lost) from exc
                        _add_note(exc, "while computing " + _name_tasks(lost))
                        raise exc
                    if stream:
                        for i in flight.batch:
                            if status[i] == RUNNING:  # stopped early: lost tasks
                                raise InvalidStateError(
                                    f"task {keys[i]!r} was dispatched but never reported"
                                )
                        continue
                    records = item.result()
                arrived = now() if pack_data else 0.0
                last = len(records) - 1
                flight = None
                for n, (i, ok, value, t0, t1, wid, probe) in enumerate(records):
                    if ok is None and i < 0:  # not a task: measurements (see run_batch)
                        self._note(i, value, flights, mark, wid)
                        continue
                    flight = flights.get(mark[i])
                    if flight is not None:
                        flight.seen(t0 if ok is None else t1, wid)
                    key = keys[i]
                    if ok is None or late_starts:
                        # A batch started (or, without a record stream, we
                        # only learn it now): the task began.
                        if status[i] != RUNNING:
                            raise InvalidStateError(
                                f"task {key!r} announced while {STATE_NAMES[status[i]]}")
                        for f in pretasks:
                            f(key, dsk, state)
                        if ok is None:
                            continue
                    if not ok:
                        fail(i, value, t0, t1, wid)
                    freed = complete(i, value)
                    planner.observe(i, t1 - t0)
                    if type(value) is shared_type:
                        planner.large_result(i)
                    elif unconfirmed and value is not None:
                        planner.small_result(i)
                    if posttasks:
                        state.timing = (t0, t1)
                        state.freed = freed
                        if not results_wanted:
                            value = None  # (not mapped from shared memory for nobody)
                        elif load is not None:
                            value = load(value)
                        if pack_data:
                            sent = 0.0
                            if flight is not None and flight.batch[0] == i:
                                sent = max(0.0, t0 - flight.dispatched)
                            state.transfer = (sent, max(0.0, arrived - t1) if n == last else 0.0)
                        if measure:
                            state.probe = probe
                            if pack_data:
                                state.activities = None
                                if probe is not None and len(probe) > 2 and flight is not None \
                                        and flight.sent is not None:
                                    (d0, d1), (received, _) = flight.sent, probe[2]
                                    state.activities = (("serialize", d0, d1),
                                                        ("transfer", d1, received),
                                                        ("deserialize", received, t0))
                        for f in posttasks:
                            f(key, value, dsk, state, wid)
                    if successor:
                        nxt = successor.pop(i, None)
                        if nxt is not None:
                            k2 = keys[nxt]
                            for f in pretasks:
                                f(k2, dsk, state)
                if measure and flight is not None:
                    flight.arrived = arrived  # (when this hand-off's results arrived)
                # Hold no result past its release while waiting for the next list.
                records = item = value = None
            if (measure or sample) and pack_data and stream:
                self._drain_notes(inflight, get_event, flights, mark)
            if load is not None:
                # The outputs become the caller's own objects (mapped, not
                # copied); their handles go, and with them the segments' names.
                # Released explicitly, not left to the handle's last
                # reference: the pool's listener thread may still hold the
                # record list that brought it (until that thread runs again).
                release = transport.release
                for k in flatten_keys(self.out_keys, []):
                    handle = cache[k]
                    cache[k] = load(handle)
                    release(handle)
                k = handle = None
                inbox.end()
        except BaseException as exc:
            cancelled.append(True)
            if inbox is not None:
                inbox.abandon(cache, lambda: _drain(events))
            stopped = now()
            for fut, flight in inflight.items():
                if fut.cancel():  # still queued in the pool (QUEUE_AHEAD): never started
                    continue
                flight.report_running(self, stopped)
            if isinstance(exc, KeyboardInterrupt) and on_interrupt is not None:
                on_interrupt(list(inflight))
            raise
        finally:
            try:
                planner.remember()  # for the next computation's first batches
            except Exception:  # noqa: BLE001 -- never instead of the run's own outcome
                pass


class _Flight:
    """A batch on its way: what the scheduler knows of it, to say which of
    its tasks was running when a computation stops."""

    __slots__ = ("batch", "dispatched", "last_end", "worker_id", "where", "sent", "arrived")

    def __init__(self, batch: list, dispatched: float):
        self.batch = batch
        self.dispatched = dispatched
        self.sent: Optional[tuple] = None  # (start, end) of pickling its inputs (measuring)
        self.arrived = dispatched  # when its last hand-off of records arrived (measuring)
        self.last_end = dispatched
        self.worker_id = None
        self.where: list = []  # (worker_id, start) from a thread worker

    def seen(self, t: float, wid) -> None:
        self.last_end = t
        self.worker_id = wid

    def report_running(self, run: Run, stopped: float) -> None:
        """Record the batch's running task (its first unreported one) in
        ``state.running_since``: it started when its predecessor ended."""
        for i in self.batch:
            if run.status[i] == RUNNING:
                key = run.keys[i]
                started, wid = self.last_end, self.worker_id
                if self.where:
                    where_wid, where_start = self.where[0]
                    wid = wid if wid is not None else where_wid
                    started = max(started, where_start)
                if key not in run.state.failed:
                    run.state.running_since[key] = (min(started, stopped), wid)
                return


def _trim_traceback(tb):
    """A worker-side traceback without its leading localsched frames (the
    batch runner and spec executor), so the user's frames come first."""
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        tb = tb.tb_next
    return tb


def _name_tasks(keys: list) -> str:
    """'task 'x'' or 'one of tasks 'x', 'y', ...' (at most five named)."""
    if len(keys) == 1:
        return f"task {keys[0]!r}"
    shown = ", ".join(repr(k) for k in keys[:5])
    more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
    return f"one of tasks {shown}{more}"


def _is_raw_callback(x) -> bool:
    return (
        type(x) is tuple
        and len(x) == 5
        and all(f is None or (callable(f) and not hasattr(f, "_callback")) for f in x)
    )


def _drain(events: SimpleQueue) -> list:
    """What is waiting in ``events`` now."""
    out = []
    while True:
        try:
            out.append(events.get_nowait())
        except Empty:
            return out


def _run_batch_collect(items: list, data: dict) -> list:
    """run_batch for executors without a record stream: return the records."""
    out: list = []
    run_batch(items, data, emit=out.extend)
    return out


def _rerun_locally(spec, cache, key, exc):
    """Re-run a failed task here, so that a debugger stops in its code."""
    execute(spec, cache)  # raises again, normally, with the task's own frames
    # It succeeded on a re-run: still report the original failure.
    _add_note(exc, f"task {key!r} failed on its worker but succeeded when re-run locally")


def _add_note(exc: BaseException, note: str) -> None:
    if hasattr(exc, "add_note") and note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
