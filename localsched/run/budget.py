"""Keeping a computation inside a memory budget: what is held, what to spill, when to wait.

Off by default (``localsched.run.budget_limits`` says how a budget is set and
read).  With no budget the loops never see this module: ``for_run`` returns
None and each loop branches on that once per computation, not per task.

With a budget, the loops call a ``Budget`` at three points:

- before a task starts (``prepare``, the inline loop; ``admit``, the pool
  loop, which also chooses the task): its spilled inputs are read back, the
  other held results are spilled until what is held, what running tasks
  will add and this task's expected output fit under ``target``; a task
  whose inputs and expected output exceed the limit alone fails at once
  (``MemoryBudgetError``: the task, the sizes, the budget).  Above
  ``pause``, when spilling cannot bring it down, the pool loop prefers a
  ready task that is the last user of a held result (it frees memory), and
  else starts nothing while tasks run: they will free or let spill.  With
  nothing running it always starts one: never a hang;
- after a task ends (``completed``): its result's size is counted (the
  size the scheduler measures, ``localsched.metrics.nbytes``; a handle to
  shared memory by its segment's size), the inputs it released are
  forgotten (their spill files dropped), and spilling runs if the budget
  is crossed;
- at the end (``finish``: spilled outputs read back for the caller) and on
  every exit (``close``: the spill directory goes, after a failure and
  Ctrl-C too; a cache the caller passed gets its spilled values back).

What to spill: the held result whose next use in the planned order is
furthest away (an output nothing else uses first, then by the smallest
static priority of a dependent still to run: ``machine.RunState.priority``;
results a running task reads are never spilled).  A spilled result leaves a
``Spilled`` placeholder in the cache, so the cache's own bookkeeping
(release when the last user ends) is unchanged.  A result read back while
later tasks still need it keeps its file: spilled again, nothing is written.

Watching, then counting.  A budget the run never comes near must cost
next to nothing per task (the bar: ``benchmarks/README.md``): so a run
starts *watching* (the real memory read now and then, no hook per task;
on threads nobody watches, the crew's workers take these readings
themselves: ``threadloop``) and *arms* only near the budget
(``Budget.watch``).  The real memory, not only the results' sizes, is
what is kept under the budget: sizes miss what tasks allocate while they
run and what the allocator keeps (``localsched.run.budget_memory``).
"""

from __future__ import annotations

import os
import time
from operator import itemgetter, sub
from typing import Any

from ..metrics import sizeof
from ..plan.graph import DATA
from ..utils import key_split
from . import budget_limits, budget_memory
from .budget_limits import Thresholds
from .budget_record import DISK_READ, DISK_WRITE, BudgetRecord
from .machine import DONE, RUNNING, RunState

__all__ = ["Budget", "MemoryBudgetError", "Spilled", "for_run", "POLL"]

# Seconds between two readings of the real memory (RSS) while a budget counts,
# and at the soonest while it watches (``watch``).
POLL = 0.05
# Watching, the budget also reads it after a task of this many seconds or
# more (a task that makes a large result takes a while: its pages fault in).
LONG = 1e-3
# Counting starts when the real memory reaches this share of ``target``.
ARM = 0.5
# Calls between two readings of a watching budget: the first after this
# many, then twice as many each time, up to ``WATCH_EVERY`` (see ``watch``).
# From one: a run's first results may be large and quick to make (memory
# the allocator reuses faults in no page), and are sized before they pile up.
WATCH_FIRST = 1
WATCH_EVERY = 4096
# How fast memory may grow, bytes a second: a watching budget reads again
# when memory growing this fast could reach ``arm_at`` (``watch``), after
# ``POLL`` s at the soonest and ``WAIT_MAX`` s at the latest.
GROWTH = 2 * 10**9 * (os.cpu_count() or 1)
WAIT_MAX = 1.0
# Results sized at most per reading while watching (``Budget._cache_estimate``).
SAMPLE = 256
# Results smaller than this are never spilled: a file per value would cost
# more than the bytes it frees.
MIN_SPILL = 16 * 1024
# Scanned from the top of the ready stack for a task that frees memory,
# when the budget pauses.
SCAN = 64
# Below ``target`` by this share of the limit once spilling starts, so that
# results are written in bursts, not one per task.
HYSTERESIS = 0.1
_NEVER = float("inf")


