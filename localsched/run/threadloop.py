"""Threads that schedule themselves: the loop of a threads run nobody watches.

The pool loop (``localsched.run.poolloop``) keeps the run's state in the
caller's thread: it plans a batch, hands it to a worker, and completes each
task when its record comes back.  Every task thus costs the work twice
over -- the planner simulates what becomes ready inside a batch, the
records redo it -- plus the hand-offs, and a task that becomes ready on a
worker waits for a round trip through the caller's thread (on a chain,
nothing else can run meanwhile).  That is the price of hooks that fire in
one thread, of records, of processes.  When nothing watches a run of
threads (``PoolSettings.direct``: no hook, no records, no measurement, the
cache the run's own) and no ``chunksize`` is asked for, none of it is
needed: the workers share the ``RunState`` under one lock and each runs
the inline loop (``localsched.run.inline``) itself::

    with lock: complete the task just run, take the top of the ready stack
    run it (the lock free)

So a task that becomes ready on a worker runs there next, with no hand-off
at all (the top of the stack is the dependent the worker just made ready:
dask's ready rule, the sequential run's order), and the other workers take
what else is ready (a worker finding nothing ready waits:
``Crew._wait_for_work``).  Results leave the cache when their last user
completes, as in a sequential run.

Two rules keep memory near a sequential run's, both in :class:`Crew`:
*the short lane* (tasks of functions measured short run on one worker at
a time, so tiny tasks do not open a frontier per worker) and *results
that count* (once the cache holds more than a sequential run would at
most, and a little, at a result that may be large made while another
task runs, the run is handed over to the pool loop, whose batches are
planned to stay depth-first).  Runs of numbers stay here.

Under a memory budget (``localsched.run.budget``).  A budget that only
watches (it has not armed: "Watching, then counting") keeps the crew and
its lean move; at a timed task (``Crew``: "What a task costs") the worker
reads the real memory when ``Budget.poll`` says, after 1, 2, 4, ... tasks,
or ``LONG`` s or more after its last timed task, under the lock.
Once it arms (spilling what it must; the inputs of running tasks never
go), the run is handed over as for a result that counts, each result
completed meanwhile counted, and the pool loop's batches go on, admitted
by the budget.

The caller's thread only waits: for the end, the first failure (raised by
the pool loop as any failure, with its task named), or Ctrl-C, which stops
the workers before their next task (the running ones cannot be stopped:
they end on their daemon threads).  Tasks that hold the GIL lose by
running at once (the turns at the GIL cost): a trial on the run's own
tasks (``localsched.run.contention``) then sends every task to the lane.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .. import callbacks as _callbacks
from ..metrics import is_tiny
from ..plan.graph import CALL, execute
from ..system import platform as _platform
from . import budget as _budget
from . import contention as _contention
from .batching import spec_group
from .machine import DONE, READY, RUNNING, WAITING, InvalidStateError, RunState

__all__ = ["Crew"]


# A function whose tasks took less than this on average (seconds) is
# "short": one worker at a time runs short tasks (see "The short lane").
SHORT = 1e-4
# A worker waiting while the lane's holder runs short tasks looks again
# this often (seconds), and takes over the lane if its holder has started
# no task since: that task was not short (it may wait for one behind it).
LANE_PATIENCE = 10e-3
# A function timed this many times, and short, has only a sample of its
# tasks timed: one after a gap of 5 to 11 of the worker's tasks, by turns
# (see "What a task costs").
SETTLED = 16
_GAPS = (6, 9, 7, 10, 5, 11, 8)
# Results that count: the crew goes on while the cache holds no more than
# a sequential run would at most, plus one entry per worker or one in this
# many of that peak, whichever is more.
HELD_SLACK = 20
# A watching budget reads after a timed task of ``budget.LONG`` s or more,
# or when this much more passed since the worker's last timed task: the
# tasks of short functions in between, untimed, take less (see ``_read_if_due``).
SPAN = (max(_GAPS) + 1) * SHORT
# What a worker's run of tasks ended with (a failure is set as it ends: ``Crew._failed``).
_IDLE, _FINISHED, _STOPPED, _FAILED = 0, 1, 2, 3


def _structures(machine: RunState) -> tuple:
    """What the hot loop reads of the run's state, as locals (see ``Crew._run_tasks``)."""
    ready = machine.ready
    return (machine.keys, ready, machine.status, machine.specs, machine.cache,
            machine.waiting, machine.dependents, machine.deps, machine.refs,
            machine.is_output, ready.extend, machine.priority.__getitem__)


