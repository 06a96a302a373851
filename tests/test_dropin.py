"""Drop-in for dask's local schedulers: the graph spec, dask's options and
config, callback semantics, Ctrl-C, tracebacks.  Each test is a defect a
dask user hit in their first hour (all failed before the fix)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from operator import add

import pytest

import localsched
from localsched import threaded
from localsched.callbacks import Callback, Needs
from localsched.local import get_sync
from localsched.multiprocessing import get as get_processes
from tests.support.platform_marks import needs_fork, needs_posix_signals

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module

SCHEDULERS = {
    "sync": get_sync,
    "threads": threaded.get,
    "processes": lambda dsk, keys, **kw: get_processes(dsk, keys, num_workers=2, **kw),
}


@pytest.fixture(params=list(SCHEDULERS))
def get(request):
    return SCHEDULERS[request.param]


def inc(x):
    return x + 1


# -- 1. the graph spec ------------------------------------------------------------


def test_lists_holding_tasks_are_evaluated_at_any_depth(get):
    dsk = {"a": [1, 2, 3], "b": [1, 2, 3], "c": [1, (inc, 1)],
           "f": [[[(sum, "a"), "c"], (sum, "b")], 2]}
    assert get(dsk, ["c", "f"]) == ([1, 2], [[[6, [1, 2]], 6], 2])


def test_dask_taskref_is_an_alias_in_a_graph_and_in_arguments(get):
    from dask._task_spec import TaskRef

    dsk = {"a": 1, "b": TaskRef("a"), "c": (inc, TaskRef("b")), "d": [TaskRef("a"), (inc, 5)]}
    assert get(dsk, ["b", "c", "d"]) == (1, 2, [1, 6])


def test_a_taskref_to_a_missing_key_names_it():
    from dask._task_spec import TaskRef

    with pytest.raises(KeyError, match="'nope'.*needed by task 'b'"):
        get_sync({"b": (inc, TaskRef("nope"))}, "b")


def test_delayed_of_a_dask_array_and_bag_give_their_data():
    np = pytest.importorskip("numpy")
    da = pytest.importorskip("dask.array")
    db = pytest.importorskip("dask.bag")
    from dask import delayed

    x = da.arange(10, chunks=5)
    b = db.from_sequence([1, 2, 3], npartitions=2)
    for get in SCHEDULERS.values():
        np.testing.assert_array_equal(delayed(x).compute(scheduler=get), np.arange(10))
        assert delayed(b).compute(scheduler=get) == [1, 2, 3]


# -- 2. dask's options, config and forwarded keywords ----------------------------


def _meet_all(n):
    barrier = threading.Barrier(n, timeout=20)

    def meet(i):
        barrier.wait()  # BrokenBarrierError (not a hang) if fewer run at once
        return i

    return {f"m{i}": (meet, i) for i in range(n)}, [f"m{i}" for i in range(n)]


def test_a_given_pool_sets_how_many_tasks_run_at_once():
    dsk, keys = _meet_all(20)
    with ThreadPoolExecutor(20) as pool:
        assert threaded.get(dsk, keys, pool=pool) == tuple(range(20))
    from multiprocessing.pool import ThreadPool

    dsk, keys = _meet_all(6)
    with ThreadPool(6) as pool:
        assert threaded.get(dsk, keys, pool=pool) == tuple(range(6))


def test_dask_config_is_honoured_without_keywords():
    dask = pytest.importorskip("dask")
    running = []
    peak = []
    lock = threading.Lock()

    def task(i):
        with lock:
            running.append(i)
            peak.append(len(running))
        time.sleep(0.005)
        with lock:
            running.remove(i)
        return i

    dsk = {f"t{i}": (task, i) for i in range(8)}
    with dask.config.set(num_workers=1):
        threaded.get(dsk, list(dsk))
    assert max(peak) == 1
    # pool= from the config, with its size
    dsk, keys = _meet_all(5)
    with ThreadPoolExecutor(5) as pool, dask.config.set(pool=pool):
        assert threaded.get(dsk, keys) == tuple(range(5))


def test_rerun_exceptions_locally_from_dask_config():
    dask = pytest.importorskip("dask")

    def where(_):
        raise ValueError(threading.get_ident())

    with dask.config.set(rerun_exceptions_locally=True):
        with pytest.raises(ValueError) as info:
            threaded.get({"a": 1, "b": (where, "a")}, "b")
    assert info.value.args == (threading.get_ident(),)


@needs_fork
def test_multiprocessing_context_from_dask_config():
    dask = pytest.importorskip("dask")
    import localsched.multiprocessing as lmp

    with dask.config.set({"multiprocessing.context": "fork"}):
        assert lmp.get({"x": (inc, 1)}, "x", num_workers=1) == 2
    assert any(key[1] == "fork" for key in lmp._shared._pools)


def test_keywords_dask_compute_forwards_are_accepted(get):
    da = pytest.importorskip("dask.array")
    import dask

    x = da.ones(10, chunks=5)
    assert x.sum().compute(scheduler=get, optimize_graph=False) == 10
    assert dask.compute(x.sum(), scheduler=get, initializer=None) == (10,)
    assert get({"a": 1}, "a", optimize_graph=False, traverse=True, workers=None) == 1


@pytest.mark.parametrize("name", ["localsched.local.get_sync", "localsched.threaded.get",
                                  "localsched.multiprocessing.get"])
def test_a_typo_still_names_the_option_and_the_close_match(name):
    module, func = name.rsplit(".", 1)
    get = getattr(__import__(module, fromlist=[func]), func)
    with pytest.raises(TypeError, match=r"'num_worker'.*did you mean 'num_workers'"):
        get({"a": 1}, "a", num_worker=2)
    with pytest.raises(TypeError, match=r"'chunk_size'.*did you mean 'chunksize'"):
        get({"a": 1}, "a", chunk_size=2)


def test_keywords_meant_for_some_other_scheduler_are_ignored_as_dask_does(get):
    # dask's own *_compute_forward_kwargs tests pass exactly this.
    import dask

    assert dask.delayed(abs)(-1).compute(scheduler=get, bogus_keyword=10) == 1


def _with_lock(lock, i):
    with lock:
        return i


def test_a_multiprocessing_manager_lock_works_inside_process_tasks():
    # Spawned workers share the parent's authkey, as multiprocessing's do.
    import multiprocessing

    with multiprocessing.get_context("spawn").Manager() as manager:
        lock = manager.Lock()
        assert get_processes({"a": (_with_lock, lock, 1)}, "a", num_workers=1) == 1


def test_dask_scheduler_by_name_with_localsched_config():
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler=localsched.get):
        assert dask.delayed(inc)(1).compute() == 2


# -- 3. callback semantics --------------------------------------------------------


def test_callback_active_is_empty_inside_a_task(get):
    seen = []

    def look(_):
        return len(Callback.active)

    with Callback(pretask=lambda key, dsk, state: seen.append(key)):
        assert get({"a": 1, "b": (look, "a")}, "b") == 0
    assert seen == ["b"]


def test_a_task_registers_its_own_callbacks_for_its_nested_get():
    inner_keys = []

    def nested(_):
        with Callback(pretask=lambda key, dsk, state: inner_keys.append(key)):
            assert len(Callback.active) == 1
            return get_sync({"inner": (inc, 1)}, "inner")

    outer = []
    with Callback(pretask=lambda key, dsk, state: outer.append(key)):
        assert threaded.get({"a": 1, "b": (nested, "a")}, "b") == 2
    assert inner_keys == ["inner"] and outer == ["b"]
    assert not Callback.active


def test_callbacks_given_per_call_replace_the_registered_ones(get):
    registered, given = [], []
    with Callback(pretask=lambda key, dsk, state: registered.append(key)):
        get({"x": (inc, 1)}, "x", callbacks=[Callback(pretask=lambda k, d, s: given.append(k))])
        assert registered == [] and given == ["x"]
        get({"y": (inc, 1)}, "y")
    assert registered == ["y"]


def test_the_same_callback_entered_twice_stays_until_the_outermost_exit():
    cb = Callback(pretask=lambda key, dsk, state: None)
    with cb:
        with cb:
            assert cb._callback in Callback.active
        assert cb._callback in Callback.active
    assert cb._callback not in Callback.active


def test_one_callback_entered_from_two_threads_never_raises():
    cb = Callback(pretask=lambda key, dsk, state: None)
    both_in = threading.Barrier(2, timeout=20)
    first_out = threading.Event()
    errors = []

    def other():
        try:
            with cb:
                both_in.wait()
                assert first_out.wait(20)
                assert cb._callback in Callback.active  # still mine
        except BaseException as exc:  # noqa: B036 -- reported below
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    try:
        with cb:
            both_in.wait()
        first_out.set()
    finally:
        first_out.set()
        t.join()
    assert errors == []
    assert cb._callback not in Callback.active


def test_state_views_agree_with_the_run_at_every_step(get):
    dsk = {("x", i): (inc, i) for i in range(30)}
    dsk.update({("y", i): (add, ("x", i), ("x", i + 1)) for i in range(29)})
    dsk["z"] = (sum, [("y", i) for i in range(29)])
    problems = []

    def check(key, dsk_, state):
        counted = (len(state["ready"]) + len(state["waiting"]) + len(state["running"])
                   + len(state["finished"]))
        if counted != state.ntasks:
            problems.append((key, counted))
        for k in state["waiting"]:
            if not state["waiting"][k]:
                problems.append(("waiting without unfinished inputs", k))
        for k in state["waiting_data"]:
            if k not in state["cache"]:
                problems.append(("waiting_data of a key not cached", k))

    assert get(dsk, "z", callbacks=[Callback(pretask=check, posttask=lambda k, r, d, s, w:
                                             check(k, d, s))]) == sum(
        2 * i + 3 for i in range(29))
    assert problems == []


def test_state_fields_can_be_read_from_another_thread_during_the_run(get):
    # dask's ProgressBar reads ready/waiting/running from its timer thread.
    stop = threading.Event()
    errors = []
    reads = []

    def reader(state):
        while not stop.wait(0.0002):  # (pacing only: a read every 0.2 ms)
            try:
                reads.append(sum(len(state[k]) for k in
                                 ("ready", "waiting", "running", "waiting_data")))
            except Exception as exc:  # noqa: BLE001 -- collected, asserted below
                errors.append(exc)
                return

    threads = []

    def start_state(dsk, state):
        t = threading.Thread(target=reader, args=(state,))
        threads.append(t)
        t.start()

    def finish(dsk, state, errored):
        stop.set()
        threads[0].join()

    dsk = {("x", i): (inc, i) for i in range(1500)}
    dsk.update({("y", i): (add, ("x", i), ("x", i + 1)) for i in range(1499)})
    dsk["z"] = (sum, [("y", i) for i in range(1499)])
    for _ in range(4):
        stop.clear()
        threads.clear()
        get(dsk, "z", callbacks=[Callback(start_state=start_state, finish=finish)])
    assert errors == [] and reads


def test_dask_progressbar_around_localsched_sees_the_whole_run(get):
    dask_progress = pytest.importorskip("dask.diagnostics.progress")
    import io

    out = io.StringIO()
    dsk = {("x", i): (inc, i) for i in range(50)}
    dsk["total"] = (sum, list(dsk))
    with dask_progress.ProgressBar(out=out, dt=0.001):
        assert get(dsk, "total") == sum(range(1, 51))
    assert "100% Completed" in out.getvalue()


# -- 6. Ctrl-C ---------------------------------------------------------------------


@needs_posix_signals
def test_after_ctrl_c_the_next_computation_does_not_wait_for_abandoned_tasks():
    release = threading.Event()
    started = threading.Event()

    def long_task():
        started.set()
        release.wait(60)
        return 1

    main = threading.get_ident()

    def interrupter():
        if started.wait(30):
            signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=interrupter)
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            threaded.get({"long": (long_task,)}, "long", num_workers=1)
        # The abandoned task still holds its thread; a new computation with
        # the same settings must not queue behind it.
        assert not release.is_set()
        assert threaded.get({"x": (inc, 1)}, "x", num_workers=1) == 2
    finally:
        release.set()
        t.join()


@needs_posix_signals
def test_after_ctrl_c_the_program_exits_without_waiting_for_running_tasks(tmp_path):
    script = tmp_path / "interrupted.py"
    script.write_text(textwrap.dedent("""
        import os, signal, threading, time
        import localsched

        def long_task():
            # Ctrl-C arrives while this runs (and would run for longer
            # than the test may: a script that waited for it times out).
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(600)

        try:
            localsched.get({"long": (long_task,)}, "long")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=100, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.stdout.strip() == "interrupted", proc.stderr
    assert proc.returncode == 0  # (and it did not wait for the 600 s task)


