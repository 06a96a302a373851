"""The one scheduling loop, executor-agnostic: ``get_async``.

Design
======

Data flow for a pool (threads or processes)::

    caller thread (the scheduler)                    workers
    ─────────────────────────────                    ───────
    compile graph ─► cull ─► order (priorities)
    ready heap ──pop──► batch ──submit(run_batch)──► run_batch: for each task
         ▲                                             t0, execute spec, t1
         │                                             emit([(i, ok, value, t0, t1, wid), ...])
    process record ◄── events (SimpleQueue) ◄──────────┘   (per task, as it ends)
      cache result, release inputs,                  future done ──► events
      newly ready dependents ─► ready heap           (the worker is free again)

Only the caller's thread touches the scheduler state and fires callbacks, so
callbacks never run concurrently and need no locks.

State.  Tasks are integers (positions in the compiled graph).  ``status[i]``
moves through named states, each move checked (a task finishing twice is a
bug and raises InvalidStateError)::

    WAITING ──► READY ──► RUNNING ──► DONE           (data keys start as DONE)
    WAITING ─────────────► RUNNING                   (joined a batch, see below)

``waiting[i]`` counts the unfinished dependencies of i; ``refs[i]`` the
unfinished dependents of i.  When ``refs[i]`` drops to zero the result leaves
the cache, unless i is a requested output.

Task selection.  ``order.order`` gives each task a static priority: its
position in a depth-first post-order from the outputs.  Ready tasks sit in a
heap keyed by that priority, so the lowest (the one that finishes the
current branch) is always dispatched first.

Batches.  A dispatch pops a few ready tasks for one idle worker; then, while
the batch is small, it adds every dependent whose unfinished dependencies
are all inside the batch (a chain, or a whole small sub-tree) and sorts the
batch by priority, which keeps it topological.  The worker runs it in order,
so a 10,000-task chain costs one hand-off per batch instead of one per task.
A batch holds about BATCH_BUDGET seconds of work, judged by the measured
mean duration of each task's function: a task whose function has not been
timed yet, or is slow, goes alone, so long tasks spread over all workers.
A result only later tasks of the same batch need is dropped by the worker
after its last use there and never travels back.

Timing.  Workers hand records over in lists, about once a millisecond.
When someone listens for task starts, a worker announces each batch as it
starts and hands over finished records before each next task starts; that
is when ``pretask`` fires.  ``posttask`` fires when the record arrives,
and ``state.timing`` holds the ``(start, end)`` epoch seconds the worker
measured around the call itself.

The synchronous scheduler passes ``submit=None``: the same state machine runs
tasks inline, in priority order, in the caller's thread.
"""

from __future__ import annotations

import contextvars
import heapq
from contextlib import nullcontext
import threading
import time
from collections.abc import Mapping
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

if TYPE_CHECKING:
    from concurrent.futures import Future

from .callbacks import active_callbacks, normalize_callback, unpack_callbacks
from .graph import A_TASK, CALL, DATA, NESTED, NODE, as_mapping, compile_graph, execute, flatten_keys
from .order import order_and_consumers

__all__ = ["get_async", "State", "InvalidStateError", "in_task"]

# Task states.
WAITING, READY, RUNNING, DONE = 0, 1, 2, 3
STATE_NAMES = ("waiting", "ready", "running", "done")

# Serialises callback invocations across concurrent computations (two
# threads computing at once, or a get inside a task), so that no two
# callbacks ever run at the same time.  Reentrant: a callback may compute.
_callback_lock = threading.RLock()

# Set while a worker executes tasks: a get called from inside a task then
# ignores the globally registered callbacks of the outer computation.
_task_context: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "localsched_in_task", default=False
)


# In a worker process, its pid: records then name the process, not the thread.
_process_worker_id: int = 0


def in_task() -> bool:
    """Whether the calling code runs inside a localsched task."""
    return _task_context.get()


class InvalidStateError(RuntimeError):
    """A task made a move its state does not allow (e.g. finished twice)."""