class MemoryBudgetError(MemoryError):
    """A task cannot run within the memory budget: its own inputs and output
    exceed the limit even with every other result spilled."""


class Spilled:
    """What the cache holds for a result written to disk (its size)."""

    __slots__ = ("nbytes",)

    def __init__(self, size: int):
        self.nbytes = size

    def __repr__(self) -> str:
        return f"<spilled to disk: {self.nbytes} bytes>"


def for_run(memory_limit: Any, machine: RunState, comp, transport: Any = None,
            processes: bool = False) -> Budget | None:
    """The run's ``Budget``, or None when no budget is set (the common case)."""
    limit = budget_limits.configured_limit(memory_limit)
    if limit is None:
        return None
    return Budget(budget_limits.thresholds(limit), machine, comp.view.outcome,
                  transport=transport, processes=processes)


def _fmt(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # (unreachable)


class Budget:
    """One computation's memory budget (see the module docstring)."""

    poll = POLL  # (the wait until the next reading while watching: ``watch`` sets it)
    long = LONG

    def __init__(self, t: Thresholds, machine: RunState, outcome, *, transport: Any = None,
                 processes: bool = False):
        self.t = t
        self.machine = machine
        self.held: dict = {}  # task -> bytes, results in memory
        self.spilled: dict = {}  # task -> bytes, results on disk
        self.kept: dict = {}  # task -> bytes, results held whose file stayed (``_read_back``)
        self.size: dict = {}  # task -> bytes of its result (kept after release)
        self.held_bytes = 0
        self.reserved: dict = {}  # running task -> bytes its output is expected to take
        self.reserved_bytes = 0
        self.groups: dict = {}  # key name -> [total bytes, count] of results
        self.store: Any = None  # the SpillStore, made at the first spill
        self.load = getattr(transport, "load", None)
        self.release = getattr(transport, "release", None)
        self.shared_type = getattr(transport, "SharedValue", None)
        self.processes = processes
        # What the run shows (``state.outcome.memory``): its events and timeline.
        self.record = outcome.memory = BudgetRecord(t.limit, t.target, t.pause)
        self.events = self.record.events  # (start, end, "disk-write"|"disk-read", key, bytes)
        self.timeline = self.record.timeline  # (time, held bytes, spilled bytes)
        self.paused_since: float | None = None
        self.peak_measured = 0
        self.warned = False
        self._last_poll = 0.0
        self._measured = 0
        self.pinned: Any = ()  # the inputs of the task being prepared
        self.room = 0  # bytes the batch being planned may still add (``fits``)
        self.baseline = 0
        self.baseline = self._real_memory()
        # Watching (see "Watching, then counting"): armed once the real memory
        # reaches ``arm_at``; until then, a reading every ``POLL`` s or after
        # a task of ``LONG`` s or more.
        self.armed = False
        self.arm_at = int(t.target * ARM)
        self.due = 0.0
        # (and after a count of calls that doubles up to WATCH_EVERY: fast
        # tasks, filling memory the allocator reuses, may end within a poll)
        self.every = self.countdown = WATCH_FIRST

    # -- the hooks ------------------------------------------------------------------

    def prepare(self, i: int) -> None:
        """Task i is about to start: its inputs in memory, room for its
        output (spilling others), or ``MemoryBudgetError``."""
        if not self.armed:
            return
        m = self.machine
        size = self.size
        inputs = 0
        for d in m.deps[i]:
            inputs += size.get(d, 0)
        expected = self._expected(i)
        if inputs + expected > self.t.limit:
            self._refuse(i, inputs, expected)
        self.pinned = m.deps[i]
        try:
            for d in m.deps[i]:
                if d in self.spilled:
                    self._read_back(d)
            # (on processes a task's inputs travel: a second copy while it runs)
            reserve = expected + inputs if self.processes else expected
            self.reserved[i] = reserve
            self.reserved_bytes += reserve
            self._fit(self.t.target)
        finally:
            self.pinned = ()

    def admit(self, loop) -> bool:
        """The pool loop may start the top of the ready stack (after
        ``prepare``); False: wait for a running task to end (pause).  May
        put another ready task on top: one that frees memory."""
        if not self.armed and not self.watch(False):
            return True
        planner = loop.planner
        planner.fits = self.fits  # (counting: a batch takes what fits, see ``fits``)
        m = self.machine
        ready = m.ready
        if self.pressure() > self.t.pause:
            self._fit(self.t.target)
            if self.pressure() > self.t.pause:
                j = self._consumer(ready)
                if j is not None:
                    ready.remove(j)
                    ready.append(j)
                elif loop.inflight:
                    if self.paused_since is None:
                        self.paused_since = time.time()
                    return False
        if self.paused_since is not None:
            self.record.paused_seconds += time.time() - self.paused_since
            self.paused_since = None
        self.prepare(ready[-1])
        self.room = self.t.pause - self.pressure()
        return True

    def fits(self, j: int) -> bool:
        """Whether task j may join the batch being planned (after the top,
        ``admit``): none of its inputs is on disk (a batch never reads
        back), its group's results have been sized, and its expected output
        (on processes with its inputs: they travel) fits in the room left
        below ``pause``.  The batch's tasks are then ``reserve``d."""
        m = self.machine
        g = self.groups.get(key_split(m.keys[j]))
        if g is None:
            return False
        need = g[0] // g[1]
        spilled, size = self.spilled, self.size
        for d in m.deps[j]:
            if d in spilled:
                return False
            if self.processes:
                need += size.get(d, 0)
        if need > self.room:
            return False
        self.room -= need
        return True

    def reserve(self, batch: list) -> None:
        """The batch planned after ``admit``: room for the outputs of the
        tasks after its first (``prepare`` made room for that one)."""
        if not self.armed:
            return
        m, size, reserved = self.machine, self.size, self.reserved
        for j in batch[1:]:
            need = self._expected(j)
            if self.processes:
                for d in m.deps[j]:
                    need += size.get(d, 0)
            reserved[j] = need
            self.reserved_bytes += need

    def watch(self, long: bool) -> bool:
        """Watching: read the real memory if due (or after a ``long``
        task) and arm once it reaches ``arm_at``; whether armed.

        Watching, then counting.  A budget the run never comes near must cost
        next to nothing per task (the bar: ``benchmarks/README.md``): so a run starts
        *watching*, its loops unchanged but for a reading of the real memory
        (below) now and then or after a task of ``LONG`` seconds or more, and
        none of the hooks above run.  The next reading is due when memory
        growing at ``GROWTH`` bytes a second could have reached ``arm_at``
        (``POLL`` s at the soonest, ``WAIT_MAX`` s at the latest: the loops
        read the wait as ``poll``); in between, after a count of calls,
        only the results in the cache are sized.  Once the real memory
        reaches ``ARM`` x ``target``, or the results in the cache do by their
        sizes (an allocator that reuses freed memory shows no growth), or a
        long task's result alone does, the budget *arms*: every
        result in the cache is measured and held from then on, the hooks run, and
        a pool's batch takes a task only while its expected bytes fit below
        ``pause`` and none of its inputs is on disk (``fits``: the order and each
        group's sizes are known; a batch never reads a spilled input).
        """
        now = time.monotonic()
        self.countdown -= 1
        due = long or now >= self.due
        if not due and self.countdown > 0:
            return False
        self.every = self.countdown = min(2 * self.every, WATCH_EVERY)
        seen = self._cache_estimate()
        if due:  # (after a count of calls, only the sizes: the real memory costs more)
            self._last_poll = 0.0  # (read now)
            seen = max(seen, self._measure())
        if seen >= self.arm_at:
            self.arm()
            return True
        if due:  # (far below ``arm_at``, rarely: memory growing at ``GROWTH`` could not reach it)
            self.poll = max(POLL, min((self.arm_at - seen) / GROWTH, WAIT_MAX))
            self.due = now + self.poll
        return False

    def _cache_estimate(self) -> int:
        """The bytes the results in the cache take, by their sizes (every
        one up to ``SAMPLE``, else a sample scaled up): what the RSS misses
        when the allocator reuses memory that earlier work freed (a process
        that computed before shows no growth while its cache fills)."""
        values = list(self.machine.cache.values())
        step = max(1, len(values) // SAMPLE)
        sample = values[::step]
        size = self._size_of
        return int(sum(size(v) for v in sample) * (len(values) / max(1, len(sample))))

    def _big(self, value) -> bool:
        """Whether a long task's result alone takes ``arm_at`` or more: then
        the budget arms whatever the real memory says (an allocator that
        reuses freed memory shows no growth).  Sized only after a long task:
        tiny tasks pay nothing."""
        if self._size_of(value) < self.arm_at:
            return False
        self.arm()
        return True

    def arm(self) -> None:
        """Start counting: every result in the cache now is held."""
        self.armed = True
        m = self.machine
        index, status, specs = m.index, m.status, m.specs
        for key, value in list(m.cache.items()):
            i = index.get(key)
            if i is None or status[i] != DONE or specs[i][0] == DATA or i in self.held:
                continue
            self._count(i, value)

    def _count(self, i: int, value) -> int:
        n = self._size_of(value)
        self.size[i] = n
        self.held[i] = n
        self.held_bytes += n
        if value is None:  # (not here: it stayed in its batch's worker; sizes nothing)
            return n
        name = key_split(self.machine.keys[i])
        g = self.groups.get(name)
        if g is None:
            self.groups[name] = [n, 1]
        else:
            g[0] += n
            g[1] += 1
        return n

    def completed(self, i: int, long: bool = False) -> None:
        """Task i's result is in the cache: count it, forget what it
        released (watching: read the memory when due; ``long``: the task
        took ``LONG`` s or more)."""
        m = self.machine
        if not self.armed:
            if self.watch(long) or (long and self._big(m.cache.get(m.keys[i]))):
                self._check(i)  # (arming counted it)
            return
        self._count(i, m.cache.get(m.keys[i]))
        self.reserved_bytes -= self.reserved.pop(i, 0)
        refs, is_output = m.refs, m.is_output
        for d in m.deps[i]:
            if not refs[d] and not is_output[d]:
                self._forget(d)
        self._check(i)

    def _check(self, i: int) -> None:
        """After task i: its inputs and output fit the limit, and what is
        held fits under the target (spilling)."""
        size = self.size
        inputs = 0
        for d in self.machine.deps[i]:
            inputs += size.get(d, 0)
        n = size.get(i, 0)
        if inputs + n > self.t.limit:
            self._refuse(i, inputs, n, ran=True)
        self._fit(self.t.target)
        if self.pressure() > self.t.limit and not self.t.spill and not self.warned:
            self.warned = True
            import warnings

            warnings.warn(f"the computation holds {_fmt(self.pressure())}, over its memory "
                          f"budget of {_fmt(self.t.limit)}; set localsched.memory.spill "
                          f"to spill results to disk", ResourceWarning, stacklevel=2)

    def completed_records(self, records: list) -> None:
        """``completed`` for each finished task of a list of pool records."""
        status = self.machine.status
        if not self.armed:
            long = big = False
            # (records_wire.Record tuples: the longest first, in C; notes say 0)
            if records and max(map(sub, map(_END, records), map(_START, records))) >= LONG:
                cache, keys = self.machine.cache, self.machine.keys
                for i, ok, _, t0, t1, _, _ in records:
                    if i >= 0 and ok and t1 - t0 >= LONG:
                        long = True
                        if self._big(cache.get(keys[i])):
                            big = True
                            break
            if not (self.watch(long) or big):
                return
            for i, ok, *_ in records:  # (arming counted them)
                if i >= 0 and ok and status[i] == DONE:
                    self._check(i)
            return
        for i, ok, *_ in records:
            if i >= 0 and ok and status[i] == DONE:
                self.completed(i)

    def finish(self) -> None:
        """The run succeeded: spilled outputs back into the cache."""
        m = self.machine
        for i in [d for d in self.spilled if m.is_output[d]]:
            self._read_back(i, make_room=False)  # (the caller asked for them all)
        self._note()

    def close(self) -> None:
        """On every exit: the spill directory goes.  A cache the caller
        passed (dask's ``cache=``) gets back what was spilled from it (after
        a failure too: nothing computed is lost), never a placeholder for a
        file that is gone; the run's own cache just drops them."""
        if self.store is None:
            return
        m = self.machine
        try:
            for d in list(self.spilled):
                if m.owns_cache:
                    m.cache.pop(m.keys[d], None)
                    continue
                try:
                    self._read_back(d, make_room=False)
                except Exception:  # noqa: BLE001 -- the run's own error comes first
                    m.cache.pop(m.keys[d], None)  # (gone: computed again next time)
        finally:
            store, self.store = self.store, None
            if store is not None:
                store.close()

    # -- what is held -------------------------------------------------------------------

    def pressure(self) -> int:
        """Bytes at stake: what is held plus what running tasks will add,
        or the real memory above the baseline if more."""
        counted = self.held_bytes + self.reserved_bytes
        measured = self._measure()
        return counted if counted >= measured else measured

    def _size_of(self, value) -> int:
        if self.shared_type is not None and type(value) is self.shared_type:
            return int(value.size)
        if type(value) is Spilled:
            return value.nbytes
        n = sizeof(value)  # (a container with its items: the report's measure too)
        return n if n is not None else 0

    def _expected(self, i: int) -> int:
        """The expected size of task i's result: its group's mean so far."""
        g = self.groups.get(key_split(self.machine.keys[i]))
        return g[0] // g[1] if g is not None else 0

    def _forget(self, d: int) -> None:
        n = self.held.pop(d, None)
        if n is not None:
            self.held_bytes -= n
            if self.kept.pop(d, None) is not None and self.store is not None:
                self.store.drop(d)
        elif self.spilled.pop(d, None) is not None and self.store is not None:
            self.store.drop(d)

    def _measure(self) -> int:
        """The real memory above the baseline, read at most every ``POLL`` s."""
        now = time.monotonic()
        if now - self._last_poll < POLL:
            return self._measured
        self._last_poll = now
        used = self._real_memory() - self.baseline
        self._measured = used if used > 0 else 0
        if self._measured > self.peak_measured:
            self.peak_measured = self._measured
        self._note()
        return self._measured

    def _real_memory(self) -> int:
        """The real memory of the process tree (``localsched.run.budget_memory``):
        read now and then, not per task, and spilled against when above what
        the sizes count.  A worker hands back what its tasks freed after each
        job once the budget arms (``localsched.worker.budget_worker``)."""
        return budget_memory.real_memory(self.processes)

    # -- spilling -------------------------------------------------------------------

    def _fit(self, under: int) -> None:
        """Spill the results used furthest ahead until the pressure is under ``under``."""
        if not self.t.spill or not self.held:
            return
        excess = self.pressure() - under
        if excess <= 0:
            return
        excess += int(self.t.limit * HYSTERESIS)
        freed = 0
        for d in self._victims():
            if freed >= excess:
                break
            freed += self._spill(d)
        # (the real memory's last reading drops by as much, until the next one)
        self._measured = max(0, self._measured - freed)

    def _victims(self) -> list:
        """Held results that may be spilled, furthest next use first."""
        ranked = []
        pinned, next_use = self.pinned, self._next_use
        for d, n in self.held.items():
            if n < MIN_SPILL or d in pinned:
                continue
            nxt = next_use(d)
            if nxt is not None:
                ranked.append((nxt, d))
        ranked.sort(reverse=True)
        return [d for _, d in ranked]

    def _next_use(self, d: int) -> float | None:
        """The position in the planned order of result d's next use (never:
        an output nobody else needs); None when a running task reads it or
        nothing will (it is about to be released)."""
        m = self.machine
        status, priority = m.status, m.priority
        nxt = _NEVER
        for c in m.dependents[d]:
            s = status[c]
            if s == RUNNING:
                return None
            if s != DONE and priority[c] < nxt:
                nxt = priority[c]
        if nxt == _NEVER and not m.is_output[d]:
            return None
        return nxt

    def _spill(self, d: int) -> int:
        """Write result d to disk; the bytes freed."""
        m = self.machine
        key = m.keys[d]
        value = m.cache[key]
        n = self.held.pop(d)
        t0 = time.time()
        if self.store is None:
            from .spill import SpillStore

            self.store = SpillStore(self.t.spill_directory, self.t.max_spill)
        written = 0
        if self.kept.pop(d, None) is None:  # (else its file is still there: nothing to write)
            try:
                written = self.store.put(d, self.load(value) if self.load is not None else value)
            except BaseException:
                self.held[d] = n
                raise
        m.cache[key] = Spilled(n)
        if self.release is not None:
            self.release(value)
        value = None
        self.held_bytes -= n
        self.spilled[d] = n
        if written:
            self.events.append((t0, time.time(), DISK_WRITE, key, written))
        return n

    def _read_back(self, d: int, make_room: bool = True) -> None:
        """Read result d back into the cache (room made first; the inputs
        of the task being prepared are kept).  Its file stays while tasks
        after the one being prepared will use it (``kept``): spilled again
        before then, it is not written again."""
        m = self.machine
        n = self.spilled[d]
        if make_room:
            self.reserved_bytes += n  # (counted while making room for it)
            try:
                self._fit(self.t.target)
            finally:
                self.reserved_bytes -= n
        t0 = time.time()
        value = self.store.get(d)
        if make_room and (m.refs[d] > 1 or m.is_output[d]):
            self.kept[d] = n
        else:
            self.store.drop(d)
        del self.spilled[d]
        m.cache[m.keys[d]] = value
        self.held[d] = n
        self.held_bytes += n
        self.events.append((t0, time.time(), DISK_READ, m.keys[d], n))

    def _consumer(self, ready: list) -> int | None:
        """A ready task near the top that is the last user of a held result."""
        m = self.machine
        status, refs, deps, held = m.status, m.refs, m.deps, self.held
        for i in reversed(ready[-SCAN:]):
            if status[i] == DONE or status[i] == RUNNING:
                continue
            for d in deps[i]:
                if refs[d] == 1 and d in held and not m.is_output[d]:
                    return i
        return None

    def _refuse(self, i: int, inputs: int, output: int, ran: bool = False) -> None:
        key = self.machine.keys[i]
        what = "its output" if ran else "its expected output"
        raise MemoryBudgetError(
            f"task {key!r} cannot run within the memory budget of {_fmt(self.t.limit)}: "
            f"its inputs take {_fmt(inputs)} and {what} {_fmt(output)} "
            f"({_fmt(inputs + output)}), even with every other result spilled; "
            f"raise memory_limit or make this task's chunks smaller")

    # -- what it records ---------------------------------------------------------------

    def _note(self) -> None:
        spilled = self.store.spilled_bytes if self.store is not None else 0
        self.timeline.append((time.time(), self.held_bytes, spilled))


_START, _END = itemgetter(3), itemgetter(4)  # (a Record's start and end)
