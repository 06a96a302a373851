"""Edges of the schedulers a user meets (issue 27, "Scheduler"): what one
computation remembers must not slow or corrupt the next, a failure or a
dead worker is recorded where the post-mortem looks, and Ctrl-C stops
what it interrupted."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from localsched import multiprocessing as lmp
from localsched import threaded
from localsched.local import get_sync
from tests.support.platform_marks import needs_posix_signals

# -- a remembered task time ---------------------------------------------------------


def _load(barrier, i):
    """A large result (it crosses processes through shared memory); with a
    barrier, a slow one that must meet a task of another worker first."""
    if barrier is not None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return "never met"
        time.sleep(0.05)  # (longer than any batch budget: each goes alone once timed)
    return np.full(1 << 15, i, dtype="f8")


def _first(a):
    return a if isinstance(a, str) else float(a[0])


def _loads(barrier, n: int) -> dict:
    """Loads, each read by a task with a small result, all of them by a
    last one ("total-0": the output)."""
    dsk: dict = {("load", i): (_load, barrier, i) for i in range(n)}
    dsk.update({("first", i): (_first, ("load", i)) for i in range(n)})
    dsk["total-0"] = (list, [("first", i) for i in range(n)])
    return dsk


def test_a_time_learned_in_another_computation_never_grows_a_batch():
    # A pipeline tried on fast tasks, then run on slow ones (same functions
    # and key names): the remembered mean must not let one worker take
    # every ready task but one per other worker.  Here each slow task must
    # meet a task running in the other worker: with a batch of many, the
    # second task of the batch waits for a partner that never comes.
    import multiprocessing

    n = 16
    lmp.get(_loads(None, n), "total-0", num_workers=2)  # fast: learned
    manager = multiprocessing.get_context("spawn").Manager()
    try:
        barrier = manager.Barrier(2, timeout=30)  # (a regression breaks it, never hangs)
        out = lmp.get(_loads(barrier, n), "total-0", num_workers=2)
    finally:
        manager.shutdown()
    assert list(out) == list(range(n))


def _plan(dsk, keys, spare: int):
    from localsched.run.batching import Planner
    from localsched.run.machine import RunState

    planner = Planner(RunState(dsk, keys), learn=True)  # (as processes plan)
    return planner, planner.next_batch(spare)


def _learn_all(dsk, keys, seconds: float, large=("load", "slow-0")) -> None:
    """A computation of ``dsk`` whose tasks took ``seconds`` each, those
    of ``large`` (key names) with results through shared memory."""
    from localsched.utils import key_split

    planner, _ = _plan(dsk, keys, 0)
    for i, key in enumerate(planner.run.keys):
        planner.observe(i, seconds)
        if key_split(key) in large:
            planner.large_result(i)
    planner.remember()


@pytest.mark.parametrize("spare", [0, 3])
def test_a_recalled_mean_takes_one_task_of_its_group_per_batch(spare):
    dsk = _loads(None, 32)
    _learn_all(dsk, "total-0", 1e-4)  # fast, large results: 32 fit a batch's budget
    planner, batch = _plan(dsk, "total-0", spare)
    names = [planner.run.keys[i][0] for i in batch]
    assert names == ["load", "first"]  # (the large result's placement still holds)
    # Once this run has timed the group, its own timing decides.
    planner.observe(batch[0], 0.5)
    assert planner.estimate(batch[0]) == pytest.approx(0.5)
    assert len(planner.next_batch(spare)) == 1


def test_a_recalled_mean_may_cut_a_batch():
    # A chain of a recalled-slow group after a group this run timed as
    # fast: the recalled time stops the batch before it.
    from localsched.run.batching import Planner
    from localsched.run.machine import RunState

    dsk = {"slow-0": (_slow, 0)}
    _learn_all(dsk, ["slow-0"], 1.0)
    dsk = {"fast-0": (_fast, 0), "fast-1": (_fast, "fast-0"), "slow-0": (_slow, "fast-1")}
    planner = Planner(RunState(dsk, ["slow-0"]), learn=True)
    index = planner.run.keys.index
    planner.observe(index("fast-0"), 1e-5)
    planner.large_result(index("fast-0"))
    assert [planner.run.keys[i] for i in planner.next_batch()] == ["fast-0", "fast-1"]


def _fast(x):
    return x


def _slow(x):
    return x


# -- the caller's cache after a failure ---------------------------------------------


def _step(x, fail_at):
    if x == fail_at:
        raise ValueError(f"step {x} fails")
    return x + 1


def _steps(n: int, fail_at) -> dict:
    dsk = {"step-0": (_step, 0, fail_at)}
    dsk.update({f"step-{i}": (_step, f"step-{i - 1}", fail_at) for i in range(1, n)})
    return dsk


GETS = {"sync": lambda dsk, keys, **kw: get_sync(dsk, keys, **kw),
        "threads": lambda dsk, keys, **kw: threaded.get(dsk, keys, num_workers=2, **kw),
        "processes": lambda dsk, keys, **kw: lmp.get(dsk, keys, num_workers=2, **kw)}


@pytest.mark.parametrize("scheduler", list(GETS))
def test_a_failure_leaves_only_returned_values_in_the_callers_cache(scheduler):
    get = GETS[scheduler]
    n = 40
    cache: dict = {}
    # (a chain: after its first task is timed, the rest runs as one batch,
    # whose results only its next task uses stay in the worker)
    with pytest.raises(ValueError, match="step 30 fails"):
        get(_steps(n, 30), f"step-{n - 1}", cache=cache)
    assert all(v == int(k.split("-")[1]) + 1 for k, v in cache.items()), cache
    assert get(_steps(n, None), f"step-{n - 1}", cache=cache) == n


# -- a task whose worker died --------------------------------------------------------


def _die(_):
    import os

    os._exit(3)


def _kill_myself(_):
    import psutil

    psutil.Process().kill()  # (SIGKILL; TerminateProcess on Windows)


@pytest.mark.parametrize("how", [_die, _kill_myself])
def test_a_task_whose_worker_died_is_recorded_as_failed(how):
    from localsched.diagnostics import Profiler

    dsk = {"a-0": (inc, 1), "dies-0": (how, "a-0"), "after-0": (inc, "dies-0")}
    with Profiler() as prof, pytest.raises(lmp.WorkerDiedError, match="task 'dies-0'"):
        lmp.get(dsk, "after-0", num_workers=2)
    (failed,) = prof.failed
    assert failed.key == "dies-0" and failed.exc_type == "WorkerDiedError"
    assert "dies-0" not in [t.key for t in prof.interrupted]
    assert [r.key for r in prof.results] == ["a-0"]
    summary = prof.summary()
    assert summary.failed == 1
    # The pool replaced the worker: the next computation works.
    assert lmp.get(dsk, "a-0", num_workers=2) == 2


def _use(lock, x):
    return x


def test_a_task_that_cannot_be_sent_to_a_worker_is_recorded_as_failed():
    from localsched.diagnostics import Profiler

    dsk = {"a-0": (inc, 1), "b-0": (_use, threading.Lock(), "a-0")}
    with Profiler() as prof, pytest.raises(TypeError, match="pickle"):
        lmp.get(dsk, "b-0", num_workers=1)
    (failed,) = prof.failed
    assert failed.key == "b-0" and failed.exc_type == "TypeError"


def _chain_step(x, _extra=None):
    return x + 1


def test_only_the_task_that_cannot_be_sent_is_recorded_as_failed_not_its_batch():
    # A chain runs in one batch once its first task is timed; one task of
    # it holds something that cannot be pickled.  The post-mortem and the
    # error name that task, not the whole batch (the others never ran).
    from localsched.diagnostics import Profiler

    dsk = {"step-0": (_chain_step, 0)}
    dsk.update({f"step-{i}": (_chain_step, f"step-{i - 1}") for i in range(1, 10)})
    dsk["step-5"] = (_chain_step, "step-4", threading.Lock())
    with Profiler() as prof, pytest.raises(TypeError, match="pickle") as info:
        lmp.get(dsk, "step-9", num_workers=2)
    assert [f.key for f in prof.failed] == ["step-5"]
    assert prof.summary().failed == 1
    assert "while sending task 'step-5'" in info.value.__notes__


def inc(x):
    return x + 1


# -- Ctrl-C while the process pool starts ------------------------------------------


def _pool_threads() -> list:
    return [t for t in threading.enumerate() if t.name == "localsched-process-pool"]


@needs_posix_signals
@pytest.mark.parametrize("started", [1, 2, 3])
def test_ctrl_c_while_the_process_pool_starts_stops_what_it_started(monkeypatch, started):
    # The interrupt reaches the caller's thread after ``started`` of the
    # pool's 3 workers were started (Ctrl-C at a terminal signals the main
    # thread; here, the listener thread signals it at that point).
    import signal

    import psutil

    from localsched._pool import listener

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    spawned = []
    real_start = listener.start_worker

    def start_worker(*args):
        w = real_start(*args)
        spawned.append(w.pid)
        if len(spawned) == started:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        return w

    monkeypatch.setattr(listener, "start_worker", start_worker)
    with pytest.raises(KeyboardInterrupt):
        lmp.get({"a-0": (inc, 1)}, "a-0", num_workers=3)
    monkeypatch.setattr(listener, "start_worker", real_start)
    # What the interrupted start started is stopped: its listener thread,
    # and every worker process it spawned.
    assert not _pool_threads()
    assert spawned and not [pid for pid in spawned if psutil.pid_exists(pid)
                            and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
    # ... and the next computation works.
    assert lmp.get({"a-0": (inc, 1)}, "a-0", num_workers=3) == 2


# -- Ctrl-C in the first moments of a processes computation ------------------------

# The script: a computation whose pool's workers are still starting (their
# interpreters stay in start-up: ``sitecustomize`` below) when Ctrl-C comes.
# Waiting for a worker to finish starting only to tell it to stop took a
# second or more at exit under load; here it would take STOP_GRACE, made
# longer than the test's timeout.
_EARLY_SCRIPT = """
import os, signal, sys, threading, time
from localsched import multiprocessing as lmp
from localsched._pool import listener
listener.STOP_GRACE = 600.0
os.environ["LOCALSCHED_TEST_SLOW_BOOT"] = "1"  # (read by the workers' sitecustomize)

