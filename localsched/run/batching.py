"""Which tasks a worker runs in one hand-off: the batch planner.

Handing a task to a worker costs several microseconds (a queue, a wake-up,
on processes a pipe); many dask tasks take less.  So a worker receives a
*batch*: a short run of tasks it executes in order, reporting each as it ends.

The rule that keeps memory depth-first: **a batch is what a sequential run
would do next**.  The scheduler's ready tasks form a stack (``RunState.ready``):
a task's newly ready dependents go on top, lowest static priority last, so
the branch just advanced is continued first (dask's rule).  A batch
simulates that rule for a few tasks: it takes the top of the stack, and
every task whose inputs are then all done or in the batch goes on a
batch-local stack that is used first.  Running a batch is then exactly
running that piece of the sequential run; results only later tasks of the
same batch use are dropped by the worker after their last use and never
travel back (except tiny ones: see "Tiny results").  Popping ready tasks
from anywhere instead held many times more results than dask.

Size: about ``BATCH_BUDGET`` seconds of work, by the measured mean
duration of each task's function, and a bounded number of held results;
a task not yet timed, or slow, goes alone, so long tasks spread over all
workers (the limits: :class:`Planner`).

Held results, tiny results, large results and what carries over between
computations are the :class:`Planner`'s matter (its docstring): in short,
a result a sequential run would hold as long anyway is not counted
(*parked*), a run of numbers batches freely, a result that crossed
processes through shared memory keeps its users in one worker, and what
a group's function cost is remembered, trusted only to cut a batch.

The figures behind these choices, with their commands, are in
``benchmarks/README.md`` ("Figures behind design choices").

Records.  A worker reports each task as a plain tuple laid out as
``localsched.worker.records_wire.Record``; lists of them travel together.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ..metrics import NUMBERS, is_tiny
from ..plan.graph import A_TASK, CALL, NESTED, NODE
from ..system.forking import at_fork_in_child
from ..utils import funcname, key_split
from .batch_held import Held
from .batch_weighed import Weigher
from .machine import READY, RUNNING, WAITING

__all__ = ["Planner", "BatchItem", "BATCH_BUDGET", "forget"]


# Seconds of (measured) work a batch is sized to: enough to make the
# hand-off to a worker cheap next to the work, small enough to balance.
BATCH_BUDGET = 2e-3
# A batch that continues a chain -- its next task the only one ready inside
# the batch, and nothing ready that another worker could start --
# takes no work from anyone: it may grow to this many times the budget (and
# ``CHAIN_LIMIT`` tasks), since every hand-off on a chain is a round trip
# through the scheduler while no other work runs (on 2 cores, 0.3-1 ms
# each: a third of a ~10 us chain's time with 2 ms batches).
CHAIN_FACTOR = 8
CHAIN_LIMIT = 4096
# A batch stops growing when this many of its results are wanted at once
# (by later tasks of the batch or by others): a worker's batch runs beside
# the others' like a second sequential run, so each result it keeps alive
# adds to the computation's peak.
MAX_LIVE = 8
# On processes, a batch also stops growing before it would need more than
# this many inputs from outside it.  Those inputs travel with the batch and
# are all unpickled when it starts, so the worker holds a copy of each, next
# to the scheduler's, until the batch's last use of it: the batch that
# closes a reduction tree takes the tree's whole frontier (one result per
# level; on "two reductions, shared leaves" both workers did at once, ~12
# copies each, 48 live results where dask holds 35-39).  Task by task, a
# worker would hold only the inputs of the task it runs.
MAX_INPUTS = 4
# The budget of a batch that starts with a task whose results are large
# (they crossed processes through shared memory: ``Planner.large``).  Such
# a result costs its writer and each reader about as much again as making
# it (bench_shm: 8 MB written ~1 ms, mapped and faulted in ~0.7 ms per
# reader, against ~4 ms to compute), so continuing the sequential run in
# the same worker, where the next tasks find it in memory, pays for itself
# long before this.
LARGE_BUDGET = 32e-3
# Task groups whose statistics outlive their computation (see "Across
# computations" above): (key name, function name) -> (mean seconds, large).
MEMORY_SIZE = 1024
_learned: dict = {}
_learned_lock = threading.Lock()


@at_fork_in_child
def _renew_learned_lock() -> None:
    global _learned_lock
    _learned_lock = threading.Lock()


def forget() -> None:
    """Drop what planners learned in earlier computations (tests start clean)."""
    with _learned_lock:
        _learned.clear()


class BatchItem(NamedTuple):
    """One task of a batch, as the worker receives it (a plain tuple).

    ``store``: keep the result for later tasks of the batch; ``drop``: keys
    this task was the last in-batch user of; ``send``: the record carries
    the result (else None: nobody outside the batch needs it).
    """

    index: int  # type: ignore[assignment]  # (the field shadows tuple.index)
    key: Any
    spec: tuple
    store: bool
    drop: list
    send: bool


def group_name(key, spec: tuple) -> tuple:
    """What a task group is remembered by across computations: its key's
    name without trailing digits (``'inc-12'`` and ``('x3', 0)`` give
    ``'inc'`` and ``'x'``), and its function's name.

    >>> group_name(('sum-aggregate-4c2a9b1e00ff', 3), (CALL, sum))
    ('sum-aggregate', 'sum')
    """
    return key_split(key).rstrip("0123456789-_"), spec_name(spec)


def spec_function(spec: tuple):
    """A task's function (None: an alias or another structure)."""
    kind = spec[0]
    if kind == CALL:
        return spec[1]
    if kind == NESTED and spec[1][0] == A_TASK:
        return spec[1][1]
    if kind == NODE:
        return getattr(spec[1], "func", None) or type(spec[1])
    return None


