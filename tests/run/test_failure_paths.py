"""Regressions: failure paths that once hung, leaked or misreported."""

from __future__ import annotations

import os
import threading
import weakref

import pytest

from localsched import multiprocessing as lmp
from localsched import threaded
from localsched.callbacks import Callback
from localsched.local import get_sync
from tests.support.gates import Gate, notify


def inc(x):
    return x + 1


class _ArrivesBroken:
    """Pickles in the worker, cannot be unpickled in the parent."""

    def __reduce__(self):
        return (_refuse, ())


def _refuse():
    if os.environ.get("LOCALSCHED_TEST_IN_WORKER") != "1":
        raise RuntimeError("cannot rebuild in parent")
    return None


def _make_broken():
    os.environ["LOCALSCHED_TEST_IN_WORKER"] = "1"
    return _ArrivesBroken()


def test_unreadable_result_fails_the_task_instead_of_hanging():
    with pytest.raises(RuntimeError, match="could not read a message from worker"):
        lmp.get({"x": (_make_broken,)}, "x", num_workers=1)
    assert lmp.get({"x": (inc, 1)}, "x", num_workers=1) == 2


def _failing_init():
    raise ValueError("init failed")


def test_failing_initializer_is_reported_and_not_respawned_forever():
    with pytest.raises(RuntimeError, match="initializer failed.*init failed"):
        lmp.get({"x": (inc, 1)}, "x", num_workers=2, initializer=_failing_init)


def test_initializer_pools_are_shared_by_value():
    for _ in range(3):
        assert lmp.get({"x": (inc, 1)}, "x", num_workers=1,
                       initializer=lambda: None, initargs=()) == 2
    assert len(lmp._shared._pools) == 1


def test_terminate_resolves_running_work():
    pool = lmp.ProcessPool(1)
    try:
        with Gate() as started:
            fut = pool.submit(_notify_then_sleep, started.address)
            started.wait()
    finally:
        pool.terminate()
    with pytest.raises(lmp.WorkerDiedError, match="the pool was terminated"):
        fut.result(timeout=30)


def _notify_then_sleep(address):
    import time

    notify(address)
    time.sleep(60)


def test_unsendable_task_is_named():
    with pytest.raises(TypeError, match="pickle") as info:
        lmp.get({"y": (inc, threading.Lock())}, "y", num_workers=1)
    assert "while sending task 'y'" in info.value.__notes__


@pytest.mark.parametrize("get", [get_sync, threaded.get, lmp.get])
def test_every_finish_hook_runs_when_one_raises(get):
    calls = []

    def bad_finish(dsk, state, errored):
        raise RuntimeError("finish failed")

    good = Callback(start=lambda dsk: calls.append("start"),
                    finish=lambda dsk, state, errored: calls.append("finish"))
    with pytest.raises(RuntimeError, match="finish failed"):
        get({"x": (inc, 1)}, "x", callbacks=[Callback(finish=bad_finish), good])
    assert calls == ["start", "finish"]


@pytest.mark.parametrize("get", [get_sync, threaded.get])
def test_get_inside_a_callback_ignores_global_callbacks(get):
    starts = []
    inner = []

    def posttask(key, result, dsk, state, wid):
        inner.append(get_sync({"y": (inc, 1)}, "y"))

    with Callback(start=lambda dsk: starts.append(1)), Callback(posttask=posttask):
        get({"x": (inc, 1)}, "x")
    assert starts == [1] and inner == [2]


def test_independent_tasks_run_concurrently_even_after_fast_ones():
    """Fast tasks measured first must not make the batcher pile dependents
    of unknown duration onto one worker: here they must meet at a barrier."""
    barrier = threading.Barrier(4, timeout=30)

    def meet(_):
        barrier.wait()
        return 1

    dsk = {("fast", i): (inc, i) for i in range(300)}
    dsk.update({("meet", j): (meet, ("fast", 0)) for j in range(4)})
    dsk["out"] = (sum, [("meet", j) for j in range(4)] + [("fast", i) for i in range(300)])
    assert threaded.get(dsk, "out", num_workers=4) == 4 + sum(range(1, 301))


class Obj:
    pass


def test_batched_chains_hold_no_more_results_than_a_sequential_run():
    live = weakref.WeakSet()
    peak = [0]

    def step(_=None):
        o = Obj()
        live.add(o)
        peak[0] = max(peak[0], len(live))
        return o

    dsk = {"t0": (step,)}
    for i in range(1, 2000):
        dsk[f"t{i}"] = (step, f"t{i - 1}")
    dsk["out"] = (len, [f"t{1999}"])
    assert threaded.get(dsk, "out", num_workers=2) == 1
    assert peak[0] <= 4


def test_chunksize_bounds_the_whole_batch():
    sizes = []
    dsk = {"c0": 0}
    for i in range(1, 500):
        dsk[f"c{i}"] = (inc, f"c{i - 1}")
    real_submit = threaded.default_pool(2).submit

    def spy(fn, *args, **kwargs):
        sizes.append(len(args[1]))  # ctx.run, run_batch, items, ...
        return real_submit(fn, *args, **kwargs)

    from concurrent.futures import Executor

    class Spy(Executor):
        submit = staticmethod(spy)

    assert threaded.get(dsk, "c499", pool=Spy(), num_workers=2, chunksize=3) == 499
    assert max(sizes) <= 3


def _log_then(path, name, fail):
    with open(path, "a", encoding="utf-8") as f:
        f.write(name + "\n")
    if fail:
        raise ValueError("boom")
    return name


def test_after_a_failure_at_most_the_batch_queued_behind_it_runs(tmp_path):
    # A process pool is handed one batch more than it has workers (it waits
    # in the pool, see core.QUEUE_AHEAD).  When a task fails, the scheduler
    # cancels that batch if the pool has not handed it to a worker yet, and
    # starts nothing more: at most one batch runs after the failing one.
    log = str(tmp_path / "log")
    dsk = {"bad": (_log_then, log, "ran-bad", True)}
    for n in "abcdef":
        dsk[n] = (_log_then, log, "ran-" + n, False)
    with pytest.raises(ValueError, match="boom"):
        lmp.get(dsk, ["bad", *"abcdef"], num_workers=1, chunksize=1)
    # The pool runs jobs in order: once this ends, the queued batch has run
    # or was cancelled.
    assert lmp.get({"z": (inc, 1)}, "z", num_workers=1) == 2
    with open(log, encoding="utf-8") as f:
        ran = f.read().split()
    assert len(ran) - ran.index("ran-bad") - 1 <= 1, ran