class State(Mapping):
    """The scheduler state handed to callbacks.

    A read-only Mapping with dask's documented fields:

    - ``cache`` (live dict key -> result), ``finished`` (live set of finished
      keys), ``released`` (live set of keys whose results left the cache);
    - ``dependencies`` and ``dependents`` (dict key -> set of keys, built on
      first access);
    - ``ready`` (list, next first), ``running`` (set), ``waiting`` (dict key ->
      set of unfinished dependencies), ``waiting_data`` (dict key -> set of
      unfinished dependents of a cached key): snapshots computed on access,
      so read them now and then, not per task.

    Attributes, for the task whose posttask is firing: ``timing`` (its
    ``(start, end)`` epoch seconds, measured by the worker) and ``freed`` (the
    keys whose results its end released from the cache); and ``ntasks``
    (tasks that will run).
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
                 "_static", "__weakref__")

    def __init__(self, run: "_Run"):
        self._run = run
        self.cache: dict = run.cache
        self.finished: set = set()
        self.released: set = set()
        self.ntasks: int = run.ntasks
        self.timing: tuple = (0.0, 0.0)
        self.freed: list = []
        self._static: dict = {}

    def __getitem__(self, name: str):
        if name == "cache":
            return self.cache
        if name == "finished":
            return self.finished
        if name == "released":
            return self.released
        run = self._run
        keys = run.keys
        if name in ("dependencies", "dependents"):
            if name not in self._static:
                self._static[name] = _Adjacency(run, name == "dependencies")
            return self._static[name]
        status = run.status
        deps = run.deps
        if name == "ready":  # not started, all inputs done; next first
            return [
                keys[i]
                for i in run.order
                if status[i] <= READY and all(status[d] == DONE for d in deps[i])
            ]
        if name == "running":
            return {keys[i] for i in run.order if status[i] == RUNNING}
        if name == "waiting":  # not started, some inputs not done
            out = {}
            for i in run.order:
                if status[i] <= READY:
                    left = {keys[d] for d in deps[i] if status[d] != DONE}
                    if left:
                        out[keys[i]] = left
            return out
        if name == "waiting_data":
            index = run.index
            return {
                k: {keys[j] for j in run.dependents[index[k]] if status[j] != DONE}
                for k in self.cache
            }
        raise KeyError(name)

    def __iter__(self):
        return iter(self.FIELDS)

    def __len__(self) -> int:
        return len(self.FIELDS)

    def __repr__(self) -> str:
        return f"<State: {len(self.finished)}/{self.ntasks} tasks finished>"


class _Overlay(dict):
    """A batch's own results, falling back to the shared cache (set as
    ``.shared``): dict lookups stay in C except on a miss."""

    __slots__ = ("shared",)

    def __missing__(self, key):
        return self.shared[key]


class _Adjacency(Mapping):
    """``state["dependencies"]`` / ``state["dependents"]``: key -> set of keys,
    computed per lookup from the compiled graph (building the whole dict
    would cost more than a typical callback spends on a run)."""

    def __init__(self, run: "_Run", forward: bool):
        self._run = run
        self._forward = forward

    def _adjacency(self) -> list:
        return self._run.deps if self._forward else self._run.dependents

    def __getitem__(self, key):
        run = self._run
        i = run.index[key]
        if not run.in_run[i]:
            raise KeyError(key)
        keys = run.keys
        return {keys[j] for j in self._adjacency()[i]}

    def __iter__(self):
        keys = self._run.keys
        return (keys[i] for i in self._run.needed)

    def __len__(self) -> int:
        return len(self._run.needed)


# Seconds of (measured) work a batch is sized to: enough to make the
# hand-off to a worker cheap next to the work, small enough to balance.
BATCH_BUDGET = 2e-3

# A worker hands finished records over at least this often (seconds): many
# short tasks share one hand-off, and the scheduler still learns within about
# a millisecond when a task ends (a long task's record goes out at once).
FLUSH_INTERVAL = 1e-3


def run_batch(
    batch: list,
    data: dict,
    cancelled=None,
    announce: bool = False,
    *,
    emit: Callable,
):
    """Run a batch of specs in order, on a worker; emit lists of records.

    ``batch`` holds ``(i, key, spec, store, drop, send)``; dependency results
    are read from ``data`` (the shared cache, an overlay of it, or the inputs
    shipped to a process).  ``store``: keep the result in ``data`` for later
    tasks of the batch; ``drop``: keys this task was the last in-batch user
    of, deleted from ``data`` after it ran; ``send``: the record carries the
    result (else None: only this batch needed it).  A record is ``(i, ok, value,
    start, end, worker_id)``; the batch stops at the first failure.  Records
    are handed to ``emit`` in lists: whenever ``FLUSH_INTERVAL`` has passed
    since the last hand-off, on a failure, and at the end.  With
    ``announce`` (someone listens for task starts), a first record ``(i,
    None, None, start, 0.0, worker_id)`` says at once that the batch has
    started, and finished records are handed over before each next task
    starts, so its start is known when it happens.
    """
    token = _task_context.set(True)
    wid = _process_worker_id or threading.get_ident()
    now = time.time
    buf: list = []
    try:
        last = now()
        if announce:
            emit([(batch[0][0], None, None, last, 0.0, wid)])
        for i, key, spec, store, drop, send in batch:
            if cancelled:
                break
            if announce and buf:
                emit(buf)
                buf = []
            t0 = now()
            try:
                value = execute(spec, data)
            except BaseException as exc:  # noqa: B036 -- reported, not swallowed
                buf.append((i, False, exc, t0, now(), wid))
                break
            t1 = now()
            if store:
                data[key] = value
            for k in drop:
                del data[k]
            buf.append((i, True, value if send else None, t0, t1, wid))
            value = None
            if t1 - last >= FLUSH_INTERVAL:
                emit(buf)
                buf = []
                last = t1
    finally:
        _task_context.reset(token)
        if buf:
            emit(buf)


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
        Fired in addition to the globally registered ones.
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
        At most this many ready tasks per batch (default: adaptive).
    on_interrupt : callable, optional
        Called with the running futures when the computation is abandoned
        (KeyboardInterrupt); may cancel or kill them.

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
    cbs = [] if _task_context.get() else active_callbacks()
    if callbacks is not None:
        if hasattr(callbacks, "_callback") or _is_raw_callback(callbacks):
            callbacks = [callbacks]  # one callback, not a collection of them
        for c in callbacks:
            c = normalize_callback(c)
            if c not in cbs:
                cbs.append(c)
    starts, start_states, pretasks, posttasks, finishes = unpack_callbacks(cbs)

    # Callbacks see the graph as a Mapping (dask hands schedulers an
    # expression object with __dask_graph__; dask's callbacks expect a dict).
    dsk = as_mapping(dsk)
    started: list = []  # finish hooks of callbacks whose start ran
    errored = True
    run = None
    state = None
    # From here on, a get inside a task or a callback is nested: it ignores
    # the globally registered callbacks.
    context_token = _task_context.set(True)
    try:
        if starts or finishes:
            for cb in cbs:
                if cb[0] is not None:
                    with _callback_lock:
                        cb[0](dsk)
                if cb[4] is not None:
                    started.append(cb[4])
        run = _Run(dsk, keys)
        state = run.state = State(run)
        for f in start_states:
            with _callback_lock:
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
            )
        result = run.results()
        errored = False
    finally:
        try:
            _finish_all(started, dsk, state, errored)
        finally:
            _task_context.reset(context_token)
    return result


def _finish_all(hooks: list, dsk, state, errored: bool) -> None:
    """Call every finish hook, even when one raises; then raise the first
    error (chained to the computation's own error, if any)."""
    first = None
    for f in hooks:
        try:
            with _callback_lock:
                f(dsk, state, errored)
        except BaseException as exc:  # noqa: B036 -- re-raised below
            if first is None:
                first = exc
    if first is not None:
        raise first


class _Run:
    """One computation: the compiled, culled graph and its live state."""

    def __init__(self, dsk: Mapping, keys: Any):
        self.out_keys = keys
        flat = flatten_keys(keys, [])
        for k in flat:
            try:
                hash(k)
            except TypeError:
                raise TypeError(f"key {k!r} is unhashable; keys are str, bytes, int, "
                                f"float or tuples of these") from None
        for k in flat:
            if k not in dsk:
                raise KeyError(f"key {k!r} is not in the graph")
        g = compile_graph(dsk)
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
        self.is_output = is_output = bytearray(len(deps))
        for i in outputs:
            is_output[i] = 1
        self.status = status = bytearray(len(deps))  # all WAITING
        # refs[i]: the dependents of i that will run.  Data they need goes
        # into the cache up front, as does requested data.
        self.refs = refs = [0] * len(deps)
        self.cache = cache = {}
        self.in_run = in_run = bytearray(len(deps))  # runs, or is data it uses
        for i in run_order:
            in_run[i] = 1
            for d in deps[i]:
                refs[d] += 1
                if is_data[d] and status[d] != DONE:
                    status[d] = DONE
                    cache[keys[d]] = specs[d][1]
        for i in outputs:
            if is_data[i]:
                status[i] = DONE
                cache[keys[i]] = specs[i][1]
        for i, s in enumerate(status):
            if s == DONE:
                in_run[i] = 1
        self.ready: list = []
        self.state: Optional[State] = None

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

    # -- synchronous -------------------------------------------------------

    def run_inline(self, dsk, pretasks, posttasks):
        """Run every task in priority order in this thread."""
        keys, specs, cache, status = self.keys, self.specs, self.cache, self.status
        deps, refs, is_output = self.deps, self.refs, self.is_output
        state = self.state
        finished = state.finished
        released = state.released
        now = time.time
        wid = threading.get_ident()
        try:
            for i in self.order:
                key = keys[i]
                if pretasks:
                    with _callback_lock:
                        for f in pretasks:
                            f(key, dsk, state)
                status[i] = RUNNING
                t0 = now()
                value = execute(specs[i], cache)
                t1 = now()
                cache[key] = value
                status[i] = DONE
                finished.add(key)
                freed = []
                for d in deps[i]:
                    refs[d] -= 1
                    if not refs[d] and not is_output[d]:
                        k = keys[d]
                        del cache[k]
                        released.add(k)
                        freed.append(k)
                if posttasks:
                    with _callback_lock:
                        state.timing = (t0, t1)
                        state.freed = freed
                        for f in posttasks:
                            f(key, value, dsk, state, wid)
        except BaseException as exc:
            if status[i] == RUNNING and isinstance(exc, Exception):
                _add_note(exc, f"while computing task {keys[i]!r}")
            raise

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
    ):
        keys, specs, cache, status = self.keys, self.specs, self.cache, self.status
        deps, dependents, refs, is_output = self.deps, self.dependents, self.refs, self.is_output
        state = self.state
        finished = state.finished
        released = state.released
        priority = [0] * len(keys)
        for p, i in enumerate(self.order):
            priority[i] = p
        waiting = [0] * len(keys)
        ready = self.ready
        for i in self.order:
            w = 0
            for d in deps[i]:
                if status[d] != DONE:
                    w += 1
            waiting[i] = w
            if not w:
                ready.append((priority[i], i))
                status[i] = READY
        heapq.heapify(ready)

        hooks_lock = _callback_lock if (pretasks or posttasks) else nullcontext()
        events: SimpleQueue = SimpleQueue()
        put = events.put
        get_event = events.get
        cancelled: list = []  # made non-empty to stop in-process batches early
        inflight: dict = {}  # future -> batch (list of task indices)
        # After position p of a batch finishes, the next one starts.
        successor: dict = {}
        remaining = self.ntasks
        # Adaptive batching: measured [total seconds, count] per function.
        group_of = [_spec_group(spec) for spec in specs]
        gstats: dict = {}
        limit = chunksize or 256  # tasks per batch at most
        ctx = contextvars.copy_context()

        def estimate(i: int):
            """Mean measured duration of i's function so far, or None."""
            st = gstats.get(group_of[i])
            return None if st is None else st[0] / st[1]

        def dispatch(idle: int) -> None:
            # A batch holds about BATCH_BUDGET seconds of work, judged by
            # the measured durations of each task's function: a task whose
            # function has not been timed yet, or is slow, goes alone, so
            # long tasks spread over all workers.
            i = heapq.heappop(ready)[1]
            status[i] = RUNNING
            batch = [i]
            spent = estimate(i)
            if spent is not None and spent < BATCH_BUDGET:
                # Leave ready work for the other idle workers.
                pops = min(limit, max(1, len(ready) // (idle * 2)))
                while ready and len(batch) < pops:
                    e = estimate(ready[0][1])
                    if e is None or spent + e > BATCH_BUDGET:
                        break
                    i = heapq.heappop(ready)[1]
                    status[i] = RUNNING
                    batch.append(i)
                    spent += e
                # Grow by dependents whose unfinished inputs are all in the
                # batch: they could not start before the batch ends anyway.
                inside: dict = {}
                j = 0
                while j < len(batch) and len(batch) < limit:
                    i = batch[j]
                    j += 1
                    for d in dependents[i]:
                        if status[d] != WAITING:
                            continue
                        c = inside.get(d, 0) + 1
                        inside[d] = c
                        if c == waiting[d]:
                            e = estimate(d)
                            if e is not None and spent + e <= BATCH_BUDGET:
                                status[d] = RUNNING
                                batch.append(d)
                                spent += e
                if len(batch) > 1:
                    batch.sort(key=priority.__getitem__)
            # What each task must keep for later tasks of the batch, and what
            # it was the last in-batch user of: the worker drops those, so a
            # batch holds no more results than a task-by-task run would.
            inb = set(batch) if len(batch) > 1 or pack_data else ()
            last_use: dict = {}
            if len(batch) > 1 or pack_data:
                for p, i in enumerate(batch):
                    for d in deps[i]:
                        if pack_data or d in inb:
                            last_use[d] = p
            drops: list = [[] for _ in batch]
            for d, p in last_use.items():  # (the scheduler keeps its own copy)
                drops[p].append(keys[d])
            # A result only later tasks of this batch use never travels back
            # (unless a callback or a local re-run may want it): the record
            # carries None, so the worker need not hold it until it reports.
            keep_all = bool(posttasks) or rerun_exceptions_locally
            items = [(i, keys[i], specs[i], i in last_use, drops[p],
                      keep_all or is_output[i] or not inb
                      or not all(c in inb for c in dependents[i]))
                     for p, i in enumerate(batch)]
            if pack_data:
                data = {}
                for i in batch:
                    for d in deps[i]:
                        if d not in inb:
                            k = keys[d]
                            data[k] = cache[k]
            elif len(batch) > 1:
                # Results made inside the batch stay in the worker's overlay:
                # only this thread writes the shared cache.
                data = _Overlay()
                data.shared = cache
            else:
                data = cache
            announce = False
            if pretasks and stream:
                # The worker announces when the batch starts; each later task
                # starts as soon as its predecessor's record is sent.
                announce = True
                for a, b in zip(batch, batch[1:]):
                    successor[a] = b
            try:
                if stream and not pack_data:  # threads: in a copy of the caller's context
                    fut = submit(ctx.copy().run, run_batch, items, data, cancelled,
                                 announce, emit=put)
                elif stream:  # a process pool that routes ``emit`` back to this process
                    fut = submit(run_batch, items, data, None, announce, emit=put)
                else:
                    fut = submit(_run_batch_collect, items, data)
            except Exception as exc:  # e.g. a task or an input that cannot be pickled
                _add_note(exc, "while sending " + _name_tasks([keys[i] for i in batch]))
                raise
            inflight[fut] = batch
            fut.add_done_callback(put)

        def fail(i: int, exc: BaseException):
            key = keys[i]
            if unpack_exception is not None:
                exc = unpack_exception(exc)
            if rerun_exceptions_locally:
                _rerun_locally(specs[i], cache, key, exc)
            if isinstance(exc, Exception):
                _add_note(exc, f"while computing task {key!r}")
            raise exc

        try:
            idle = num_workers
            while remaining:
                while ready and idle:
                    dispatch(idle)
                    idle -= 1
                if not inflight:  # nothing runs and nothing is ready: a bug
                    raise InvalidStateError("scheduler stalled with tasks left")
                try:
                    # A timeout, so a Ctrl-C that lands just before the wait
                    # starts (and so cannot interrupt it) is seen promptly.
                    item = get_event(True, 0.1)
                except Empty:
                    continue
                if type(item) is list:  # records, about a millisecond's worth
                    records = item
                else:  # a batch's future: the worker is free again
                    batch = inflight.pop(item)
                    idle += 1
                    exc = item.exception()
                    if exc is not None:
                        # The whole batch failed (a worker died, a batch could
                        # not be sent): name the task that was running.
                        # Records a worker had not sent yet died with it: any
                        # unreported task of the batch may have been running.
                        lost = [keys[i] for i in batch if status[i] == RUNNING]
                        naming = getattr(exc, "for_task", None)
                        if naming is not None:
                            raise naming(lost) from exc
                        _add_note(exc, "while computing " + _name_tasks(lost))
                        raise exc
                    if stream:
                        for i in batch:
                            if status[i] == RUNNING:  # stopped early: lost tasks
                                raise InvalidStateError(
                                    f"task {keys[i]!r} was dispatched but never reported"
                                )
                        continue
                    records = item.result()
                # Callbacks fire under the lock; taken once per list of records.
                with hooks_lock:
                    for i, ok, value, t0, t1, wid in records:
                        if status[i] != RUNNING:
                            raise InvalidStateError(
                                f"task {keys[i]!r} reported as finished while "
                                f"{STATE_NAMES[status[i]]}"
                            )
                        key = keys[i]
                        if ok is None or (pretasks and not stream):
                            # A batch started (or, without a record stream, we
                            # only learn it now): the task began.
                            for f in pretasks:
                                f(key, dsk, state)
                            if ok is None:
                                continue
                        if not ok:
                            fail(i, value)
                        cache[key] = value
                        status[i] = DONE
                        finished.add(key)
                        remaining -= 1
                        st = gstats.get(group_of[i])
                        if st is None:
                            gstats[group_of[i]] = [t1 - t0, 1]
                        else:
                            st[0] += t1 - t0
                            st[1] += 1
                        for d in dependents[i]:
                            w = waiting[d] - 1
                            waiting[d] = w
                            if not w and status[d] == WAITING:
                                status[d] = READY
                                heapq.heappush(ready, (priority[d], d))
                        freed = []
                        for d in deps[i]:
                            r = refs[d] - 1
                            refs[d] = r
                            if not r and not is_output[d]:
                                k = keys[d]
                                del cache[k]
                                released.add(k)
                                freed.append(k)
                        if posttasks:
                            state.timing = (t0, t1)
                            state.freed = freed
                            for f in posttasks:
                                f(key, value, dsk, state, wid)
                        if pretasks:
                            nxt = successor.pop(i, None)
                            if nxt is not None:
                                k2 = keys[nxt]
                                for f in pretasks:
                                    f(k2, dsk, state)
        except BaseException as exc:
            cancelled.append(True)
            if isinstance(exc, KeyboardInterrupt) and on_interrupt is not None:
                on_interrupt(list(inflight))
            raise


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


def _run_batch_collect(items: list, data: dict) -> list:
    """run_batch for executors without a record stream: return the records."""
    out: list = []
    run_batch(items, data, emit=out.extend)
    return out


def _spec_group(spec: tuple):
    """What a task's duration is estimated by: its function (as an id)."""
    kind = spec[0]
    if kind == CALL:
        return id(spec[1])
    if kind == NESTED and spec[1][0] == A_TASK:
        return id(spec[1][1])
    if kind == NODE:
        return id(getattr(spec[1], "func", None) or type(spec[1]))
    return kind  # aliases, other structures


def _rerun_locally(spec, cache, key, exc):
    """Re-run a failed task here, so that a debugger stops in its code."""
    execute(spec, cache)  # raises again, normally, with the task's own frames
    # It succeeded on a re-run: still report the original failure.
    _add_note(exc, f"task {key!r} failed on its worker but succeeded when re-run locally")


def _add_note(exc: BaseException, note: str) -> None:
    if hasattr(exc, "add_note") and note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
