"""Profiler: one TaskData per executed task, timed by the worker, on every scheduler."""

import os
import threading
import time
from operator import add, truediv

import pytest

from localsched.diagnostics.collectors.records import TaskData
from localsched.diagnostics.profile import Profiler

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module


def inc(x):
    return x + 1


def whoami(*args):
    """(pid, thread ident) of the worker running the task."""
    return os.getpid(), threading.get_ident()


def expected_worker(name, who):
    """The worker_id the scheduler ``name`` should report for a whoami() result."""
    pid, ident = who
    return pid if name == "processes" else ident


DSK = {"x": 1, "a": (inc, "x"), "b": (inc, "a"), "c": (add, "a", "b"), "w": (whoami, "c")}


def test_one_record_per_task_inside_the_call(scheduler):
    name, get = scheduler
    with Profiler() as prof:
        t0 = time.time()
        (c, who) = get(DSK, ["c", "w"])
        t1 = time.time()
    assert c == 5
    results = prof.results
    assert all(type(r) is TaskData for r in results)
    # Data key 'x' is not a task; every task appears exactly once.
    assert sorted(r.key for r in results) == ["a", "b", "c", "w"]
    for r in results:
        assert r.task == DSK[r.key]
        assert t0 <= r.start_time <= r.end_time <= t1
    # Dependencies end before their dependents start.
    by_key = {r.key: r for r in results}
    assert by_key["a"].end_time <= by_key["b"].start_time
    assert by_key["b"].end_time <= by_key["c"].start_time
    assert by_key["w"].worker_id == expected_worker(name, who)
    if name == "processes":
        assert by_key["w"].worker_id != os.getpid()


def test_worker_ids_are_threads_or_child_pids(scheduler):
    name, get = scheduler
    dsk = {f"w{i}": (whoami, i) for i in range(8)}
    with Profiler() as prof:
        whos = get(dsk, sorted(dsk))
    by_key = {r.key: r for r in prof.results}
    for key, who in zip(sorted(dsk), whos, strict=False):
        assert by_key[key].worker_id == expected_worker(name, who)
    ids = {r.worker_id for r in prof.results}
    if name == "processes":
        assert os.getpid() not in ids
    elif name == "sync":
        assert ids == {threading.get_ident()}


def test_accumulates_across_computes_and_clears(scheduler):
    _, get = scheduler
    with Profiler() as prof:
        get({"a": (inc, 1)}, "a")
        get({"b": (inc, 2), "c": (inc, "b")}, "c")
        assert [r.key for r in prof.results] == ["a", "b", "c"]
        prof.clear()
        assert prof.results == []
        get({"d": (inc, 3)}, "d")
        assert [r.key for r in prof.results] == ["d"]
    # Entering again starts afresh.
    with prof:
        assert prof.results == []
        get({"e": (inc, 4)}, "e")
    assert [r.key for r in prof.results] == ["e"]
    # Outside the block nothing is recorded.
    get({"f": (inc, 5)}, "f")
    assert [r.key for r in prof.results] == ["e"]


def test_error_keeps_what_ran(scheduler):
    _, get = scheduler
    dsk = {"a": (inc, 1), "b": (truediv, "a", 0), "c": (inc, "b")}
    with Profiler() as prof:
        with pytest.raises(ZeroDivisionError):
            get(dsk, "c")
    keys = [r.key for r in prof.results]
    assert "a" in keys
    assert "c" not in keys


def test_register_and_per_call_callbacks():
    from localsched.local import get_sync

    prof = Profiler()
    prof.register()
    try:
        get_sync({"a": (inc, 1)}, "a")
    finally:
        prof.unregister()
    get_sync({"b": (inc, 1)}, "b")
    assert [r.key for r in prof.results] == ["a"]

    prof2 = Profiler()
    get_sync({"c": (inc, 1)}, "c", callbacks=[prof2])
    assert [r.key for r in prof2.results] == ["c"]


def test_results_built_lazily_and_incrementally():
    from localsched.local import get_sync

    with Profiler() as prof:
        get_sync({"a": (inc, 1)}, "a")
        first = prof.results
        get_sync({"b": (inc, 1)}, "b")
        second = prof.results
    assert first[0] is second[0]  # built once, not rebuilt per read
    assert [r.key for r in second] == ["a", "b"]
    # Callers get a copy: changing it does not change the profiler.
    second.clear()
    assert len(prof.results) == 2


def test_processes_time_execution_not_queueing():
    """Six 0.2 s tasks on two workers: each record lasts ~0.2 s, however long it queued."""
    import localsched.multiprocessing as lmp

    dsk = {f"s{i}": (time.sleep, 0.2) for i in range(6)}
    try:
        with Profiler() as prof:
            lmp.get(dsk, sorted(dsk), num_workers=2)
    finally:
        if hasattr(lmp, "shutdown"):
            lmp.shutdown()
    results = prof.results
    assert len(results) == 6
    for r in results:
        assert r.end_time - r.start_time >= 0.19, r
    # A record timed from its submission would take in its wait in the queue:
    # the records of one worker would overlap.  Timed from its start there,
    # each begins after the one before it ended (no bound on how long a
    # sleep takes on a loaded machine).
    by_worker: dict = {}
    for r in sorted(results, key=lambda r: r.start_time):
        by_worker.setdefault(r.worker_id, []).append(r)
    for records in by_worker.values():
        for before, after in zip(records, records[1:], strict=False):
            assert after.start_time >= before.end_time - 0.005, (before, after)
    assert len(by_worker) <= 2
    assert os.getpid() not in {r.worker_id for r in results}
