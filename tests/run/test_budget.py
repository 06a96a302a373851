"""A memory budget (issue #34): ``memory_limit=`` on every local scheduler.

The workloads' bars (peak real memory, measured from outside, within
1.1 x budget + 100 MB, where dask's threaded scheduler holds 3x the budget)
are in ``test_budget_workloads.py``; here: the forms of a limit, the config,
the budget's choices and errors, and what a run leaves behind.
"""

from __future__ import annotations

import os
import threading

import dask
import numpy as np
import pytest

import localsched
from localsched.callbacks import Callback
from localsched.local import get_sync
from localsched.multiprocessing import get as mp_get
from localsched.run import budget_limits
from localsched.run.budget import MemoryBudgetError, Spilled
from localsched.run.budget_limits import parse_memory_limit
from localsched.threaded import get as threaded_get

MB = 10**6
GETS = {
    "sync": get_sync,
    "threads": lambda dsk, keys, **kw: threaded_get(dsk, keys, num_workers=2, **kw),
    "processes": lambda dsk, keys, **kw: mp_get(dsk, keys, num_workers=2, **kw),
}


def block(i, n=MB):
    """An array of ``n`` bytes (float64), its values all ``i``."""
    return np.full(n // 8, float(i))


def total(*arrays):
    return float(sum(np.sum(a) for a in arrays))


def held_graph(n=12, size=2 * MB):
    """n blocks that all wait for one fan-in, then are used again: all are
    held at once (n x size), the answer known."""
    dsk = {("x", i): (block, i, size) for i in range(n)}
    dsk.update({("s", i): (np.sum, ("x", i)) for i in range(n)})
    dsk["m"] = (sum, [("s", i) for i in range(n)])
    for i in range(n):
        dsk[("y", i)] = (np.add, ("x", i), "m")
    dsk.update({("t", i): (np.sum, ("y", i)) for i in range(n)})
    dsk["out"] = (sum, [("t", i) for i in range(n)])
    per = size // 8
    expected = sum(i * per for i in range(n))
    return dsk, "out", float(expected + n * per * expected)  # (sum of x, plus m per item)


class Outcome(Callback):
    """Keeps the run's outcome (``state.outcome``) at finish."""

    def __init__(self):
        super().__init__()
        self.outcome = None

    def _finish(self, dsk, state, errored):
        self.outcome = state.outcome


@pytest.fixture
def spill_dir(tmp_path):
    with dask.config.set({"localsched.memory.spill": True,
                          "localsched.memory.spill-directory": str(tmp_path)}):
        yield tmp_path


# -- the forms of a limit ---------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    (4_000_000, 4_000_000),
    ("4GB", 4 * 10**9),
    ("4 GiB", 4 * 2**30),
    ("512MB", 512 * MB),
    ("1.5 MiB", int(1.5 * 2**20)),
    ("1e9", 10**9),
    (0.25, 250),
    ("25%", 250),
    ("auto", 1000),
    (None, None),
    (0, None),
    ("none", None),
    (False, None),
])
def test_each_form_of_memory_limit(value, expected):
    assert parse_memory_limit(value, total=1000) == expected


@pytest.mark.parametrize("value", [-5, "lots", "4 XB", [1]])
def test_a_limit_that_is_not_one_is_refused(value):
    with pytest.raises((ValueError, TypeError)):
        parse_memory_limit(value, total=1000)


def test_auto_respects_a_container_limit(monkeypatch):
    monkeypatch.setattr(budget_limits, "machine_memory", lambda: 64 * 10**9)
    monkeypatch.setattr(budget_limits, "container_limit", lambda: 2 * 10**9)
    assert parse_memory_limit("auto") == 2 * 10**9
    assert parse_memory_limit(0.5) == 10**9
    monkeypatch.setattr(budget_limits, "container_limit", lambda: None)
    assert parse_memory_limit("auto") == 64 * 10**9


def test_container_limit_reads_cgroup_v2_then_v1(monkeypatch):
    files = {"/sys/fs/cgroup/memory/memory.limit_in_bytes": 3 * 10**9}
    monkeypatch.setattr(budget_limits, "_read_int", files.get)
    assert budget_limits.container_limit() == 3 * 10**9  # v1
    files["/sys/fs/cgroup/memory.max"] = 10**9
    assert budget_limits.container_limit() == 10**9  # v2 first
    files.clear()
    assert budget_limits.container_limit() is None


