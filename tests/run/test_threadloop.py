"""Threads that nobody watches schedule themselves: a task that becomes
ready on a worker runs there, without a hand-off, while independent work
still spreads over every worker (see ``localsched/run/threadloop.py``)."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import Executor

import pytest

import localsched
from localsched import threaded
from localsched.callbacks import Callback
from tests.support.platform_marks import needs_posix_signals


class CountingPool(Executor):
    """localsched's own thread pool, counting the hand-offs it receives."""

    def __init__(self, num_workers: int):
        self.pool = threaded.ThreadPool(num_workers, name="counted")
        self.num_workers = num_workers
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return self.pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait, cancel_futures=cancel_futures)


def slow_step(x):
    """A task longer than a batch's budget (it would go alone to a worker
    were it handed out one by one): spins for 3 ms of wall time."""
    end = time.perf_counter() + 3e-3
    while time.perf_counter() < end:
        pass
    return (x[0] + 1, x[1] | {threading.get_ident()})


def chain(n: int, func=slow_step) -> tuple[dict, str]:
    dsk: dict = {"c-0": (func, (0, frozenset()))}
    for i in range(1, n):
        dsk[f"c-{i}"] = (func, f"c-{i - 1}")
    return dsk, f"c-{n - 1}"


def test_a_chain_runs_on_one_worker_without_a_hand_off_per_task():
    dsk, out = chain(12)
    with CountingPool(2) as pool:
        steps, threads = threaded.get(dsk, out, pool=pool, num_workers=2)
    assert steps == 12
    assert len(threads) == 1
    assert pool.submitted <= 2  # (one start per worker, not one per task)


def test_a_chain_starts_no_second_worker():
    # (On fe526c5 both workers started: the second found nothing ready,
    # waited, and was woken at the end, for nothing.)
    dsk, out = chain(12, func=lambda x: (x[0] + 1, x[1] | {threading.get_ident()}))
    for memory_limit in (None, "1000GB"):
        with CountingPool(2) as pool:
            steps, threads = threaded.get(dsk, out, pool=pool, num_workers=2,
                                          memory_limit=memory_limit)
        assert steps == 12 and len(threads) == 1
        assert pool.submitted == 1


def test_a_second_worker_starts_once_work_is_left_behind():
    # One task first, then two that can only finish together: the worker
    # that ran the first starts the second worker for the other.
    barrier = threading.Barrier(2, timeout=30)  # (a broken barrier fails, never hangs)

    def meet(_):
        return barrier.wait() >= 0

    dsk = {"root": (abs, -1), "a": (meet, "root"), "b": (meet, "root"),
           "both": (all, ["a", "b"])}
    with CountingPool(2) as pool:
        assert threaded.get(dsk, "both", pool=pool, num_workers=2) is True
    assert pool.submitted == 2


def test_independent_tasks_still_run_at_once():
    barrier = threading.Barrier(2, timeout=30)  # (a broken barrier fails, never hangs)

    def meet(i):
        return barrier.wait() >= 0

    dsk = {("m", i): (meet, i) for i in range(2)}
    dsk["both"] = (all, [("m", 0), ("m", 1)])
    assert threaded.get(dsk, "both", num_workers=2) is True


def test_work_made_ready_by_one_worker_wakes_an_idle_one():
    # One task makes two ready; they can only finish together.
    barrier = threading.Barrier(2, timeout=30)

    def meet(_):
        return barrier.wait() >= 0

    dsk = {"root": (abs, -1), "a": (meet, "root"), "b": (meet, "root"),
           "both": (all, ["a", "b"])}
    for _ in range(5):
        assert threaded.get(dsk, "both", num_workers=2) is True