# -- 8. tracebacks ------------------------------------------------------------------


def user_code_that_fails(x):
    raise ValueError(f"bad {x}")


@pytest.mark.parametrize("name", ["sync", "threads"])
def test_traceback_shows_the_users_frames_without_scheduler_internals_between(name):
    get = SCHEDULERS[name]
    with pytest.raises(ValueError) as info:
        get({"a": 1, "b": (user_code_that_fails, "a")}, "b")
    frames = traceback.extract_tb(info.value.__traceback__)
    names = [f.name for f in frames]
    assert names[-1] == "user_code_that_fails"
    # Between the scheduler's own loop and the user's function: nothing.
    internals = [f for f in frames if f.name in ("run_batch", "execute", "_run_arg")]
    assert internals == []


# -- 5. memory stays depth-first under batching ---------------------------------------


class _Live:
    """Counts live result objects (this process), and their peak."""

    def __init__(self):
        self.lock = threading.Lock()
        self.live = self.peak = 0

    def made(self):
        with self.lock:
            self.live += 1
            self.peak = max(self.peak, self.live)

    def freed(self):
        with self.lock:
            self.live -= 1


_COUNTER = _Live()


class _Result:
    __slots__ = ("v", "__weakref__")

    def __init__(self, v):
        self.v = v
        _COUNTER.made()

    def __del__(self):
        _COUNTER.freed()