# -- where a budget comes from --------------------------------------------------------


@pytest.mark.parametrize("name", list(GETS))
def test_memory_limit_keyword_on_every_scheduler(name):
    cb = Outcome()
    dsk, key, expected = held_graph(4, 64 * 1024)
    assert GETS[name](dsk, key, memory_limit="50MB", callbacks=[cb]) == expected
    record = cb.outcome.memory
    assert (record.limit, record.target, record.pause) == (50 * MB, 30 * MB, 40 * MB)


@pytest.mark.parametrize("name", list(GETS))
def test_dask_compute_forwards_memory_limit(name):
    cb = Outcome()
    x = dask.delayed(block)(3, 80_000)
    scheduler = {"sync": get_sync, "threads": threaded_get, "processes": mp_get}[name]
    result = dask.compute(x.sum(), scheduler=scheduler, memory_limit="30MB", callbacks=[cb])
    assert result == (30_000.0,)
    assert cb.outcome.memory.limit == 30 * MB


def test_config_key_through_dask_config():
    cb = Outcome()
    with dask.config.set({"localsched.memory-limit": "20MB", "localsched.memory.target": 0.5,
                          "localsched.memory.pause": 0.7}):
        localsched.get({"a": (block, 1, 1024)}, "a", callbacks=[cb])
    record = cb.outcome.memory
    assert (record.limit, record.target, record.pause) == (20 * MB, 10 * MB, 14 * MB)


def test_keyword_wins_over_config():
    cb = Outcome()
    with dask.config.set({"localsched.memory-limit": "20MB"}):
        get_sync({"a": 1}, "a", memory_limit="30MB", callbacks=[cb])
    assert cb.outcome.memory.limit == 30 * MB


def test_a_near_miss_of_memory_limit_is_a_typo():
    with pytest.raises(TypeError, match="memory_limit"):
        get_sync({"a": 1}, "a", memory_limt="1GB")


# -- no budget: nothing changes ---------------------------------------------------------


@pytest.mark.parametrize("name", list(GETS))
def test_no_budget_no_budget_object(name, monkeypatch):
    import localsched.run.budget as budget

    def refuse(*a, **k):
        raise AssertionError("a Budget was made without a budget")

    monkeypatch.setattr(budget.Budget, "__init__", refuse)
    cb = Outcome()
    dsk, key, expected = held_graph(4, 64 * 1024)
    assert GETS[name](dsk, key, callbacks=[cb]) == expected
    assert cb.outcome.memory is None


# -- spilling -----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(GETS))
def test_spills_and_reads_back_within_the_budget(name, spill_dir):
    cb = Outcome()
    dsk, key, expected = held_graph(12, 2 * MB)  # 24 MB held at once
    assert GETS[name](dsk, key, memory_limit="12MB", callbacks=[cb]) == expected
    events = cb.outcome.memory.events
    kinds = {e[2] for e in events}
    assert kinds == {"disk-write", "disk-read"}
    assert max(t[1] for t in cb.outcome.memory.timeline) <= 12 * MB
    assert os.listdir(spill_dir) == []  # the run's directory is gone


@pytest.mark.parametrize("name", ["sync", "threads"])
def test_spills_when_the_memory_shows_no_growth(name, spill_dir, monkeypatch):
    """A process that computed before reuses the memory it freed: its RSS
    does not grow while the cache fills.  The sizes in the cache still arm
    the budget (seen in the whole suite: the test above found no spill)."""
    from localsched.run import budget

    monkeypatch.setattr(budget.Budget, "_real_memory", lambda self: 10**9)  # (flat)
    cb = Outcome()
    dsk, key, expected = held_graph(12, 2 * MB)
    assert GETS[name](dsk, key, memory_limit="12MB", callbacks=[cb]) == expected
    assert {e[2] for e in cb.outcome.memory.events} == {"disk-write", "disk-read"}


