"""What each scheduler promises beyond the shared contract."""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing.pool import ThreadPool
from operator import add

import pytest

import localsched
from localsched import multiprocessing as lmp
from localsched import threaded
from localsched.callbacks import Callback
from localsched.local import get_sync
from tests.support.gates import Gate, notify
from tests.support.platform_marks import START_METHODS, needs_posix_signals


def inc(x):
    return x + 1


def whoami(*_):
    return os.getpid()


def thread_name(*_):
    return threading.current_thread().name


# -- sync ------------------------------------------------------------------------


def test_sync_runs_in_the_callers_thread():
    assert get_sync({"x": (threading.get_ident,)}, "x") == threading.get_ident()


def test_sync_long_chain_has_no_recursion_limit():
    n = 100_000
    dsk = {"c0": 0}
    for i in range(1, n):
        dsk[f"c{i}"] = (inc, f"c{i - 1}")
    assert get_sync(dsk, f"c{n - 1}") == n - 1


def test_long_chain_on_threads_and_processes():
    dsk = {"c0": 0}
    for i in range(1, 20_000):
        dsk[f"c{i}"] = (add, f"c{i - 1}", 1)
    assert threaded.get(dsk, "c19999") == 19_999
    assert lmp.get(dsk, "c19999", num_workers=2) == 19_999


# -- threads ---------------------------------------------------------------------


def test_threads_default_pool_is_reused():
    names1 = set(threaded.get({("n", i): (thread_name, i) for i in range(20)},
                              [("n", i) for i in range(20)], num_workers=2))
    pool = threaded.default_pool(2)
    names2 = set(threaded.get({("n", i): (thread_name, i) for i in range(20)},
                              [("n", i) for i in range(20)], num_workers=2))
    assert threaded.default_pool(2) is pool
    assert all(n.startswith("localsched-worker") for n in names1 | names2)
    assert len(names1 | names2) <= 2


def test_threads_num_workers_defaults_to_cpu_count():
    threaded.get({"x": 1}, "x")
    assert (None, os.cpu_count() or 1) in threaded._pools  # (main thread, workers)


def test_threads_accept_an_executor_and_a_threadpool():
    dsk = {"a": 1, "b": (inc, "a"), "c": (thread_name, "b")}
    with ThreadPoolExecutor(2, thread_name_prefix="mine") as ex:
        assert threaded.get(dsk, "c", pool=ex).startswith("mine")
    tp = ThreadPool(2)
    try:
        assert threaded.get(dsk, ["b", "c"], pool=tp, num_workers=2)[0] == 2
    finally:
        tp.close()
        tp.join()


def test_threads_reject_a_non_pool():
    with pytest.raises(TypeError, match="pool="):
        threaded.get({"x": 1}, "x", pool="not a pool")


def test_get_inside_a_task_does_not_deadlock():
    """The outer computation holds the only worker while the inner one runs."""

    def outer(x):
        return threaded.get({"a": x, "b": (inc, "a")}, "b", num_workers=1)

    assert threaded.get({"x": 1, "y": (outer, "x")}, "y", num_workers=1) == 2


def test_num_workers_is_validated():
    with pytest.raises(ValueError, match="num_workers"):
        threaded.get({"x": 1}, "x", num_workers=0)
    with pytest.raises(ValueError, match="num_workers"):
        lmp.get({"x": 1}, "x", num_workers=-1)


def test_foreign_process_executor_works_with_pool_option():
    dsk = {"a": 1, "b": (inc, "a"), "c": (whoami, "b")}
    with ProcessPoolExecutor(1) as ex:
        b, pid = threaded.get(dsk, ["b", "c"], pool=ex)
    assert b == 2 and pid != os.getpid()


def test_threads_get_runs_on_localscheds_process_pool():
    dsk = {"a": 1, "b": (inc, "a"), "c": (whoami, "b"), "d": (lambda b: b * 10, "b")}
    with lmp.ProcessPool(2) as pool:
        b, pid, d = threaded.get(dsk, ["b", "c", "d"], pool=pool)
    assert (b, d) == (2, 20) and pid != os.getpid()