class Crew:
    """Workers that run one computation's state themselves (see the module
    docstring).  ``start`` hands them to the pool, ``wait`` waits for the
    end and returns the first failure ``(i, exc, start, end, worker_id)``
    or None, ``stop`` makes them stop before their next task.

    Lifetimes: a worker holds the run's structures only in the frame of
    ``_run_tasks``, which it leaves before it waits or says the run is
    over; ``wait`` returns once every worker not running a task has left
    (a task still running after a failure or Ctrl-C keeps its own, as an
    abandoned batch does), and ``release`` drops the crew's references, so
    the computation's results and graph go with the caller's last one.

    The lane takes every task once the run's trial found that running at
    once loses (``all_laned``; see ``localsched.run.contention``: its tasks
    are measured, ``_probe``, until it decides); a worker then waits for
    the holder twice the longest mean task time before taking it over.

    The short lane.  Two workers on a reduction tree each advance a frontier
    of their own: when one finds nothing ready next to what it just did, it
    starts a new branch while the other finishes the old one, and the partial
    results of both are held (figures: ``benchmarks/README.md``, "Figures
    behind design choices").  Tasks that
    run long can be worth it; short ones never are (under the GIL they do not
    even run at once, and the hand-over costs as much as the task).  So each
    function's mean duration is measured, and a function is *short* below
    ``SHORT``: one worker at a time (the holder of the short lane) runs short
    tasks, the others take only tasks of functions that are long or not yet
    timed, and wait otherwise (taking the lane over if its holder's task has
    run for a whole ``LANE_PATIENCE``: it was not short, and may wait for the
    tasks behind it).  On tiny tasks the run is then the sequential
    run on one worker (holding what it holds), with no hand-off between workers;
    work that takes its time spreads as before.

    Results that count.  Tasks that run at once, on several workers, each
    advance a region of their own, and a result that may be large (anything
    but a number or a short string: ``metrics.is_tiny``) held by each adds to
    the peak; the pool loop's batches are planned to keep that depth-first
    (``batching``: "What a batch holds"), this loop is not.  The batches
    cost a round trip through the caller's thread each, though: on dask's
    ``map_overlap`` (0.3 ms tasks, 2 MB chunks) the pool loop took 1.8x
    this loop's time and held as much (113-122 results, as a sequential run
    and dask's threads do).  So this loop goes on while the cache holds no
    more than a sequential run of the graph would at most
    (``RunState.sequential_peak``, worked out once, at the first such
    result made while another task runs), and one entry per worker or one
    in ``HELD_SLACK`` more, whichever is larger; a result that may be
    large, made while another task runs, past that hands the run over: the
    workers stop taking tasks, the running ones complete, and the pool loop
    goes on from the same state (a chain never hands over).  Runs of
    numbers stay here, and cost nothing for this rule.

    Workers when there is work.  A worker starts for each task ready at the
    start (up to ``num_workers``), the others when a worker leaves ready
    tasks behind it and none waits (``_share``, ``_start``): a chain, or
    any run one task wide, runs on one worker and never starts, wakes or
    hands the GIL to a second one.

    What a task costs.  On tiny tasks the loop's own work is the run's time,
    so per task it does the least that keeps the rules: the lock is taken
    once, through its bound methods (a ``with`` costs about twice as much);
    this worker stays counted in ``running`` from one task to the next; the
    move (``RunState.mover``'s, spelled out as in ``inline._run_plain``: keep
    the three in step) is done in place where no view reads it (a budget
    that armed counts the results of tasks still running at the hand-over);
    and a function measured short on ``SETTLED`` tasks has only a sample
    of its tasks timed (one after a gap of 5 to 11 of the worker's tasks, the
    gaps varied so that no regular pattern of the graph hides a function),
    which keeps its mean right: a short function whose tasks turn long is
    seen as long within a few samples; a run of one function's tasks looks
    its figures up once (the function compared by identity).  A watching
    budget changes none of it: its readings are made at timed tasks only.
    """

    def __init__(self, machine: RunState | None, complete: Callable[[int, Any], list] | None,
                 budget: Any = None, views: bool = True):
        self.machine = machine
        self.complete = complete
        # Whether ``complete`` keeps the sets a state view reads (a callback
        # takes part): else the crew does the move itself (see ``_run_tasks``).
        self.views = views
        # A memory budget that only watches (see "Under a memory budget"):
        # the next reading is due at this time, or once ``machine.remaining``
        # is down to ``count_at`` (after 1, 2, 4, ... up to
        # ``budget.WATCH_EVERY`` tasks), or after a long task.
        self.budget = budget
        self.due = 0.0
        self.every = _budget.WATCH_FIRST
        self.count_at = (machine.remaining if machine is not None else 0) - self.every
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)  # (a worker with nothing ready waits)
        self.done = threading.Event()
        self.stopped = False
        self.handover = False  # (stopped for the pool loop to go on: see ``_hand_over``)
        # The most the cache may hold before the pool loop takes over (0: not
        # yet worked out; see "Results that count") and the workers it allows for.
        self.held_limit = 0
        self.workers = 1
        self.idle = 0  # workers waiting for a ready task
        self.inside = 0  # workers in ``work``
        self.running = 0  # ... of them running a task now
        self.failure: tuple | None = None
        self.futures: list = []
        # Workers when there is work: the pool's ``submit``, ``run_in`` (see
        # ``start``), how many more may start, the threads inside ``work``.
        self.submit: Callable | None = None
        self.run_in: Callable | None = None
        self.spare = 0
        self.threads: set = set()
        # function -> [seconds, tasks, short] so far; the worker in the lane
        self.stats: dict = {}
        self.lane: int | None = None
        self.lane_ticks = 0  # tasks its holders started
        # Whether every task goes in the lane (``contention``: the run's trial,
        # measured with the thread's CPU clock while ``trial`` is set: ``_probe``).
        self.all_laned = False
        self.clock: Callable | None = None
        self.trial: _contention.Trial | None = None

    def start(self, submit: Callable, num_workers: int, run_in: Callable) -> None:
        """Hand workers to the pool, up to ``num_workers`` (``run_in()``: the
        callable that runs a function where tasks belong, in a copy of the
        caller's context): one per ready task now, the others once a worker
        leaves ready tasks behind it (see "Workers when there is work")."""
        machine = self.machine
        assert machine is not None
        self.submit, self.run_in, self.workers = submit, run_in, num_workers
        self.clock = _platform.thread_cpu_clock() if num_workers > 1 else None
        self.trial = _contention.Trial() if self.clock is not None else None
        self.spare = min(num_workers, machine.remaining)
        n = min(max(1, len(machine.ready)), self.spare)
        self.spare -= n
        self._start(n)

    def _start(self, n: int) -> int:
        """Start n more workers (the lock free: a pool may run one at once);
        returns 0.  After the run, or if the pool refuses, fewer start: the
        workers already there run the tasks."""
        submit, run_in = self.submit, self.run_in
        for _ in range(n):
            if submit is None or run_in is None or self.stopped:
                break
            try:
                fut = submit(run_in(), self.work)
            except Exception:  # noqa: BLE001 -- e.g. a pool shut down: the others go on
                if not self.futures:
                    raise
                break
            self.futures.append(fut)
            # (a worker that never ran or died outside a task ends the run)
            fut.add_done_callback(self._ended)
        return 0

    def _share(self, n: int) -> int:
        """(Lock held.)  n tasks are ready behind the one this worker takes:
        wake as many idle workers; returns how many spare ones to start for
        the rest (``_start``, once the lock is released)."""
        if self.idle:
            self.wake.notify(n)
            n -= self.idle
        k = min(n, self.spare) if n > 0 else 0
        self.spare -= k
        return k

    def wait(self) -> tuple | None:
        """Wait for the end of the run (short waits: Ctrl-C is seen at once)."""
        done = self.done
        while not done.wait(0.1):
            pass
        return self.failure

    def release(self) -> None:
        """Drop the references to the run (it is over, or abandoned)."""
        with self.lock:
            self.machine = self.complete = self.failure = self.budget = None
            self.submit = self.run_in = None
            self.futures = []

    def stop(self) -> None:
        """No worker starts another task (the running ones finish theirs)."""
        with self.lock:
            self._end()

    def work(self) -> None:
        """One worker: runs tasks while some are ready, waits while others
        run, until the run is over."""
        wid = threading.get_ident()
        with self.lock:
            if wid in self.threads:  # (a pool that ran it inline, in a worker: it goes on)
                return
            self.threads.add(wid)
            self.inside += 1
        token = _callbacks.enter_computation()  # (inside tasks, a registry of their own)
        try:
            while True:
                outcome = self._run_tasks() if not self.stopped else _STOPPED
                with self.lock:
                    if outcome == _IDLE:
                        if self._wait_for_work():
                            continue
                    elif outcome == _FINISHED:
                        self._end()
                    break  # (finished, stopped, or failed: the failure is set)
        except BaseException as exc:  # noqa: B036 -- a fault of the loop itself: the run fails
            with self.lock:
                self._fail(-1, exc, 0.0, 0.0, wid)
        finally:
            _callbacks._local_active.reset(token)
            with self.lock:
                self.inside -= 1
                self.threads.discard(wid)
                self._check_done()

    def _run_tasks(self):
        """Complete the task just run, take the next (locked), run it; returns why it stopped."""
        machine, complete, budget = self.machine, self.complete, self.budget
        if machine is None or complete is None:
            return _STOPPED
        acquire, release, lean, probed = self.lock.acquire, self.lock.release, not self.views, None
        (keys, ready, status, specs, cache, waiting, dependents, deps, refs, is_output,
         push, by_priority) = _structures(machine)
        now, stats, wid, spawn, then = time.time, self.stats, threading.get_ident(), 0, time.time()
        i, g, st, func, value, laned, t0, skip, gap = -1, None, None, None, None, False, 0.0, 0, 0
        while True:
            acquire()
            try:
                if i >= 0:
                    if t0:  # (timed: see "What a task costs")
                        st = self._timed(g, st, (t1 := now()) - t0)
                        probed = probed and self._probed(g, probed)
                    if self.stopped:
                        if not self.handover:
                            return self._leave(_STOPPED, wid)
                        self._handing_over(i, value, complete)
                    elif lean:  # (RunState.mover's move, spelled out)
                        cache[keys[i]] = value
                        status[i] = DONE
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
                        if new is not None:  # (the ready rule: see RunState.mover)
                            if len(new) > 1:
                                new.sort(key=by_priority, reverse=True)
                            push(new)
                        for d in deps[i]:
                            r = refs[d] - 1
                            refs[d] = r
                            if not r and not is_output[d]:
                                del cache[keys[d]]
                    else:
                        complete(i, value)
                    if t0 and budget is not None:  # (a watching budget, at a timed task)
                        then = self._read_if_due(i, t0, t1, then)
                    if (value is not None and self.running > 1 and not is_tiny(value)
                            and len(cache) > (self.held_limit or self._limit_held())):
                        self._hand_over()  # (see "Results that count")
                    value = None
                    if not machine.remaining:
                        self.stopped = True  # (a worker arriving now leaves at once)
                        return self._leave(_FINISHED, wid)
                else:
                    self.running += 1  # (counted from here until it leaves: ``_leave``)
                if self.stopped or not ready:
                    return self._leave(_STOPPED if self.stopped else _IDLE, wid)
                spec = specs[i := ready.pop()]
                if spec[1] is not func or st is None or spec[0] != CALL:  # (else: the one before's)
                    func = spec[1] if spec[0] == CALL else None
                    g = id(func) if func is not None else spec_group(spec)
                    st = stats.get(g)  # (function -> its figures: see ``_timed``)
                laned = (short := st is not None and st[2]) or self.all_laned  # (one at a time)
                if laned:
                    if self.lane is not wid:  # (``is``: a thread's ident is a large int)
                        if self.lane is not None:  # (its holder takes it)
                            return self._leave(_IDLE, wid, put_back=i)
                        self.lane = wid
                    self.lane_ticks += 1  # (read by the waiting workers: see LANE_PATIENCE)
                elif self.lane is wid:
                    self.lane = None
                if status[i] != READY:
                    raise self._taken_twice(i, wid)
                status[i] = RUNNING
                if ready and self.lane is None and (self.idle or self.spare):
                    spawn = self._share(len(ready))  # (the lane's holder: as it leaves the lane)
                probe = not short and self.trial is not None
                if short and skip and st[1] >= SETTLED:
                    skip, t0 = skip - 1, 0.0
                else:  # (timed; the next sample after a gap of 5 to 11 tasks)
                    gap = gap + 1 if gap < 6 else 0
                    skip, t0 = _GAPS[gap], now()
            except BaseException as exc:  # noqa: B036 -- a budget's error, a bug: see ``work``
                self._leave(None, wid)
                self._fail(-1, exc, 0.0, 0.0, wid)  # (in the same hold of the lock: ``_failed``)
                raise
            finally:
                release()
            spawn = spawn and self._start(spawn)
            try:
                if probe:
                    value, probed = self._probe(spec, cache)
                elif spec[0] == CALL and len(spec[3]) == len(spec[2]) == 2:  # (f, x, y): keys
                    value = spec[1](cache[spec[2][0]], cache[spec[2][1]])
                else:
                    value = execute(spec, cache)
            except BaseException as exc:  # noqa: B036 -- the run's failure, raised by the caller
                return self._failed(i, exc, t0, wid)

    def _failed(self, i: int, exc: BaseException, t0: float, wid) -> int:
        """Task i, started at t0 (0: untimed), failed: this worker leaves the
        loop and the run fails (the caller raises it: see ``work``).

        Both in one hold of the lock: a worker arriving between them would
        see nothing ready and nothing running, and fail the run as stalled
        (dropping the task's own failure)."""
        t1 = time.time()
        with self.lock:
            self._leave(None, wid)
            self._fail(i, exc, t0 or t1, t1, wid)
        return _FAILED

    def _taken_twice(self, i: int, wid) -> InvalidStateError:
        """(Lock held.)  A task on the ready stack was not ready: a bug (the
        run fails: ``work``)."""
        assert self.machine is not None
        return InvalidStateError(f"task {self.machine.keys[i]!r} taken twice")

    def _timed(self, g, st, seconds: float) -> list:
        """(Lock held.)  A timed task of function ``g`` took ``seconds``
        (``st``: its figures when the task was taken, or None); returns its figures."""
        if st is None:
            st = self.stats.get(g)  # (another worker may have timed one since)
            if st is None:
                st = self.stats[g] = [0.0, 0, False]
        st[0] += seconds
        st[1] += 1
        st[2] = st[0] < SHORT * st[1]
        return st

    def _probe(self, spec, cache) -> tuple:
        """Run a task, measured for the run's trial (``contention``): returns
        its value and ``(wall, on_cpu)`` seconds."""
        clock, perf = self.clock, time.perf_counter
        assert clock is not None
        cpu0, t0 = clock(), perf()
        value = execute(spec, cache)
        return value, (perf() - t0, clock() - cpu0)

    def _probed(self, g, sample: tuple) -> None:
        """(Lock held.)  A measured task of function ``g`` completed: the
        run's trial says whether every task goes in the lane from now on."""
        trial = self.trial
        if trial is not None:
            wall, cpu = sample
            trial.add(g, wall, cpu, self.running)
            if self.all_laned and not trial.laned:  # (tried, and at once wins)
                self.wake.notify_all()
            self.all_laned = trial.laned
            if not trial.measuring:
                self.trial = None
        return None

    def _handing_over(self, i: int, value, complete: Callable[[int, Any], list]) -> None:
        """(Lock held, the run handed over.)  Task i, still running when
        the run was handed over, completes through the general move; a
        budget that armed counts its result (its hooks run from now on),
        one still watching may read after it (``_read_if_due``: the task's
        time is known here only, and its result may be what arms it)."""
        complete(i, value)
        budget = self.budget
        if budget is not None and budget.armed:
            budget.completed(i)

    def _read_if_due(self, i: int, t0: float, t1: float, then: float) -> float:
        """(Lock held, task i completed, timed from t0 to t1; this worker's
        timed task before it ended at ``then``.)  A watching budget's
        reading when one is due: by the clock (``due``), by the count of
        tasks completed (``count_at``), after a task of ``long`` s or more,
        or when ``long`` + ``SPAN`` s passed since ``then`` (a long task
        among the untimed ones of short functions is seen at the next
        sample; its result, if still held, is sized with the cache's).
        Returns t1 (the worker's new ``then``)."""
        machine, budget = self.machine, self.budget
        assert machine is not None and budget is not None
        if budget.armed:  # (handing over: ``_handing_over`` counted it)
            return t1
        long = budget.long
        if (t1 >= self.due or t1 - t0 >= long or t1 - then >= long + SPAN
                or machine.remaining <= self.count_at):
            self._watch(i, t1)
        return t1

    def _watch(self, i: int, t1: float) -> None:
        """(Lock held, task i just completed.)  A reading of the watching
        budget (``Budget.completed``, as the inline loop's); once it arms,
        the pool loop takes the run over, its hooks admitting each batch."""
        budget, machine = self.budget, self.machine
        assert machine is not None
        budget.completed(i, True)
        if budget.armed:
            self._hand_over()
            return
        self.due = t1 + budget.poll
        self.every = min(2 * self.every, _budget.WATCH_EVERY)
        self.count_at = machine.remaining - self.every

    def _leave(self, outcome, wid, put_back: int = -1):
        """(Lock held.)  This worker leaves the hot loop: it no longer
        counts as running a task, and gives up the short lane, if it held it
        (``put_back``: a task it took from the ready stack, put back on top)."""
        if put_back >= 0 and self.machine is not None:
            self.machine.ready.append(put_back)
        self.running -= 1
        if self.lane == wid:
            self.lane = None
        return outcome

    def _patience(self) -> float:
        """(Lock held.)  How long a worker waits for the lane's holder:
        ``LANE_PATIENCE``, or where every task goes in the lane (the run's
        trial), twice the longest mean of a function timed if longer."""
        if not self.all_laned:
            return LANE_PATIENCE
        return max([LANE_PATIENCE] + [2.0 * st[0] / st[1] for st in self.stats.values()])

    def _laned(self, spec) -> bool:
        """Whether a task runs in the lane (its function short, or every
        task: ``all_laned``)."""
        if self.all_laned:
            return True
        st = self.stats.get(id(spec[1]) if spec[0] == CALL else spec_group(spec))
        return st is not None and st[2]

    def _wait_for_work(self) -> bool:
        """(Lock held, nothing was ready.)  Wait until a task is ready;
        False: the run is over (finished, failed, stopped or stalled).

        A worker finding nothing ready waits on the lock's condition; a
        worker that leaves ready tasks behind it while others wait wakes as
        many as there are tasks for (never one per task on a chain)."""
        seen = -1  # the lane's ticks when this worker began to wait for it
        while True:
            if self.stopped or self.machine is None:
                return False
            ready = self.machine.ready
            if ready:
                if self.lane is None or not self._laned(self.machine.specs[ready[-1]]):
                    return True
                if self.lane_ticks == seen:
                    # The lane's task has run for a whole wait: it is not
                    # short after all (it may wait for one of these: tasks
                    # meet at a barrier).  Take the lane over.
                    self.lane = None
                    return True
                seen = self.lane_ticks
                self.idle += 1
                try:
                    self.wake.wait(self._patience())
                finally:
                    self.idle -= 1
                continue
            if not self.machine.remaining:
                return False
            if not self.running:  # nothing runs that could make a task ready
                self._fail(-1, InvalidStateError("scheduler stalled with tasks left"),
                           0.0, 0.0, None)
                return False
            self.idle += 1
            try:
                self.wake.wait()
            finally:
                self.idle -= 1

    def _end(self) -> None:
        """(Lock held.)  The run is over: the others stop waiting."""
        self.stopped = True
        self.wake.notify_all()
        self._check_done()

    def _check_done(self) -> None:
        """(Lock held.)  Tell the caller once the run is over and every
        worker not running a task has left."""
        if self.stopped and self.inside <= self.running and not (self.handover and self.running):
            self.done.set()

    def _limit_held(self) -> int:
        """(Lock held.)  What the cache may hold, worked out once: what a
        sequential run holds at most, and a result or so per worker more
        (see "Results that count")."""
        assert self.machine is not None
        peak = self.machine.sequential_peak()
        self.held_limit = peak + max(self.workers, peak // HELD_SLACK)
        return self.held_limit

    def _hand_over(self) -> None:
        """(Lock held.)  A result that counts: the pool loop's batches take
        the rest of the run over, once the running tasks are complete."""
        self.handover = True
        self._end()

    def _fail(self, i: int, exc: BaseException, t0: float, t1: float, wid) -> None:
        """(Lock held.)  The first failure ends the run (later ones are dropped)."""
        if self.failure is None and self.machine is not None and self.machine.remaining:
            self.failure = (i, exc, t0, t1, wid)
        self._end()

    def _ended(self, fut) -> None:
        """A worker's future is done: if it never ran (cancelled) or raised
        outside a task, the run cannot go on without it saying so."""
        if fut.cancelled():
            exc: BaseException | None = InvalidStateError("a worker of the run was cancelled")
        else:
            exc = fut.exception()
        if exc is not None:
            with self.lock:
                self._fail(-1, exc, 0.0, 0.0, None)