def pending():  # Ctrl-C once the first batches wait for the starting workers
    while not lmp._shared._pools:
        time.sleep(0.01)
    (pool,) = lmp._shared._pools.values()
    while not pool._pending:
        time.sleep(0.01)
    print("workers", *pool.pids, flush=True)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=pending, daemon=True).start()
try:
    lmp.get({("x", i): (abs, i) for i in range(4)}, [("x", i) for i in range(4)],
            num_workers=2)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""

_SLOW_BOOT = """
import os, time
if os.environ.get("LOCALSCHED_TEST_SLOW_BOOT"):
    time.sleep(120)
"""


@needs_posix_signals
def test_ctrl_c_in_a_computations_first_moments_does_not_wait_for_starting_workers(tmp_path):
    import os
    import subprocess
    import sys

    import psutil

    (tmp_path / "sitecustomize.py").write_text(_SLOW_BOOT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    try:
        done = subprocess.run([sys.executable, "-c", _EARLY_SCRIPT], env=env, timeout=60,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode()
        for pid in out.splitlines()[0].split()[1:] if out else ():
            psutil.Process(int(pid)).kill()  # (still in start-up: nothing else stops them)
        raise AssertionError(f"the process did not exit: {out!r}") from None
    lines = done.stdout.splitlines()
    assert lines[-1] == "interrupted" and done.returncode == 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    pids = [int(p) for p in lines[0].split()[1:]]
    assert len(pids) == 2
    for pid in pids:  # (killed, not left behind)
        try:
            psutil.Process(pid).wait(timeout=10)
        except psutil.NoSuchProcess:
            pass


# -- Ctrl-C during a threads get nested in a task ------------------------------------


@needs_posix_signals
def test_ctrl_c_during_a_nested_threads_get_does_not_wait_for_its_tasks():
    # The outer task runs in the caller's thread (sync), so Ctrl-C lands in
    # the nested get's loop; its tasks cannot be stopped (threads), so it
    # must not wait for them.
    import signal

    release = threading.Event()
    started = threading.Semaphore(0)
    ended: list = []

    def blocked(i):
        started.release()
        release.wait(30)  # (a regression waits here: the test fails, never hangs)
        ended.append(i)
        return i

    def outer():
        return threaded.get({("b", i): (blocked, i) for i in range(2)},
                            [("b", i) for i in range(2)], num_workers=2)

    def interrupt_once_both_run():
        for _ in range(2):
            started.acquire(timeout=30)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    helper = threading.Thread(target=interrupt_once_both_run)
    helper.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            get_sync({"outer-0": (outer,)}, "outer-0")
        assert not ended  # the nested tasks still run: get did not wait for them
    finally:
        release.set()
        helper.join()
    nested = [t for t in threading.enumerate() if t.name.startswith("localsched-nested")]
    for t in nested:  # (they end with their tasks)
        t.join(10)
    assert sorted(ended) == [0, 1] and not any(t.is_alive() for t in nested)


@pytest.mark.parametrize("scheduler", list(GETS))
def test_a_failure_leaves_only_returned_values_in_the_state_callbacks_see(scheduler):
    from localsched.callbacks import Callback

    seen: dict = {}

    def finish(dsk, state, errored):
        seen.update(state["cache"])

    n = 40
    with pytest.raises(ValueError, match="step 30 fails"):
        GETS[scheduler](_steps(n, 30), f"step-{n - 1}", callbacks=[Callback(finish=finish)])
    # (a result that never left its worker is not there at all)
    assert all(v == int(k.split("-")[1]) + 1 for k, v in seen.items()), seen