def _leaf(i):
    return _Result(i)


def _combine(a, b):
    return _Result(a.v + b.v)


def test_threaded_run_of_a_wide_tree_holds_few_results_at_once():
    # 2048 tiny leaves reduced pairwise: a sequential depth-first run holds
    # about log2(2048) + 1 = 12 results; batching held over 1000 before.
    n = 2048
    dsk = {("leaf", i): (_leaf, i) for i in range(n)}
    keys = [("leaf", i) for i in range(n)]
    level = 0
    while len(keys) > 1:
        level += 1
        nxt = []
        for j in range(0, len(keys), 2):
            dsk[("t", level, j // 2)] = (_combine, keys[j], keys[j + 1])
            nxt.append(("t", level, j // 2))
        keys = nxt
    for _ in range(2):  # the second run has every function timed: big batches
        _COUNTER.peak = _COUNTER.live
        result = threaded.get(dsk, keys[0], num_workers=2)
        assert result.v == sum(range(n))
        del result
    assert _COUNTER.peak - _COUNTER.live <= 24


class _Results(Callback):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def _posttask(self, key, result, dsk, state, worker_id):
        self.seen[key] = result


class _TimesOnly(_Results):
    needs = Needs(results=False)  # (as the Profiler, FineMetrics, ProgressBar declare)


@pytest.mark.parametrize("get", [threaded.get, get_processes], ids=["threads", "processes"])
def test_results_stay_in_the_worker_unless_a_posttask_reads_them(get):
    # One worker, one batch: a and b are made and used inside it.
    dsk = {"a": (add, 1, 1), "b": (add, "a", 1), "c": (add, "b", 1)}
    with _TimesOnly() as times:
        assert get(dsk, "c", num_workers=1) == 4
    # posttask hooks that said they read no result get None
    assert times.seen == {"a": None, "b": None, "c": None}
    with _TimesOnly() as times, _Results() as results:
        assert get(dsk, "c", num_workers=1) == 4
    # one hook that reads results: every result comes back, for every hook
    assert results.seen == times.seen == {"a": 2, "b": 3, "c": 4}