def test_threads_get_on_a_process_pool_fires_callbacks_and_raises_task_errors():
    seen = []
    cb = Callback(posttask=lambda key, result, dsk, state, wid: seen.append((key, result)))
    with lmp.ProcessPool(1) as pool:
        assert threaded.get({"a": 1, "b": (inc, "a")}, "b", pool=pool, callbacks=[cb]) == 2
        with pytest.raises(ZeroDivisionError):
            threaded.get({"a": 0, "b": (lambda x: 1 / x, "a")}, "b", pool=pool)
    assert seen == [("b", 2)]


# -- what planners learn across computations ----------------------------------------


def _chain(n: int, func=inc) -> dict:
    dsk = {"inc-0": (func, 0)}
    dsk.update({f"inc-{i}": (func, f"inc-{i - 1}") for i in range(1, n)})
    return dsk


def _first_batch(dsk, key):
    from localsched.run.batching import Planner
    from localsched.run.machine import RunState as Run

    planner = Planner(Run(dsk, key), learn=True)  # (as on processes with shared memory)
    return planner, planner.next_batch()


def _learn(dsk, key, seconds: float, large: bool) -> None:
    """A computation of ``dsk`` whose tasks took ``seconds`` each and whose
    results crossed processes through shared memory (``large``)."""
    planner, _ = _first_batch(dsk, key)
    for i in range(len(planner.run.keys)):
        planner.observe(i, seconds)
        if large:
            planner.large_result(i)
    planner.remember()


def test_large_results_start_from_what_earlier_computations_learned():
    dsk = {"inc-0": (inc, 0), "dec-0": (_dec, "inc-0")}
    # Never timed: the first task goes alone (it might be slow).
    assert _first_batch(dsk, "dec-0")[1] == [0]
    _learn(dsk, "dec-0", 1e-3, large=True)
    # Known to make large results in 1 ms: the large result and the task
    # that uses it run in one worker from the start; nothing crosses.
    assert _first_batch(dsk, "dec-0")[1] == [0, 1]
    # A new graph of the same kind (key names and functions) too, one task
    # of each group until this run has timed it (a remembered time may cut
    # a batch, never grow it: see test_sched_hardening).
    more = {**{f"inc-{i}": (inc, i) for i in range(3)},
            **{f"dec-{i}": (_dec, f"inc-{i}") for i in range(3)}}
    planner, batch = _first_batch(more, [f"dec-{i}" for i in range(3)])
    assert [planner.run.keys[i] for i in batch] == ["inc-0", "dec-0"]
    assert _first_batch(_chain(5), "inc-4")[1] == [0]


def test_only_the_same_key_name_and_function_are_recalled():
    _learn(_chain(20), "inc-19", 1e-3, large=True)

    def other(x):
        return x + 1

    assert _first_batch(_chain(20, other), "inc-19")[1] == [0]
    assert _first_batch({"dec-0": (inc, 0), "dec-1": (inc, "dec-0")}, "dec-1")[1] == [0]


def test_small_results_start_afresh_each_computation():
    dsk = _chain(20)
    _learn(dsk, "inc-19", 1e-6, large=False)
    assert _first_batch(dsk, "inc-19")[1] == [0]


def test_threads_neither_keep_nor_recall_what_was_learned():
    from localsched.run import batching
    from localsched.run.batching import Planner
    from localsched.run.machine import RunState as Run

    threaded.get(_chain(20), "inc-19")
    assert not batching._learned
    _learn(_chain(20), "inc-19", 1e-3, large=True)
    assert Planner(Run(_chain(20), "inc-19")).next_batch() == [0]  # (as threads plan)


def test_tasks_that_wait_for_each_other_meet_again_in_a_later_computation():
    # dask's test_threaded warms its pool up this way: each task waits for
    # the other at a barrier, so they must run side by side, every time.
    barrier = threading.Barrier(2, timeout=30)  # (a regression breaks it, never hangs)
    dsk = {("x", i): (barrier.wait,) for i in range(2)}
    for _ in range(3):
        assert sorted(threaded.get(dsk, list(dsk), num_workers=2)) == [0, 1]


