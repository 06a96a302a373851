"""The state of one computation and its moves: events in, decisions out.

``RunState`` is the compiled, culled and ordered graph with the live state
of every task.  It knows nothing of pools, pipes, callbacks or diagnostics:
a loop tells it what happened (a task started, a task finished with this
value) and it answers with what follows (which tasks became ready, which
results may leave the cache).  The two local loops, inline and pool, drive
the same class, unchanged.  The cluster loop (``localsched.distributed``)
does not: there the cluster's scheduler orders and runs the graph, and the
caller only follows it, in a ``ClusterState`` rebuilt from the scheduler's
events (it shares the lifecycle and the callbacks' view with the local
loops, not this class).

Tasks are integers (positions in the compiled graph).  ``status[i]`` moves
through the states below; a move the state does not allow raises
``InvalidStateError``::

    WAITING ──► READY ──► RUNNING ──► DONE           (data keys start as DONE)
    WAITING ─────────────► RUNNING                   (joined a batch)

``waiting[i]`` counts the unfinished dependencies of i, ``refs[i]`` its
unfinished dependents; when ``refs[i]`` drops to zero the result leaves the
cache, unless i is a requested output.

Task selection.  ``order.order`` gives each task a static priority (its
position in a depth-first post-order from the outputs).  Ready tasks sit on
a stack, ``ready``: those a finished task made ready go on top, sorted so
the lowest priority is taken first.  The branch just advanced is continued
before older ready work (dask's rule).

Preparation (``RunState(...)``: compile, order, initial state) runs with
the garbage collector paused, and leaves it as the caller had it
(``RunState``'s docstring says why and how).

Nothing here points back at whoever drives it: a ``RunState`` holds the
graph, the cache and plain containers, so dropping the computation's last
reference frees its results at once, without the cyclic collector.

>>> from operator import add
>>> m = RunState({'a': 1, 'b': (add, 'a', 1), 'c': (add, 'b', 1)}, ['c', ['b']])
>>> complete = m.mover()
>>> i = m.ready.pop(); m.start(i); m.keys[i], complete(i, 2)
('b', ['a'])
>>> i = m.ready.pop(); m.start(i); m.keys[i], complete(i, 3)
('c', [])
>>> m.remaining, m.results()
(0, (3, (2,)))
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from itertools import compress
from operator import not_ as _not
from typing import Any

from ..plan.graph import DATA, compile_graph, flatten_keys
from ..plan.order import order_and_consumers

__all__ = ["RunState", "InvalidStateError", "WAITING", "READY", "RUNNING", "DONE",
           "STATE_NAMES", "SLOT_NOT_STARTED", "SLOT_QUEUED"]

# What a batch's task slot (``RunState.at``) may say besides a task's index.
SLOT_NOT_STARTED, SLOT_QUEUED = -1, -2

# Task states (a bytearray holds one per task).
WAITING, READY, RUNNING, DONE = 0, 1, 2, 3
STATE_NAMES = ("waiting", "ready", "running", "done")


class InvalidStateError(RuntimeError):
    """A task made a move its state does not allow (e.g. finished twice)."""


class RunState:
    """One computation's graph and live state (see the module docstring).

    Built from a graph Mapping, the requested ``keys`` (nested lists) and
    ``known`` results (dask's ``cache=``: those keys are data).  Refuses bad
    input before anything runs: unhashable or missing keys, missing
    dependencies, cycles.

    Read by loops and the planner: ``keys``, ``index``, ``deps``, ``specs``,
    ``order``, ``dependents``, ``priority``, ``is_output``, ``status``,
    ``waiting``, ``refs``, ``in_run``, ``ready``, ``cache``, ``finished``,
    ``released``, ``remaining``, ``ntasks``.  ``in_flight`` (batch id ->
    task indices), ``at`` (batch id -> its task slot, which says the task
    its worker started last: see ``at_work``) and ``current`` (the task
    run inline) are the loop's notes of what runs now, for
    ``running_keys`` and ``at_work``.

    Preparation (``RunState(...)``: compile, order, initial state) runs with
    the garbage collector paused: it makes several containers per task and
    frees none, so the collector's passes over them (for a large graph, ~20
    intermediate ones and a full one) would find nothing.  It is switched back
    on in a ``finally`` if it was on, so an error or Ctrl-C leaves it as the
    caller had it; tasks always run with the collector as the caller set it.
    Gets preparing in several threads at once: one may re-enable it while
    another still prepares (that one merely collects); none leaves it off.
    """

    def __init__(self, dsk: Mapping, keys: Any, known: dict | None = None):
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
        # The collector is paused while the graph is prepared (see the
        # class docstring); as the caller left it on every exit path.
        collecting = gc.isenabled()
        try:
            gc.disable()
            self._prepare(dsk, known, flat)
        finally:
            if collecting:
                gc.enable()
        self.remaining = self.ntasks
        self.in_flight: dict = {}  # batch id -> task indices (pool loops)
        self.at: dict = {}  # batch id -> its task slot (the task its worker started last)
        self.current: int | None = None  # the task running inline (sync)

    def _prepare(self, dsk: Mapping, known: dict | None, flat: list) -> None:
        """Compile, cull and order the graph; the tasks' initial states."""
        g = compile_graph(dsk, known)
        self.keys = g.keys
        self.index = g.index
        self.deps = g.deps
        self.specs = g.specs
        # The run order also culls: tasks no output needs are left out.
        self.order, self.dependents = order_and_consumers(
            g.deps, g.is_data, [g.index[k] for k in flat], g.keys)
        self.ntasks = len(self.order)
        self.cache: dict = known if known is not None else {}
        # (a cache the caller passed, dask's ``cache=``, is theirs to read)
        self.owns_cache = known is None
        self.finished: set = set()  # keys of finished tasks
        self.released: set = set()  # keys whose results left the cache
        self._initial_state(g.is_data, [g.index[k] for k in flat])

    def _initial_state(self, is_data, outputs: list) -> None:
        # (Built with C-level loops, map and compress, where they can be:
        # this runs once per computation, over every task.)
        keys, deps, specs, run_order = self.keys, self.deps, self.specs, self.order
        dependents = self.dependents
        n = len(keys)
        self.priority = priority = [0] * n
        self.in_run = in_run = bytearray(n)  # runs, or is data it uses
        for p, i in enumerate(run_order):
            priority[i] = p
            in_run[i] = 1
        self.is_output = is_output = bytearray(n)
        for i in outputs:
            is_output[i] = 1
        self.status = status = bytearray(n)  # all WAITING
        # refs[i]: the dependents of i that will run (the order's consumers).
        self.refs = list(map(len, dependents))
        # waiting[i]: the inputs of i that are tasks.  Data the tasks use
        # goes into the cache up front, as does requested data.
        self.waiting = waiting = list(map(len, deps))
        cache = self.cache
        for d in compress(range(n), is_data):
            users = dependents[d]
            if users or is_output[d]:
                in_run[d] = 1
                status[d] = DONE
                cache[keys[d]] = specs[d][1]
                for i in users:
                    waiting[i] -= 1
        # The ready stack: the tasks waiting for nothing, the first to run on top.
        ready = list(compress(run_order, map(_not, map(waiting.__getitem__, run_order))))
        for i in ready:
            status[i] = READY
        ready.reverse()
        self.ready: list = ready  # next on top

    @classmethod
    def empty(cls) -> RunState:
        """The state of a computation that never started (its graph was
        refused): nothing to run, nothing cached."""
        return cls({}, [])

    # -- the moves ----------------------------------------------------------------

    def start(self, i: int) -> None:
        """READY -> RUNNING (the inline loop; batches start in the planner)."""
        if self.status[i] != READY:
            raise InvalidStateError(
                f"task {self.keys[i]!r} started while {STATE_NAMES[self.status[i]]}")
        self.status[i] = RUNNING

    def mover(self, views: bool = True) -> Callable[[int, Any], list]:
        """``complete(i, value)``: RUNNING -> DONE: store the result, wake
        dependents (onto the ready stack), release inputs no task needs any
        more; returns the released keys.  A closure over the structures
        (it runs once per task; locals are faster than attributes), held by
        the loop, never by the state.  ``views=False`` (a run no callback
        takes part in): the sets only a state view reads, ``finished`` and
        ``released``, stay empty.  ``inline._run_plain`` and the threads'
        crew (``threadloop.Crew._run_tasks``) spell the same move out,
        without those sets: keep the three in step."""
        status, keys, cache = self.status, self.keys, self.cache
        waiting, dependents, deps = self.waiting, self.dependents, self.deps
        priority = self.priority
        refs, is_output, ready = self.refs, self.is_output, self.ready
        finished, released = self.finished, self.released
        push, by_priority = ready.extend, priority.__getitem__
        machine = self

        def complete(i: int, value) -> list:
            if status[i] != RUNNING:
                raise InvalidStateError(
                    f"task {keys[i]!r} reported as finished while {STATE_NAMES[status[i]]}")
            key = keys[i]
            cache[key] = value
            status[i] = DONE
            if views:
                finished.add(key)
            machine.remaining -= 1
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
                    if views:
                        released.add(k)
                    freed.append(k)
            return freed

        return complete

    def sequential_peak(self) -> int:
        """The most entries the cache holds, counted after each task's move,
        when the run's tasks run one at a time by the ready rule (the inline
        loop's run, from the start): results and the data the tasks use.

        The threads' crew compares what it holds with this (see
        ``threadloop.Crew``, "Results that count").  It reads only what the
        run never changes (the graph, the order), so any thread may call it
        at any point of the run: about a microsecond per task, once."""
        deps, dependents, is_output = self.deps, self.dependents, self.is_output
        order, by_priority = self.order, self.priority.__getitem__
        in_order = bytearray(len(deps))
        for i in order:
            in_order[i] = 1
        waiting = [0] * len(deps)
        for i in order:
            waiting[i] = sum(map(in_order.__getitem__, deps[i]))
        refs = list(map(len, dependents))
        held = sum(self.in_run) - len(order)  # (the data, in the cache from the start)
        ready = [i for i in order if not waiting[i]]
        ready.reverse()
        pop, push, peak = ready.pop, ready.extend, held
        while ready:
            i = pop()
            held += 1
            new = []
            for d in dependents[i]:
                waiting[d] -= 1
                if not waiting[d]:
                    new.append(d)
            if new:
                new.sort(key=by_priority, reverse=True)
                push(new)
            for d in deps[i]:
                refs[d] -= 1
                if not refs[d] and not is_output[d]:
                    held -= 1
            if held > peak:
                peak = held
        return peak

    # -- what it answers ------------------------------------------------------------

    def results(self):
        """The requested outputs, nested as requested (lists become tuples).
        Built without recursion: no closure refers to itself, nothing stays."""
        cache = self.cache
        out_keys = self.out_keys
        if type(out_keys) is not list:
            return cache[out_keys]
        # An explicit stack of (list of keys, values so far).
        root: list = []
        stack = [(iter(out_keys), root)]
        while stack:
            items, values = stack[-1]
            for k in items:
                if type(k) is list:
                    inner: list = []
                    values.append(inner)
                    stack.append((iter(k), inner))
                    break
                values.append(cache[k])
            else:
                stack.pop()
                if stack:  # the finished inner list becomes a tuple
                    parent = stack[-1][1]
                    parent[-1] = tuple(values)
        return tuple(root)

    @property
    def needed(self) -> list:
        """The indices taking part: data the tasks use, then the tasks."""
        specs, in_run = self.specs, self.in_run
        return [i for i, r in enumerate(in_run) if r and specs[i][0] == DATA] + self.order

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
        """Keys of the tasks running now (O(running)): dask's ``running``,
        every task handed to a worker and not yet reported."""
        keys, status = self.keys, self.status
        current = self.current  # (read once: another thread may be asking)
        if current is not None:  # (sync: the task this thread runs, if any)
            return {keys[current]} if status[current] == RUNNING else set()
        return {keys[i] for batch in list(self.in_flight.values()) for i in batch
                if status[i] == RUNNING}

    def at_work(self) -> tuple:
        """``(keys, ended)``: the keys of the tasks the workers run at this
        moment, and the keys of the tasks that have ended whose records have
        not arrived yet (a live view's counts).  A batch runs its tasks in
        order and its worker hands records over every millisecond or so, so
        a quick task's record may wait behind a long one; the batch's task
        slot (``at``) says which task its worker runs, so the tasks before
        it in its batch have ended and those after it wait.  A slot is a
        list whose ``[1]`` its thread sets, or a function to ask (a process
        pool's job: ``_pool.jobs._JobFuture.task_at_work``); it says the
        task's index, ``SLOT_NOT_STARTED`` (its first task is about to
        run), ``SLOT_QUEUED`` (the batch waits for a worker: none of it
        runs) or None (it cannot tell).  Without a slot, or one that cannot
        tell, every unreported task of a batch is at work, as in
        ``running_keys``.  O(tasks in flight)."""
        keys, status, at = self.keys, self.status, self.at
        current = self.current
        if current is not None:
            return ({keys[current]} if status[current] == RUNNING else set()), []
        running: set = set()
        ended: list = []
        for serial, batch in list(self.in_flight.items()):
            slot = at.get(serial)
            i = None if slot is None else slot[1] if type(slot) is list else slot()
            if i == SLOT_QUEUED:
                continue
            if i is None or i not in batch:  # (cannot tell, or not started yet)
                if i is None or status[batch[0]] != RUNNING:
                    running.update(keys[j] for j in batch if status[j] == RUNNING)
                else:
                    running.add(keys[batch[0]])
                continue
            if status[i] == RUNNING:
                running.add(keys[i])
            ended.extend(keys[j] for j in batch[:batch.index(i)] if status[j] == RUNNING)
        return running, ended

    def waiting_count(self) -> int:
        """How many tasks of the run wait for inputs (counted in C)."""
        status = self.status
        return max(0, self.remaining - status.count(READY) - status.count(RUNNING))

    def __repr__(self) -> str:
        return f"<RunState: {self.ntasks - self.remaining}/{self.ntasks} tasks done>"