@pytest.mark.parametrize("name", ["sync", "threads"])
@pytest.mark.parametrize("watched", [False, True])
def test_spills_when_every_task_is_fast(name, watched, spill_dir, monkeypatch):
    """Tasks that fill memory the allocator reuses are fast: a run may end
    within one reading's interval, with no task long enough to count.  The
    budget still reads after a count of tasks (seen in the whole suite: the
    spill tests above found no spill on sync).  The clocks are made never
    due, the RSS flat; ``watched``: a callback measures (the other loop)."""
    from localsched.run import budget

    monkeypatch.setattr(budget.Budget, "_real_memory", lambda self: 10**9)  # (flat)
    monkeypatch.setattr(budget.Budget, "poll", 1e9)
    monkeypatch.setattr(budget.Budget, "long", 1e9)
    monkeypatch.setattr(budget, "POLL", 1e9)
    cb = Outcome()
    callbacks = [cb, Callback(posttask=lambda *a: None)] if watched else [cb]
    dsk, key, expected = held_graph(12, 2 * MB)
    assert GETS[name](dsk, key, memory_limit="12MB", callbacks=callbacks) == expected
    assert {e[2] for e in cb.outcome.memory.events} == {"disk-write", "disk-read"}


def test_spilling_is_opt_in(tmp_path):
    cb = Outcome()
    dsk, key, expected = held_graph(12, 2 * MB)
    with dask.config.set({"localsched.memory.spill-directory": str(tmp_path)}):
        with pytest.warns(ResourceWarning, match="localsched.memory.spill"):
            assert get_sync(dsk, key, memory_limit="12MB", callbacks=[cb]) == expected
    assert cb.outcome.memory.events == []
    assert os.listdir(tmp_path) == []


def test_an_output_is_read_back_for_the_caller(spill_dir):
    dsk = {("x", i): (block, i, 2 * MB) for i in range(8)}
    out = get_sync(dsk, [("x", i) for i in range(8)], memory_limit="8MB")
    assert [float(a[0]) for a in out] == [float(i) for i in range(8)]
    assert not any(type(a) is Spilled for a in out)


@pytest.mark.parametrize("fast", [False, True])
def test_the_result_used_furthest_ahead_goes_first(fast, spill_dir, monkeypatch):
    """a, b and c are all inputs of d (held: 12 MB, under the target of
    12.6 MB); d's result crosses it, and then they are used again in the
    order c (with d), b, a: a's next use is furthest away.  ``fast``: no
    task takes long and the RSS stays flat, as when the allocator reuses
    what earlier work freed -- seven tasks, fewer than a count of 16 before
    the first reading (seen in whole-suite runs: nothing was spilled)."""
    if fast:
        from localsched.run import budget

        monkeypatch.setattr(budget.Budget, "_real_memory", lambda self: 10**9)  # (flat)
        monkeypatch.setattr(budget.Budget, "long", 1e9)
    dsk = {"a": (block, 1, 4 * MB), "b": (block, 2, 4 * MB), "c": (block, 3, 4 * MB),
           "d": (lambda *arrays: block(total(*arrays), 4 * MB), "a", "b", "c"),
           "uc": (total, "c", "d"), "ub": (total, "b", "uc"), "ua": (total, "a", "ub")}
    cb = Outcome()
    get_sync(dsk, "ua", memory_limit="21MB", callbacks=[cb])
    from localsched.run.machine import RunState

    machine = RunState(dsk, "ua")
    next_use = {k: min(machine.priority[machine.index[u]] for u in users)
                for k, users in {"a": ["ua"], "b": ["ub"], "c": ["uc"]}.items()}
    written = [e[3] for e in cb.outcome.memory.events if e[2] == "disk-write"]
    assert written and written[0] == max(next_use, key=next_use.get)


# -- what cannot fit --------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(GETS))
def test_a_task_that_cannot_fit_fails_naming_it(name, spill_dir):
    dsk = {"small": (block, 1, MB), "huge": (block, 2, 30 * MB), "out": (total, "huge", "small")}
    with pytest.raises(MemoryBudgetError) as info:
        GETS[name](dsk, "out", memory_limit="20MB")
    text = str(info.value)
    assert "'huge'" in text and "20.0 MB" in text and "30.0 MB" in text
    assert os.listdir(spill_dir) == []