def _big(n):
    import numpy as np

    return np.ones(n // 8)  # (crosses processes through shared memory)


def _use(a):
    return len(a)


def _meet(barrier, _):
    try:
        return barrier.wait()
    except threading.BrokenBarrierError:
        return "never met"


def _meeting_graph(barrier) -> dict:
    # A large result, then two tasks that can only end together.
    return {"big-0": (_big, 16 << 20), "use-0": (_use, "big-0"),
            "meet-0": (_meet, barrier, "use-0"), "meet-1": (_meet, barrier, "use-0"),
            "total-0": (sorted, ["meet-0", "meet-1"])}


def _learn_meeting(dsk) -> None:
    """A computation of the meeting graph: every task timed, big-0's result large."""
    planner, _ = _first_batch(dsk, "total-0")
    for i, key in enumerate(planner.run.keys):
        planner.observe(i, 1e-4)
        if key == "big-0":
            planner.large_result(i)
    planner.remember()


def test_a_batch_takes_one_task_of_a_group_timed_only_in_earlier_computations():
    dsk = _meeting_graph(None)
    _learn_meeting(dsk)
    planner, batch = _first_batch(dsk, "total-0")
    names = [planner.run.keys[i] for i in batch]
    assert names[:2] == ["big-0", "use-0"]  # the large result's placement is recalled
    assert not {"meet-0", "meet-1"} <= set(names)  # never both in one batch
    # Once this run has timed the group, its tasks batch as usual.
    meet = planner.run.keys.index("meet-0")
    assert planner.group_of[meet] in planner.fresh
    planner.observe(meet, 1e-4)
    assert planner.group_of[meet] not in planner.fresh


def test_a_batch_recalls_groups_it_meets_after_its_first_task():
    # The batch starts with a group this run has timed; the groups after it
    # are recalled as the batch grows.
    dsk = _meeting_graph(None)
    _learn_meeting(dsk)
    from localsched.run.batching import Planner
    from localsched.run.machine import RunState as Run

    planner = Planner(Run(dsk, "total-0"), learn=True)
    big = planner.run.keys.index("big-0")
    planner.observe(big, 1e-4)
    planner.large_result(big)
    names = [planner.run.keys[i] for i in planner.next_batch()]
    assert names[:2] == ["big-0", "use-0"] and not {"meet-0", "meet-1"} <= set(names)


def test_tasks_that_wait_for_each_other_meet_in_every_processes_computation():
    import multiprocessing

    manager = multiprocessing.get_context("spawn").Manager()
    try:
        for _ in range(3):  # the later ones start from what the first learned
            barrier = manager.Barrier(2, timeout=20)  # (a regression breaks it, never hangs)
            assert lmp.get(_meeting_graph(barrier), "total-0", num_workers=2) == [0, 1]
    finally:
        manager.shutdown()


def test_a_group_recalled_as_large_that_comes_back_small_loses_its_budget():
    _learn(_chain(20), "inc-19", 1e-3, large=True)
    planner, _ = _first_batch(_chain(20), "inc-19")
    assert planner.large and planner.unconfirmed
    planner.small_result(0)
    assert not planner.large and not planner.unconfirmed


def test_this_computations_timings_take_over_from_a_recalled_mean():
    _learn(_chain(20), "inc-19", 1e-4, large=True)
    planner, batch = _first_batch(_chain(20), "inc-19")
    assert planner.estimate(0) == pytest.approx(1e-4)
    planner.observe(0, 1.0)  # this run's tasks of the group are slow
    assert planner.estimate(1) == pytest.approx(1.0)  # (the recalled mean goes)
    planner.observe(1, 0.5)
    assert planner.estimate(2) == pytest.approx(0.75)


def test_the_memory_keeps_the_most_recently_used_groups(monkeypatch):
    from localsched.run import batching

    monkeypatch.setattr(batching, "MEMORY_SIZE", 3)
    for name in "abcde":
        _learn({f"{name}-0": (inc, 0), f"{name}-1": (inc, f"{name}-0")}, f"{name}-1",
               1e-3, large=True)
    assert [n for n, _ in batching._learned] == ["c", "d", "e"]
    batching.forget()
    assert not batching._learned


# -- processes -------------------------------------------------------------------


def test_processes_run_in_worker_processes_and_reuse_them():
    keys = [("w", i) for i in range(8)]
    dsk = {k: (whoami, k[1]) for k in keys}
    pids = set(lmp.get(dsk, keys, num_workers=2))
    pool_pids = set(lmp.default_pool(2).pids)
    assert os.getpid() not in pids and pids <= pool_pids
    assert set(lmp.get(dsk, keys, num_workers=2)) <= pool_pids


class Held:
    """A task result whose copies can be counted in a worker process."""

    def __init__(self, v):
        self.v = v


def held(*parts):
    return Held(sum(getattr(p, "v", p) for p in parts))


def count_held(*_):
    import gc

    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "Held")