def test_the_first_failure_stops_the_run_and_names_its_task():
    ran = []

    def fail(_):
        raise ZeroDivisionError("boom")

    dsk = {"a": (abs, -1), "b": (fail, "a"), "c": (ran.append, "b")}
    with pytest.raises(ZeroDivisionError, match="boom") as info:
        threaded.get(dsk, "c", num_workers=2)
    assert "'b'" in "".join(getattr(info.value, "__notes__", []))
    assert ran == []
    assert threaded.get({"x": (abs, -2)}, "x", num_workers=2) == 2  # (the pool works on)


def test_results_leave_the_cache_once_their_users_ran():
    live: list = []

    class Big:
        count = 0

        def __init__(self):
            Big.count += 1

        def __del__(self):
            Big.count -= 1

    def make(_):
        return Big()

    def use(b):
        live.append(Big.count)
        return 1

    dsk = {}
    for i in range(200):
        dsk[("big", i)] = (make, i)
        dsk[("use", i)] = (use, ("big", i))
    dsk["total"] = (sum, [("use", i) for i in range(200)])
    assert threaded.get(dsk, "total", num_workers=2) == 200
    assert max(live) <= 8  # depth-first: each made, used and released in turn
    assert Big.count == 0


def test_a_watched_run_still_fires_every_hook_in_the_callers_thread():
    seen = []
    me = threading.get_ident()
    cb = Callback(posttask=lambda key, *_: seen.append((key, threading.get_ident())))
    dsk, out = chain(3, func=lambda x: (x[0] + 1, x[1]))
    assert threaded.get(dsk, out, num_workers=2, callbacks=[cb])[0] == 3
    assert [k for k, _ in seen] == ["c-0", "c-1", "c-2"]
    assert {t for _, t in seen} == {me}


def test_short_tasks_that_wait_for_each_other_still_meet():
    # Ten quick tasks make the function "short" (one worker at a time runs
    # short tasks); the last two meet at a barrier: the second must start
    # while the first waits.
    barrier = threading.Barrier(2, timeout=30)

    def step(i, *_):
        if i >= 10:
            barrier.wait()
        return i

    dsk: dict = {("s", i): (step, i) for i in range(10)}
    dsk["first"] = (sum, [("s", i) for i in range(10)])
    dsk[("s", 10)] = (step, 10, "first")
    dsk[("s", 11)] = (step, 11, "first")
    dsk["all"] = (sum, [("s", 10), ("s", 11)])
    assert threaded.get(dsk, "all", num_workers=2) == 21


def lists_in_pairs(n: int = 24) -> tuple[dict, str]:
    """n pairs of make -> use, each task a 3 ms spin, the makes' results
    lists (results that may be large), the uses' numbers summed."""
    def make(i):
        return slow_step((i, frozenset()))[1] and [i] * 1000

    def use(xs):
        return slow_step((0, frozenset()))[1]

    dsk: dict = {}
    for i in range(n):
        dsk[("make", i)] = (make, i)
        dsk[("use", i)] = (use, ("make", i))
    dsk["threads"] = (lambda *used: frozenset().union(*used), *[("use", i) for i in range(n)])
    return dsk, "threads"


def test_results_no_more_than_a_sequential_run_holds_keep_the_crew():
    # Two workers each making a list and using it hold about what a
    # sequential run holds: the crew goes on, with no hand-off per task (on
    # 93dbd6b the first list made while another task ran handed the run to
    # the pool loop's batches: a hand-off per batch, 1.8x slower on
    # dask's map_overlap).
    dsk, out = lists_in_pairs()
    with CountingPool(2) as pool:
        threads = threaded.get(dsk, out, pool=pool, num_workers=2)
    assert len(threads) == 2
    assert pool.submitted <= 2  # (one start per worker)