@pytest.mark.parametrize("name", ["sync", "threads"])
def test_a_result_over_the_budget_is_caught_when_the_memory_shows_no_growth(
        name, spill_dir, monkeypatch):
    """An allocator that reuses what earlier work freed shows no growth of
    the RSS: a long task's result that alone exceeds the budget still arms
    it (its size, read after the task), and the task is named (seen as a
    flaky pass of the test above after other tests had run)."""
    from localsched.run import budget

    monkeypatch.setattr(budget.Budget, "_real_memory", lambda self: 10**9)  # (flat)
    dsk = {"small": (block, 1, MB), "huge": (block, 2, 30 * MB), "out": (total, "huge", "small")}
    with pytest.raises(MemoryBudgetError, match=r"'huge'"):
        GETS[name](dsk, "out", memory_limit="20MB")
    assert os.listdir(spill_dir) == []


def test_a_task_whose_inputs_exceed_the_budget_never_runs(spill_dir):
    ran = []

    def join(*arrays):
        ran.append(True)
        return total(*arrays)

    dsk = {("b", i): (block, i, 12 * MB) for i in range(2)}
    dsk["c"] = (join, ("b", 0), ("b", 1))
    with pytest.raises(MemoryBudgetError, match=r"task 'c' .* inputs take 24.0 MB"):
        get_sync(dsk, "c", memory_limit="20MB")
    assert ran == []


# -- what a run leaves behind -----------------------------------------------------------


class Boom(Exception):
    pass


def _fail(*args):
    raise Boom("task failed")


def _interrupt(*args):
    raise KeyboardInterrupt


@pytest.mark.parametrize("name", list(GETS))
@pytest.mark.parametrize("how", [_fail, _interrupt])
def test_failure_or_ctrl_c_leaves_no_spill_files(name, how, spill_dir):
    if how is _interrupt and name != "sync":
        pytest.skip("a KeyboardInterrupt raised in a task is the caller's only inline")
    dsk, _, _ = held_graph(12, 2 * MB)
    dsk["boom"] = (how, "m", *[("y", i) for i in range(3)])
    with pytest.raises((Boom, KeyboardInterrupt)):
        GETS[name](dsk, "boom", memory_limit="12MB")
    assert os.listdir(spill_dir) == []


def test_no_thread_is_left_behind(spill_dir):
    before = set(threading.enumerate())
    dsk, key, expected = held_graph(8, 2 * MB)
    assert get_sync(dsk, key, memory_limit="10MB") == expected
    assert set(threading.enumerate()) <= before


# -- a budget far from its limit: rare, cheap readings ----------------------------------


def _watching_budget(limit, real_memory, processes=False):
    """A Budget on its own (no run), its real memory read from ``real_memory()``."""
    from types import SimpleNamespace

    from localsched.run import budget

    class Fake(budget.Budget):
        def _real_memory(self):
            return real_memory()

    machine = SimpleNamespace(cache={}, index={}, status=[], specs=[])
    return Fake(budget_limits.thresholds(limit), machine, SimpleNamespace(memory=None),
                processes=processes)


def test_a_budget_far_from_its_limit_reads_the_memory_rarely():
    """The wait until the next reading grows with the room left below the
    level where the budget starts counting: a budget the run never comes
    near costs next to nothing (each reading on processes reads every
    worker's memory), one near it reads every ``POLL`` s as before."""
    import time

    from localsched.run import budget

    used = [0]
    far = _watching_budget(100 * 10**9, lambda: used[0])
    assert not far.watch(False)
    assert far.due - time.monotonic() > 10 * budget.POLL
    near = _watching_budget(100 * MB, lambda: used[0])
    used[0] = near.arm_at - MB  # (1 MB below arming)
    assert not near.watch(False)
    assert near.due - time.monotonic() <= budget.POLL
    used[0] = near.arm_at
    near.due = 0.0
    assert near.watch(False)  # (reached: armed)