def spec_name(spec: tuple) -> str:
    """A readable name of a task's function (what ``spec_group`` tells apart)."""
    func = spec_function(spec)
    return str(spec[0]) if func is None else funcname(func)


def spec_group(spec: tuple):
    """What a task's duration is estimated by: its function (as an id)."""
    if spec[0] == CALL:  # (the common case, once per task of a run)
        return id(spec[1])
    func = spec_function(spec)
    return spec[0] if func is None else id(func)


class Planner:
    """Plans batches over a run's state (see the module docstring).

    ``run`` provides ``order``, ``priority``, ``status``, ``deps``,
    ``dependents``, ``waiting``, ``specs``, ``keys``, ``is_output`` and the
    ready stack ``ready`` (indices, next on top); entries whose task has left
    READY (joined an earlier batch) are skipped when reached.

    Size: about ``BATCH_BUDGET`` seconds of work, judged by the measured mean
    duration of each task's function.  A task whose function has not been
    timed yet, or is slow, goes alone, so long tasks spread over all workers.
    A batch also stops once it holds more than ``MAX_LIVE`` results (see
    below), and, on processes, before a task after its first would bring the
    results it is sent from outside to more than ``MAX_INPUTS`` (each one a
    second copy, in the worker).  It takes from the shared stack only while
    that leaves a ready task to each other idle worker (``spare``).  A batch
    that continues a chain takes nothing another worker could start, so it may
    grow to ``CHAIN_FACTOR`` budgets and ``CHAIN_LIMIT`` tasks: each hand-off
    on a chain is a round trip while no other work runs.

    What a batch holds.  A worker's batch runs beside the others' like a second
    sequential run, so each of its results still wanted outside it adds to the
    computation's peak -- unless a sequential run would hold it as long anyway.
    Such a result is *parked* and not counted: one whose every user still
    waits for more than ``MAX_LIVE`` other inputs (no batch could bring that
    user within reach), and an output nothing uses that uses no result of the
    batch (``dask.compute(*[f(x) for x in items])``).  So independent tasks
    share a batch as readily as a chain does, while on a tree, a stencil or a
    reduction a batch stops at ``MAX_LIVE`` held results and is cut where it
    holds the fewest (``_cut``): it ends at the end of a region.  Results are
    counted as made, not net of the inputs they free (on threads those are
    freed only when the batch's records come back).

    Tiny results.  A number or a short string (``is_tiny``) is not worth
    giving up throughput for: a result of a group whose every result so far
    has been tiny is parked too, and a tiny input is not counted against
    ``MAX_INPUTS`` (so a stencil of numbers batches at all).  A group is judged
    by each result that travels back; other types keep the depth-first rule.
    A batch whose every result is tiny (``tiny_batch``) is also cheaper to
    hand to a thread nobody watches (``items(direct=True)``, see
    ``PoolSettings.direct``): its worker writes each result into the shared
    cache and sends every result back, so ``items`` need not work out where
    each is last used.

    Large results.  On processes, a result with large buffers crosses to the
    next worker through shared memory, which costs about as much as making it.
    Once a function's result has arrived that way (``Planner.large_result``),
    a batch that starts with it gets ``LARGE_BUDGET`` instead, and is cut where
    it leaves the fewest *large* results behind: on ``x + x.T`` the batch
    ``x[i,j], x[j,i]`` and both tasks that use them runs in one worker.  A
    result without large buffers that is costly to pickle (a pandas frame, a
    bag's list of dicts: ``localsched.run.batch_weighed``) crosses through
    the pipe at a similar cost, twice; its group is placed the same way once
    weighed (``Planner.moved_result``), so a chain of them runs in one worker.

    Across computations.  What a planner learns of each task group (its
    function's mean duration, whether its results are large) is kept when the
    computation ends (``remember``), by key name and function name, for the
    last ``MEMORY_SIZE`` groups, on processes with shared memory (``learn``).
    A later computation starting with a group known to make large results
    starts with the placement above (``_recall``) instead of sending each
    function's first tasks alone until one is timed; a recalled group whose
    first result comes back small loses it (``small_result``).  A remembered
    time may cut a batch, never grow one past a single untimed task of its
    group (``_fresh_fits``): the same names may take far longer this time (a
    pipeline tried on a sample, then run on the real data), and tasks that
    wait for each other (a ``threading.Barrier``) must not share a batch.
    """

    def __init__(self, run, *, limit: int | None = None, budget: float = BATCH_BUDGET,
                 max_live: int = MAX_LIVE, large_budget: float | None = None,
                 learn: bool = False, max_inputs: int | None = None):
        self.run = run
        # Recall and keep what computations learn (see "Across computations"):
        # only where results can be large, i.e. cross processes through shared
        # memory (a threads run would otherwise overwrite what processes saw).
        self.learn = learn
        self.limit = limit or 256
        self.budget = budget
        # (a limit asked for, ``chunksize``, holds on chains too)
        self.chain_limit = limit or CHAIN_LIMIT
        self.large_budget = LARGE_BUDGET if large_budget is None else large_budget
        # Groups (functions) whose results were large enough to cross
        # processes out of band (see ``large_result``), or costly to move
        # through the pipe (``moved_result``).
        self.large: set = set()
        self.weigher = Weigher()
        self.max_live = max_live
        # (processes: ``MAX_INPUTS``; None where batches read a shared cache)
        self.max_inputs = max_inputs
        # (``group_of`` and ``mark``, a list over the tasks each, are made
        # on first use: see ``__getattr__``; a threads run the workers
        # schedule themselves may never plan a batch.)
        # A memory budget's say on each task a batch would take (``fits(j)``,
        # see ``localsched.run.budget``); None: no budget counts.
        self.fits: Callable[[int], bool] | None = None
        # group -> [total seconds, count, a task of it, tiny results so far]
        self.stats: dict = {}
        # Across computations (``_recall``): each group's entry of
        # ``_learned`` as looked up (None: none); groups recalled and not
        # yet timed in this run; groups recalled as large and not yet seen
        # to be so in this run.
        self.looked: dict = {}
        self.fresh: set = set()
        self.unconfirmed: set = set()
        self.serial = 0
        # Whether the last batch counted nothing: its results all tiny so far.
        self.tiny_batch = False

    #: Each task's group (its function), by index.
    group_of: list
    #: Each task's batch: the serial of the batch it joined (0: none yet).
    mark: list

    def __getattr__(self, name: str):
        """``group_of`` and ``mark``, made on first use (then plain attributes)."""
        if name == "group_of":
            self.group_of = [id(s[1]) if s[0] == CALL else spec_group(s)
                             for s in self.run.specs]
            return self.group_of
        if name == "mark":
            self.mark = [0] * len(self.run.keys)
            return self.mark
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def observe(self, i: int, seconds: float, value=None) -> None:
        """Learn from a finished task's measured duration, and from its
        result ``value`` whether its group's results are tiny (None: the
        result did not travel back; it tells nothing)."""
        g = self.group_of[i]
        st = self.stats.get(g)
        if st is None or (self.fresh and g in self.fresh):
            # (A mean recalled from an earlier computation goes: this run's
            # first timing of the group replaces it.)
            self.stats[g] = [seconds, 1, i, is_tiny(value)]
            if self.fresh:
                self.fresh.discard(g)
        else:
            st[0] += seconds
            st[1] += 1
            if st[3] and value is not None and type(value) not in NUMBERS \
                    and not is_tiny(value):
                st[3] = False  # (for good: one large result is enough)

    def large_result(self, i: int) -> None:
        """Learn that i's result was large (it travelled through shared
        memory): batches starting with its function get ``large_budget``."""
        g = self.group_of[i]
        self.large.add(g)
        if self.unconfirmed:
            self.unconfirmed.discard(g)

    def moved_result(self, i: int, value) -> None:
        """Learn from i's result, back through the pipe (processes), whether
        its group's results are costly to move (``batch_weighed``): if so,
        batches starting with its function are placed as large results'
        are; if not, a group recalled as large loses its budget."""
        costly = self.weigher.weigh(self.group_of[i], value)
        if costly:
            self.large_result(i)
        elif costly is False:
            self.small_result(i)

    def small_result(self, i: int) -> None:
        """Learn that i's result came back small (through the pipe): a group
        recalled as large that is not so in this run loses its budget."""
        g = self.group_of[i]
        if g in self.unconfirmed:
            self.unconfirmed.discard(g)
            self.large.discard(g)

    def estimate(self, i: int) -> float | None:
        """Mean measured duration of i's function so far, or None."""
        st = self.stats.get(self.group_of[i])
        if st is None and self.learn:
            st = self._recall(i, large_only=True)
        return None if st is None else st[0] / st[1]

    def _recall(self, i: int, large_only: bool = False) -> list | None:
        """Take i's group's statistics from an earlier computation, if any;
        ``large_only``: only if its results were large.  (``_learned`` is
        read once per group.)"""
        g = self.group_of[i]
        got = self.looked.get(g, self)  # (self: not looked up yet)
        if got is self:
            if not _learned:
                return None
            run = self.run
            got = self.looked[g] = _learned.get(group_name(run.keys[i], run.specs[i]))
        if got is None or (large_only and not got[1]):
            return None
        mean, large = got
        st = self.stats[g] = [mean, 1, i, False]
        self.fresh.add(g)
        if large:
            self.large.add(g)
            self.unconfirmed.add(g)
        return st

    def remember(self) -> None:
        """Keep this computation's statistics for later ones (at its end)."""
        if not self.stats or not self.learn:
            return
        keys, specs, large = self.run.keys, self.run.specs, self.large
        items = list(self.stats.items())[-MEMORY_SIZE:]
        learned = [(group_name(keys[i], specs[i]), (total / count, g in large))
                   for g, (total, count, i, _) in items]
        with _learned_lock:
            for name, value in learned:
                _learned.pop(name, None)  # (to the end: the most recently used)
                _learned[name] = value
            excess = len(_learned) - MEMORY_SIZE
            if excess > 0:  # the oldest, in one pass
                for name in list(itertools.islice(_learned, excess)):
                    del _learned[name]

    def has_ready(self) -> bool:
        """Whether a READY task is waiting (drops stale stack entries)."""
        ready, status = self.run.ready, self.run.status
        while ready and status[ready[-1]] != READY:
            ready.pop()
        return bool(ready)

    def next_batch(self, spare: int = 0) -> list:
        """Take the next batch (task indices in a valid run order), marking
        them RUNNING.  Call only when ``has_ready()``.  ``spare``: how many
        other workers are idle now; the batch leaves them that many ready
        tasks of the stack.

        The batch is what a sequential run would do next under the ready
        rule (see ``localsched.run.machine``): the top of the ready stack
        (``_take_top``), then, task by task, what that run would take next
        (``_following``) while it fits the budget of measured work (or
        continues a chain: ``_continues_chain``) and the rules for recalled
        groups (``_fresh_fits``) and a process batch's inputs
        (``_inputs_fit``); ``Held`` counts what each prefix holds
        (see "What a batch holds"), and ``_cut`` ends the batch where it
        holds the fewest.
        """
        i = self._take_top()
        spent = self.estimate(i)  # (may recall i's group as large: before ``large``)
        # A batch of large results (see ``large``) gets a larger budget, and
        # is cut where it leaves the fewest large results behind, then the
        # fewest results: each one left behind will cross processes.
        large = self.large if self.large and self.group_of[i] in self.large else None
        budget = self.budget if large is None else self.large_budget
        self.tiny_batch = False
        if spent is None or spent >= budget:
            return [i]
        run = self.run
        status, mark, stack, serial = run.status, self.mark, run.ready, self.serial
        stats, group_of, max_live, limit = self.stats, self.group_of, self.max_live, self.limit
        fresh, max_inputs = self.fresh, self.max_inputs  # (``fresh`` grows as groups are recalled)
        fits = self.fits
        # A batch whose results are all tiny holds nothing: it is counted
        # (``Held``) from its first result that may be large, if any.
        tiny = self._tiny(i)
        held = None
        if not tiny or large is not None or fresh or max_inputs is not None:
            held = Held(self, i, large, tiny=tiny)
        batch = [i]
        local: list = []  # ready inside the batch, next on top
        following = self._following(i, local, spare)
        stack_empty = False  # known to hold no READY task
        while held is None or held.count <= max_live:
            if len(batch) >= limit and (large is not None or len(batch) >= self.chain_limit):
                break  # (before ``_recall``: a group the batch will not take stays unrecalled)
            j = next(following)
            if j < 0:
                break
            g = group_of[j]
            st = stats.get(g)
            if st is None:
                # (A recalled mean only within a batch of large results: see
                # "Across computations".)
                st = self._recall(j) if large is not None and self.learn else None
                if st is None:
                    break  # not timed yet: it goes alone, later
            e = st[0] / st[1]
            if spent + e > budget or len(batch) >= limit:
                if large is not None or not self._continues_chain(
                        local, len(batch), spent + e, budget, stack_empty):
                    break
                stack_empty = True  # (nothing is pushed while a batch is planned)
            if fits is not None and not fits(j):
                break
            if held is None and not st[3]:  # (a result that may be large: count)
                held = Held(self, i, large, tiny=True, tiny_after=len(batch) - 1)
            if held is not None:
                if fresh and not self._fresh_fits(j, held):
                    break
                if max_inputs is not None and not self._inputs_fit(j, held):
                    break
            if local:
                local.pop()
            else:
                stack.pop()
            status[j] = RUNNING
            mark[j] = serial
            batch.append(j)
            spent += e
            if held is not None:
                held.add(j, st[3], g)
        self.tiny_batch = held is None
        return batch if held is None else self._cut(batch, held.holds)

    def _continues_chain(self, local: list, taken: int, spent: float, budget: float,
                         stack_empty: bool = False) -> bool:
        """Whether a batch over its budget or limit may still take the next
        task: it continues a chain (see ``CHAIN_FACTOR``), within the larger
        budget and limit.  ``stack_empty``: the shared stack is known to hold
        no READY task (not looked at again)."""
        return (len(local) == 1 and spent <= CHAIN_FACTOR * budget
                and taken < self.chain_limit and (stack_empty or not self.has_ready()))

    def _take_top(self) -> int:
        """Start a batch with the top of the ready stack (marked RUNNING)."""
        i = self.run.ready.pop()
        self.serial += 1
        self.run.status[i] = RUNNING
        self.mark[i] = self.serial
        return i

    def _following(self, i: int, local: list, spare: int) -> Iterator[int]:
        """The tasks a sequential run takes after i, one at a time, each
        after the batch took the one before (it pops it from ``local`` or
        the shared stack; ``-1``: none left that a batch may take).

        The last task's dependents whose last unfinished input it was
        become ready inside the batch and go on ``local`` (lowest priority
        first), which is used first: a batch grows along a chain or up a
        region before anything else.  Else the shared stack's top, while
        that leaves ``spare`` ready tasks to the other idle workers (a
        batch takes nothing another worker could start now).
        """
        run = self.run
        status, waiting, dependents, stack = run.status, run.waiting, run.dependents, run.ready
        by_priority, spare_left = run.priority.__getitem__, self._spare_left
        inside: dict = {}  # task -> how many of its unfinished inputs are in the batch
        while True:
            users = dependents[i]
            if users:
                first, more = -1, None  # (no list for the common one)
                for c in users:
                    if status[c] != WAITING:
                        continue
                    w = waiting[c]
                    if w != 1:  # (waits for more than this input)
                        n = inside.get(c, 0) + 1
                        inside[c] = n
                        if n != w:
                            continue
                    if first < 0:
                        first = c
                    elif more is None:
                        more = [first, c]
                    else:
                        more.append(c)
                if more is not None:
                    more.sort(key=by_priority, reverse=True)
                    local.extend(more)
                elif first >= 0:
                    local.append(first)
            if local:
                i = local[-1]
            else:
                while stack and status[stack[-1]] != READY:
                    stack.pop()  # (entries of tasks an earlier batch took)
                if not stack or (spare and not spare_left(stack, status, spare)):
                    yield -1
                    return
                i = stack[-1]
            yield i

    def _fresh_fits(self, j: int, held: Held) -> bool:
        """Groups timed only in earlier computations: one task of each per
        batch until this run has timed one (see "Across computations": a
        remembered time may cut a batch, never grow it)."""
        g = self.group_of[j]
        if g in self.fresh:
            if g in held.groups:
                return False
            held.groups.add(g)
        return True

    def _inputs_fit(self, j: int, held: Held) -> bool:
        """Whether j keeps the results the batch takes from outside it
        within ``max_inputs`` (tiny ones do not count); if so, add j's."""
        outside, mark, serial = held.outside, self.mark, self.serial
        stats, group_of = self.stats, self.group_of
        extra = None
        for d in self.run.deps[j]:  # (``_tiny`` inline: once per input of each task)
            if mark[d] != serial and d not in outside:
                st = stats.get(group_of[d])
                if st is None or not st[3]:
                    if extra is None:
                        extra = [d]
                    else:
                        extra.append(d)
        if extra is not None:
            if len(outside) + len(extra) > self.max_inputs:  # type: ignore[operator]
                return False
            outside.update(extra)
        return True

    def _tiny(self, j: int) -> bool:
        """Whether j's group has made only tiny results so far."""
        st = self.stats.get(self.group_of[j])
        return st is not None and st[3]

    @staticmethod
    def _spare_left(stack: list, status, spare: int) -> bool:
        """Whether the stack, READY on top, holds more than ``spare`` READY
        tasks (one for this batch, ``spare`` for the other idle workers)."""
        found = 0
        for p in range(len(stack) - 1, -1, -1):
            if status[stack[p]] == READY:
                found += 1
                if found > spare:
                    return True
        return False

    def _cut(self, batch: list, holds: list) -> list:
        """End the batch where it holds the fewest results.

        Any prefix of a batch is a valid batch.  A batch that stops in the
        middle of a region (half a sub-tree) leaves several partial results
        that wait for later work; cut it after the last task at which it
        holds the fewest results (``holds``: after each prefix), and give
        the rest back.  Parked results do not count (see "What a batch
        holds"), so a batch of independent tasks is never cut.
        """
        assert len(holds) == len(batch), "a count per prefix"
        if len(batch) < 3:
            return batch
        best = min(holds)
        n = len(holds) - holds[::-1].index(best)  # the longest prefix with it
        if n == len(batch):
            return batch
        run = self.run
        status, mark, waiting, stack = run.status, self.mark, run.waiting, run.ready
        for j in reversed(batch[n:]):  # restores the stack as it was
            mark[j] = 0
            if waiting[j]:
                status[j] = WAITING
            else:
                status[j] = READY
                stack.append(j)
        del batch[n:]
        return batch

    def items(self, batch: list, *, keep_all: bool, pack_data: bool, direct: bool = False):
        """The worker's view of ``batch``: BatchItem tuples, and the inputs
        to ship (``pack_data``: values of dependencies from outside the
        batch; else None).  ``direct``: a batch of tiny results
        (``tiny_batch``) whose thread worker writes the shared cache itself."""
        run = self.run
        keys, specs, deps, dependents, is_output = (
            run.keys, run.specs, run.deps, run.dependents, run.is_output)
        mark, serial = self.mark, self.serial
        if len(batch) == 1 and not pack_data:
            i = batch[0]
            return [(i, keys[i], specs[i], False, (), True)], None
        if direct:
            # Tiny results (see "Tiny results") written into the shared
            # cache, where the scheduler frees each once its users reported:
            # the worker stores each that some task uses, drops nothing and
            # sends each back (a reference, no copy).  Working out where each
            # is last used would cost more than they hold.
            assert self.tiny_batch and not pack_data
            return [(i, keys[i], specs[i], bool(dependents[i]), (), True) for i in batch], None
        # What each task must keep for later tasks of the batch, and what it
        # was the last in-batch user of: the worker drops those, so a batch
        # holds no more results than a task-by-task run would.  (Backwards:
        # a task's last user is the first one met.)
        items: list = [None] * len(batch)
        used = set()  # results a task met so far (a later one) uses
        # (pack_data: the inputs from outside the batch, each met once here)
        data: dict | None = {} if pack_data else None
        cache = run.cache
        for p in range(len(batch) - 1, -1, -1):
            i = batch[p]
            drop: Any = ()  # (the scheduler keeps its own copy)
            for d in deps[i]:
                if (pack_data or mark[d] == serial) and d not in used:
                    used.add(d)
                    k = keys[d]
                    if drop:
                        drop.append(k)
                    else:
                        drop = [k]
                    if data is not None and mark[d] != serial:
                        data[k] = cache[k]
            # A result only later tasks of this batch use never travels back
            # (unless a callback or a local re-run may want it).
            send = keep_all or is_output[i]
            if not send:
                users = dependents[i]
                send = not users
                for c in users:
                    if mark[c] != serial:
                        send = True
                        break
            items[p] = (i, keys[i], specs[i], i in used, drop, send)
        return items, data