@pytest.mark.parametrize("seed", range(40))
def test_the_sequential_peak_is_what_a_sequential_run_holds(seed):
    # What the crew compares itself with: the most the cache of a
    # sequential run holds after a task's move, data included, on graphs
    # of shared inputs, literals, outputs in the middle and unused tasks.
    import random

    from localsched.run.machine import RunState

    rng = random.Random(seed)
    dsk: dict = {("x", 0): (abs, -1), "literal": 5, "unused-literal": 6}
    for j in range(1, 60):
        inputs = [("x", k) for k in rng.sample(range(j), min(j, rng.randint(0, 3)))]
        if rng.random() < 0.2:
            inputs.append("literal")
        dsk[("x", j)] = (lambda *xs: sum(xs) + 1, *inputs)
    outputs = [("x", k) for k in rng.sample(range(60), 3)]

    class Watch(Callback):
        def _start_state(self, dsk, state):
            self.peak = len(state["cache"])

        def _posttask(self, key, result, dsk, state, worker_id):
            self.peak = max(self.peak, len(state["cache"]))

    with Watch() as watch:
        localsched.get_sync(dsk, outputs)
    assert RunState(dsk, outputs).sequential_peak() == watch.peak


def gated_lists(n: int, handed: threading.Event, fail: bool = False):
    """A gate every use waits for, n lists, their uses folded in a chain:
    a sequential run holds three results at most.  The gate returns once
    the run is handed over, so the crew's other worker makes lists whose
    uses cannot run yet.  Returns the graph, its output and the live lists
    seen by each use."""
    live: list = []

    class Big(list):
        count = 0

        def __init__(self, *args):
            super().__init__(*args)
            Big.count += 1

        def __del__(self):
            Big.count -= 1

    def gate():
        assert handed.wait(30)
        return 1

    def use(xs, g):
        live.append(Big.count)
        return len(xs) * g

    def fold(a, b):
        if fail and b == 1000 and len(live) == n:
            raise ZeroDivisionError("after the hand-over")
        return a + b

    dsk: dict = {"gate": (gate,)}
    for i in range(n):
        dsk[("make", i)] = (Big, [i] * 1000)
        dsk[("use", i)] = (use, ("make", i), "gate")
        dsk[("fold", i)] = (fold, ("fold", i - 1), ("use", i)) if i else ("use", 0)
    return dsk, ("fold", n - 1), live


def test_a_crew_holding_more_than_a_sequential_run_hands_over(monkeypatch):
    from localsched.run import threadloop

    handed, held = threading.Event(), []
    hand_over = threadloop.Crew._hand_over

    def spy(self):
        held.append((len(self.machine.cache), self.held_limit, self.machine.remaining))
        hand_over(self)
        handed.set()

    monkeypatch.setattr(threadloop.Crew, "_hand_over", spy)
    dsk, out, live = gated_lists(40, handed)
    assert threaded.get(dsk, out, num_workers=2) == 40 * 1000
    ((cached, limit, remaining),) = held
    assert limit == 3 + 2  # (a sequential run's three, one more per worker)
    assert cached == limit + 1 and remaining > 40  # (handed over at once, early)
    assert max(live) <= limit + 2  # (the batches then keep it depth-first)


def test_a_run_handed_over_to_batches_still_fails_and_recovers_as_usual(monkeypatch):
    # A failure in the pool loop's batches, after the crew handed the run
    # over, is raised as any other, and the pool works on.
    from localsched.run import threadloop

    handed = threading.Event()
    hand_over = threadloop.Crew._hand_over

    def spy(self):
        hand_over(self)
        handed.set()

    monkeypatch.setattr(threadloop.Crew, "_hand_over", spy)
    dsk, out, _ = gated_lists(40, handed, fail=True)
    with pytest.raises(ZeroDivisionError, match="after the hand-over"):
        threaded.get(dsk, out, num_workers=2)
    assert handed.is_set()
    dsk, out, _ = gated_lists(40, handed)
    assert threaded.get(dsk, out, num_workers=2) == 40 * 1000


# -- under a memory budget (issue #34) ----------------------------------------------------
#
# A budget that only watches (it has not armed) keeps the crew: its readings
# of the real memory are made at the crew's completion step; once it arms,
# the run is handed over to the pool loop, whose batches it admits.

NEVER_REACHED = "1000GB"