def _hold_in_a_worker(fifo_ready, fifo_go, n):
    """In a worker: hold ``n`` bytes (touched) until told to let go."""
    held = np.ones(n // 8)
    with open(fifo_ready, "w") as f:
        f.write("held\n")
    with open(fifo_go) as f:
        f.readline()
    return float(held[0])


@pytest.mark.timeout(120)
@pytest.mark.skipif(not os.path.exists(f"/proc/self/task/{os.getpid()}/children")
                    or not hasattr(os, "mkfifo"), reason="Linux's /proc with its children files")
@pytest.mark.parametrize("way", ["proc", "psutil"])
def test_on_processes_a_reading_counts_what_a_worker_holds(way, tmp_path, monkeypatch):
    """A reading on processes counts each worker's private memory, from the
    workers' own entries in ``/proc`` (not a scan of every process on the
    machine, as ``psutil.Process.children`` does: milliseconds a reading);
    where those cannot be read, through psutil."""
    import psutil

    from localsched.run import budget_memory
    from localsched.run.budget import Budget

    def no_scan(self, recursive=False):
        raise AssertionError("scanned every process for the workers")

    mp_get({"warm": (sum, [1, 2])}, "warm", num_workers=2)
    b = _watching_budget(10**9, lambda: 0, processes=True)
    if way == "proc":
        monkeypatch.setattr(psutil.Process, "children", no_scan)
    else:
        monkeypatch.setattr(budget_memory, "_descendants", lambda: None)
    before = Budget._real_memory(b)
    ready, go = str(tmp_path / "ready"), str(tmp_path / "go")
    os.mkfifo(ready)
    os.mkfifo(go)
    result: list = []
    t = threading.Thread(target=lambda: result.append(
        mp_get({"h": (_hold_in_a_worker, ready, go, 64 * MB)}, "h", num_workers=2)))
    t.start()
    try:
        with open(ready) as f:
            assert f.readline() == "held\n"
        during = Budget._real_memory(b)
    finally:
        with open(go, "w") as f:
            f.write("go\n")
        t.join(60)
    assert result == [1.0]
    assert during - before >= 48 * MB, (before, during)


# -- a result read back with users to come keeps its file -------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(GETS))
def test_a_result_read_back_is_never_written_twice(name, spill_dir):
    """Each block has three users far apart (its sum, then ``y`` after one
    fan-in, ``z`` after another): read back for one user and spilled again
    before the next, it is not written again -- its file stayed (each
    value was written two or three times: disk time for nothing)."""
    import collections

    dsk, _, _ = held_graph(12, 2 * MB)
    n = 12
    dsk["m2"] = (sum, [("t", i) for i in range(n)])
    dsk.update({("z", i): (np.add, ("x", i), "m2") for i in range(n)})
    dsk.update({("u", i): (np.sum, ("z", i)) for i in range(n)})
    dsk["out2"] = (sum, [("u", i) for i in range(n)])
    cb = Outcome()
    assert GETS[name](dsk, "out2", memory_limit="12MB", callbacks=[cb]) == get_sync(dsk, "out2")
    events = cb.outcome.memory.events
    writes = collections.Counter(e[3] for e in events if e[2] == "disk-write")
    assert writes and max(writes.values()) == 1, writes
    assert {e[2] for e in events} == {"disk-write", "disk-read"}
    assert os.listdir(spill_dir) == []


@pytest.mark.parametrize("watched", [False, True])
def test_a_sync_budget_that_arms_mid_run_keeps_the_order_and_the_answer(watched, monkeypatch):
    """On sync, a watching budget rides the loop a run without one takes
    (the plain one, or with callbacks the observed one); when it arms, the
    measured loop takes over the run where it stands: the same tasks in
    the same order, the same answer."""
    from operator import add

    from localsched.run import budget
    from localsched.run.machine import DONE

    def run(**kw):
        log: list = []

        def leaf(i):
            log.append(i)
            return i

        dsk: dict = {("x", i): (leaf, i) for i in range(64)}
        level, n = "x", 64
        while n > 1:
            dsk.update({(level + "'", i): (add, (level, 2 * i), (level, 2 * i + 1))
                        for i in range(n // 2)})
            level, n = level + "'", n // 2
        callbacks = [Callback(posttask=lambda *a: log.append("post"))] if watched else None
        return get_sync(dsk, (level, 0), callbacks=callbacks, **kw), log

    armed: list = []
    arm = budget.Budget.arm

    def noted_arm(self):
        armed.append(sum(s == DONE for s in self.machine.status))
        arm(self)

    monkeypatch.setattr(budget.Budget, "arm", noted_arm)
    monkeypatch.setattr(budget, "ARM", 0)  # (armed at the first reading: after the first task)
    plain_answer, plain_log = run()
    armed_answer, armed_log = run(memory_limit="1GB")
    assert armed and 0 < armed[0] < 127, armed  # (mid-run: tasks done, tasks left)
    assert armed_answer == plain_answer == sum(range(64))
    assert armed_log == plain_log