def _reduction_tail(n: int) -> tuple[dict, str]:
    """The last steps of a reduction: step k adds result x(k+1), made
    earlier (one per level of the tree, as its frontier)."""
    dsk = {f"x{i}": (held, i) for i in range(n + 1)}
    dsk["y0"] = (held, "x0", "x1")
    for k in range(1, n):
        dsk[f"y{k}"] = (held, f"y{k - 1}", f"x{k + 1}")
    return dsk, f"y{n - 1}"


def test_a_process_batch_is_sent_at_most_max_inputs_results():
    # Each input a batch is sent is a second copy, held by the worker from
    # the batch's start: the batch closing a tree must not take its whole
    # frontier (dask's worker holds one task's inputs at a time).
    from localsched.run.batching import MAX_INPUTS, Planner
    from localsched.run.machine import DONE, READY
    from localsched.run.machine import RunState as Run

    dsk, out = _reduction_tail(9)
    sizes = {}
    for max_inputs in (None, MAX_INPUTS):
        run = Run(dsk, out)
        planner = Planner(run, max_inputs=max_inputs)
        for i in range(len(run.keys)):
            planner.observe(i, 1e-6)  # all timed, all fast
        for k in (f"x{i}" for i in range(10)):  # the frontier is done
            j = run.index[k]
            run.status[j] = DONE
            run.cache[k] = Held(0)
            for c in run.dependents[j]:
                run.waiting[c] -= 1
        run.ready[:] = [run.index["y0"]]
        run.status[run.index["y0"]] = READY
        batch = planner.next_batch()
        _, data = planner.items(batch, keep_all=False, pack_data=True)
        sizes[max_inputs] = (len(batch), len(data))
    assert sizes[None] == (9, 10)  # the whole tail, sent the whole frontier
    assert sizes[MAX_INPUTS] == (MAX_INPUTS - 1, MAX_INPUTS)


def test_processes_batches_take_few_inputs_and_workers_keep_no_result(monkeypatch):
    from localsched.run import batching

    sent = []
    items = batching.Planner.items

    def spy(self, batch, **kw):
        got = items(self, batch, **kw)
        sent.append((batch, got[1]))
        return got

    monkeypatch.setattr(batching.Planner, "items", spy)
    dsk, out = _reduction_tail(40)
    for _ in range(3):  # the later runs with every task timed
        # The frontier is known (cache=): every step takes one input from outside.
        known = {f"x{i}": Held(i) for i in range(41)}
        assert lmp.get(dsk, out, num_workers=1, cache=known).v == sum(range(41))
    assert sent and all(len(data) <= batching.MAX_INPUTS for _, data in sent)
    assert any(len(batch) > 1 for batch, _ in sent)  # (batches did form)
    # Once its jobs have ended, the worker holds none of the results it
    # made or was sent (its next job runs after them: one worker).
    assert lmp.default_pool(1).submit(count_held).result() == 0


def test_processes_ship_lambdas_and_closures():
    offset = 10
    dsk = {"a": 1, "b": (lambda x: x + offset, "a")}
    assert lmp.get(dsk, "b", num_workers=1) == 11


_initialized = []


def _init(value):
    _initialized.append(value)


def _read_init():
    return list(_initialized)


@pytest.mark.parametrize("context", START_METHODS)
def test_processes_start_methods_and_initializer(context):
    out = lmp.get({"x": (_read_init,)}, "x", num_workers=1, context=context,
                  initializer=_init, initargs=("ready",))
    assert out == ["ready"]


def test_processes_unknown_start_method():
    with pytest.raises(ValueError, match="context must be one of"):
        lmp.get({"x": 1}, "x", context="teleport")


def test_processes_chunksize_batches_are_correct():
    dsk = {("x", i): (inc, i) for i in range(500)}
    dsk["total"] = (sum, [("x", i) for i in range(500)])
    assert lmp.get(dsk, "total", num_workers=2, chunksize=50) == sum(range(1, 501))
    with pytest.raises(ValueError, match="chunksize"):
        lmp.get(dsk, "total", chunksize=0)


def _die(how):
    if how == "exit":
        os._exit(3)
    os.kill(os.getpid(), signal.SIGSEGV if how == "segv" else signal.SIGKILL)