def test_a_never_reached_budget_keeps_the_crew():
    dsk, out = chain(12)
    with CountingPool(2) as pool:
        steps, threads = threaded.get(dsk, out, pool=pool, num_workers=2,
                                      memory_limit=NEVER_REACHED)
    assert steps == 12
    assert len(threads) == 1
    assert pool.submitted <= 2  # (one start per worker: the crew, no batches)


def _block(_, n=10**6):
    import numpy as np

    return np.ones(n // 8)


def _both(a, b):
    return float(a.sum() + b.sum())


def test_a_budget_that_arms_mid_run_hands_over_and_still_spills(tmp_path, monkeypatch):
    # A chain of 1 MB blocks, all held until its end (each is then read
    # with the last one): 24 MB against a 12 MB budget.  A chain never
    # hands over for its results' sake (one task runs at a time), so only
    # the budget arming makes the crew hand the run over.
    import dask

    from localsched.run import budget, threadloop

    handed: list = []
    hand_over = threadloop.Crew._hand_over

    def spy(self):
        handed.append(self.machine.remaining)
        hand_over(self)

    monkeypatch.setattr(threadloop.Crew, "_hand_over", spy)
    n = 24
    dsk: dict = {("c", 0): (_block, 0)}
    for i in range(1, n):
        dsk[("c", i)] = (_block, ("c", i - 1))
    for i in range(n):
        dsk[("t", i)] = (_both, ("c", i), ("c", n - 1))
    dsk["out"] = (sum, [("t", i) for i in range(n)])
    # (what the budget recorded, kept at its finish: a callback with a
    # finish hook would watch the run, and the crew runs only unwatched ones)
    events: list = []
    finish = budget.Budget.finish

    def keep(self):
        events.extend(self.events)
        finish(self)

    monkeypatch.setattr(budget.Budget, "finish", keep)
    with dask.config.set({"localsched.memory.spill": True,
                          "localsched.memory.spill-directory": str(tmp_path)}):
        assert threaded.get(dsk, "out", num_workers=2, memory_limit="12MB") == n * 2 * 125_000
    assert handed and handed[0] > 0  # (the crew ran the start, the pool loop the rest)
    assert {e[2] for e in events} == {"disk-write", "disk-read"}
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("memory_limit", [None, NEVER_REACHED])
def test_a_failing_task_under_a_watching_budget_fails_as_without(memory_limit):
    ran = []

    def fail(_):
        raise ZeroDivisionError("boom")

    dsk = {"a": (abs, -1), "b": (fail, "a"), "c": (ran.append, "b")}
    with CountingPool(2) as pool:
        with pytest.raises(ZeroDivisionError, match="boom") as info:
            threaded.get(dsk, "c", num_workers=2, pool=pool, memory_limit=memory_limit)
        assert pool.submitted <= 2  # (the crew's)
    assert "'b'" in "".join(getattr(info.value, "__notes__", []))
    assert ran == []
    assert threaded.get({"x": (abs, -2)}, "x", num_workers=2,
                        memory_limit=memory_limit) == 2


@pytest.mark.parametrize("memory_limit", [None, NEVER_REACHED])
def test_a_failure_is_never_taken_for_a_stall_by_a_worker_arriving_late(memory_limit):
    # A worker that starts while the only running task fails sees nothing
    # ready and nothing running: it must find the task's failure set, not
    # fail the run as stalled (which hid the task's error, about 1 run in
    # 100 under a watching budget).  Fresh pools: the second worker's
    # thread starts late.
    def fail(_):
        raise ZeroDivisionError("boom")

    for _ in range(600):
        with threaded.ThreadPool(2, name="late") as pool:
            with pytest.raises(ZeroDivisionError, match="boom"):
                threaded.get({"a": (abs, -1), "b": (fail, "a"), "c": (abs, "b")}, "c",
                             num_workers=2, pool=pool, memory_limit=memory_limit)


@needs_posix_signals
@pytest.mark.timeout(60)
@pytest.mark.parametrize("memory_limit", [None, NEVER_REACHED])
def test_ctrl_c_under_a_watching_budget_stops_as_without(memory_limit):
    release, started = threading.Event(), threading.Event()
    main = threading.get_ident()

    def long(_):
        started.set()
        return release.wait(60)

    def interrupter():
        if started.wait(30):
            signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=interrupter)
    t.start()
    pool = CountingPool(2)
    try:
        with pytest.raises(KeyboardInterrupt):
            threaded.get({"a": (abs, -1), "long": (long, "a")}, "long", num_workers=2,
                         pool=pool, memory_limit=memory_limit)
        assert pool.submitted <= 2  # (the crew's)
    finally:
        release.set()  # (the running task ends: the pool can shut down)
        t.join()
        pool.shutdown()
    assert threaded.get({"x": (abs, -2)}, "x", num_workers=2, memory_limit=memory_limit) == 2


# -- what a task costs: only a sample of a short function's tasks is timed ------------


def _crew_run(dsk: dict, out):
    """Run a graph on a crew of one worker, the caller's thread (the
    crew's figures are read afterwards)."""
    from localsched.run.machine import RunState
    from localsched.run.threadloop import Crew

    machine = RunState(dsk, [out])
    crew = Crew(machine, machine.mover(views=False), views=False)
    crew.work()
    assert not machine.remaining and crew.failure is None
    return machine.results()[0], crew


def test_a_short_functions_tasks_are_timed_by_sample_and_it_stays_short():
    def step(i, prev):
        return prev + 1

    dsk: dict = {("c", 0): (step, 0, 0)}
    for i in range(1, 2000):
        dsk[("c", i)] = (step, i, ("c", i - 1))
    total, crew = _crew_run(dsk, ("c", 1999))
    seconds, timed, short = crew.stats[id(step)]
    assert total == 2000 and short
    assert 16 <= timed < 2000 // 4  # (a sample: one task in about eight, once settled)


def test_a_short_function_whose_tasks_turn_long_is_seen_long():
    # 300 quick tasks make the function short (sampled from then on); 40
    # more of 2 ms each must move it out of the short lane all the same.
    def step(i, prev):
        if i >= 300:
            end = time.perf_counter() + 2e-3
            while time.perf_counter() < end:
                pass
        return prev + 1

    dsk: dict = {("c", 0): (step, 0, 0)}
    for i in range(1, 340):
        dsk[("c", i)] = (step, i, ("c", i - 1))
    total, crew = _crew_run(dsk, ("c", 339))
    assert total == 340
    assert crew.stats[id(step)][2] is False


# -- a watching budget costs next to nothing: sampled times, the lean move ----------------


def _budget_for(machine, limit: str, monkeypatch=None):
    """A watching budget of ``limit`` over ``machine`` (no run around it),
    its real memory read as flat when ``monkeypatch`` is given (an
    allocator that reuses freed memory shows no growth)."""
    from types import SimpleNamespace

    from localsched.run import budget, budget_limits

    if monkeypatch is not None:
        monkeypatch.setattr(budget.Budget, "_real_memory", lambda self: 10**9)
    return budget.Budget(budget_limits.thresholds(budget_limits.parse_memory_limit(limit)),
                         machine, SimpleNamespace(memory=None))


def test_under_a_watching_budget_a_short_functions_tasks_are_timed_by_sample():
    # (On the base every task was timed under a budget, and completed
    # through the general move with a budget step per task.)
    from localsched.run.machine import RunState
    from localsched.run.threadloop import Crew

    def step(i, prev):
        return prev + 1

    dsk: dict = {("c", 0): (step, 0, 0)}
    for i in range(1, 2000):
        dsk[("c", i)] = (step, i, ("c", i - 1))
    machine = RunState(dsk, [("c", 1999)])
    watching = _budget_for(machine, "100GB")
    readings: list = []
    completed = watching.completed

    def spy(i, long=False):
        readings.append(i)
        completed(i, long)

    watching.completed = spy
    crew = Crew(machine, machine.mover(views=False), watching, views=False)
    crew.work()
    assert not machine.remaining and crew.failure is None and not watching.armed
    assert machine.results()[0] == 2000
    seconds, timed, short = crew.stats[id(step)]
    assert short and 16 <= timed < 2000 // 4  # (a sample, as with no budget)
    assert 1 <= len(readings) < 100  # (after 1, 2, 4, ... tasks, or when due: not per task)