@pytest.mark.parametrize("how, said", [
    ("exit", "exit code 3"),
    pytest.param("segv", "killed by SIGSEGV", marks=needs_posix_signals),
    pytest.param("kill", "killed by SIGKILL", marks=needs_posix_signals)])
def test_dying_worker_names_the_task_and_the_pool_recovers(how, said):
    rec = []
    cb = Callback(finish=lambda dsk, state, errored: rec.append(errored))
    dsk = {"a": 1, "fine": (inc, "a"), "doomed": (_die, how), "after": (add, "fine", "doomed")}
    with pytest.raises(lmp.WorkerDiedError) as info:
        lmp.get(dsk, "after", num_workers=2, callbacks=[cb])
    msg = str(info.value)
    assert "while running task 'doomed'" in msg and said in msg
    assert rec == [True]
    # The next computation works, on a replaced worker.
    assert lmp.get({"a": 1, "b": (inc, "a")}, "b", num_workers=2) == 2


class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("no pickling me")


def _raise_unpicklable():
    raise Unpicklable("bad")


def _return_unpicklable():
    return threading.Lock()


def test_processes_unpicklable_exception_and_result_are_explained():
    with pytest.raises(lmp.RemoteError, match="Unpicklable: bad"):
        lmp.get({"x": (_raise_unpicklable,)}, "x", num_workers=1)
    with pytest.raises(TypeError, match="could not pickle the result"):
        lmp.get({"x": (_return_unpicklable,)}, "x", num_workers=1)
    assert lmp.get({"x": (inc, 1)}, "x", num_workers=1) == 2


def test_processes_records_name_the_worker_process():
    seen = []
    cb = Callback(posttask=lambda key, res, dsk, state, wid: seen.append((wid, res)))
    lmp.get({("p", i): (whoami, i) for i in range(4)}, [("p", i) for i in range(4)],
            num_workers=2, callbacks=[cb])
    assert seen and all(wid == pid for wid, pid in seen)


def test_process_pool_rejects_bad_arguments():
    with pytest.raises(ValueError):
        lmp.ProcessPool(0)
    with pytest.raises(TypeError, match="initializer"):
        lmp.ProcessPool(1, initializer=42)
    with pytest.raises(TypeError, match="pool="):
        lmp.get({"x": 1}, "x", pool=ProcessPoolExecutor, context="spawn")


def test_process_pool_as_plain_executor_and_kill_stops_running_work():
    with lmp.ProcessPool(1) as pool, Gate() as started:
        assert pool.submit(pow, 2, 5).result() == 32
        (pid,) = pool.pids
        fut = pool.submit(_notify_then_sleep, started.address)
        started.wait()  # the task is running now
        assert fut.cancel() is False  # as concurrent.futures: running work is not cancelled
        pool.kill([fut])
        with pytest.raises(lmp.WorkerDiedError, match="killed by ProcessPool.kill"):
            fut.result(timeout=30)
        assert pool.submit(pow, 3, 2).result() == 9
        assert pool.pids != [pid]


def _notify_then_sleep(address):
    import time

    notify(address)
    time.sleep(60)


def test_scheduler_names_in_compute():
    x = localsched.delayed(inc)(1)
    for name in ("threads", "threading", "processes", "multiprocessing", "sync",
                 "synchronous", "single-threaded"):
        assert localsched.compute(x, scheduler=name) == (2,)
    with pytest.raises(ValueError, match="unknown scheduler 'gpu'"):
        localsched.compute(x, scheduler="gpu")


def test_a_batch_stopped_at_its_limit_recalls_no_group_it_does_not_take():
    # (Batches that start elsewhere recall nothing: a group recalled by a
    # batch that never took its task would no longer go alone later.)
    from localsched.run.batching import Planner
    from localsched.run.machine import RunState as Run

    dsk = {"inc-0": (inc, 0), "mid-0": (_mid, "inc-0"), "dec-0": (_dec, "mid-0")}
    _learn({k: dsk[k] for k in ("inc-0", "mid-0")}, "mid-0", 1e-3, large=True)
    _learn({"dec-0": (_dec, 0)}, "dec-0", 1e-3, large=False)
    planner = Planner(Run(dsk, "dec-0"), learn=True, limit=2)
    assert planner.next_batch() == [0, 1]
    assert planner.looked == {planner.group_of[0]: (1e-3, True),
                              planner.group_of[1]: (1e-3, True)}


def _dec(x):
    return x - 1


def _mid(x):
    return x