@pytest.mark.parametrize("at", range(300, 312))  # (one whole cycle of the sample's gaps)
def test_a_watching_budget_still_arms_after_a_long_task_between_samples(at, monkeypatch):
    # A short function, sampled once settled, has one long task (3 ms) that
    # makes a 16 MB result held to the end; the RSS stays flat, no reading
    # is due by the clock and none by the count before the end (the next
    # after 511 tasks): only the long task can make the budget read, and
    # whether that task was timed or not, the budget arms and the crew
    # hands the run over.
    import numpy as np

    from localsched.run import budget, threadloop
    from localsched.run.machine import RunState

    def step(i, prev):
        prev = prev[1] if type(prev) is tuple else prev
        if i == at:
            end = time.perf_counter() + 3e-3
            while time.perf_counter() < end:
                pass
            return (np.ones(2 * 10**6), prev + 1)  # (16 MB)
        return prev + 1

    def both(big, last):
        return float(big[0].sum()) + last

    monkeypatch.setattr(budget.Budget, "poll", 1e9)
    monkeypatch.setattr(budget, "POLL", 1e9)
    dsk: dict = {("c", 0): (step, 0, 0)}
    for i in range(1, 400):
        dsk[("c", i)] = (step, i, ("c", i - 1))
    dsk["out"] = (both, ("c", at), ("c", 399))
    machine = RunState(dsk, ["out"])
    watching = _budget_for(machine, "40MB", monkeypatch)  # (arms at 12 MB)
    crew = threadloop.Crew(machine, machine.mover(views=False), watching, views=False)
    crew.work()
    assert crew.failure is None and watching.armed and crew.handover
    assert 0 < machine.remaining <= 400 - at  # (handed over at the task or after, not at the end)


def test_a_task_completed_during_a_hand_over_still_arms_a_watching_budget(monkeypatch):
    # "small" makes a result that may be large while "huge" runs: the crew
    # (allowed to hold nothing: see "Results that count") hands the run
    # over.  "huge" then ends (a long task, 30 MB, over the
    # 20 MB budget; the RSS flat): its completion, in the crew, is where
    # the budget reads and arms, naming it (the pool loop would find out
    # only when "out" is prepared; about 1 run in 6 of
    # test_budget's cannot-fit test named "out" before this was fixed).
    import numpy as np

    from localsched.run import budget, threadloop
    from localsched.run.budget import MemoryBudgetError

    started, handed = threading.Event(), threading.Event()
    hand_over = threadloop.Crew._hand_over

    def spy(self):
        hand_over(self)
        handed.set()

    monkeypatch.setattr(threadloop.Crew, "_hand_over", spy)
    monkeypatch.setattr(threadloop.Crew, "_limit_held", lambda self: 0)
    monkeypatch.setattr(budget.Budget, "_real_memory", lambda self: 10**9)

    def small():
        assert started.wait(30)
        return [0] * 1000

    def huge():
        started.set()
        assert handed.wait(30)
        end = time.perf_counter() + 3e-3
        while time.perf_counter() < end:
            pass
        return np.ones(30 * 10**6 // 8)

    dsk = {"small": (small,), "huge": (huge,),
           "out": (lambda a, b: len(a) + len(b), "small", "huge")}
    with pytest.raises(MemoryBudgetError, match="'huge'"):
        threaded.get(dsk, "out", num_workers=2, memory_limit="20MB")
