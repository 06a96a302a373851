"""ResourceProfiler: a stoppable sampler thread over this process and its children.

Threads are ordered with events and pipes, never sleeps; times come from a
fake clock.
"""

import itertools
import os
import subprocess
import sys
import threading
from operator import add, truediv

import psutil
import pytest

from localsched.callbacks import Callback
from localsched.diagnostics.collectors import resource
from localsched.diagnostics.collectors.records import ResourceData
from localsched.diagnostics.collectors.resource import THREAD_NAME, ResourceProfiler
from tests.support.platform_marks import needs_waitid


def sampler_threads():
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


class FakeClock:
    """1000.0, 1001.0, ... one tick per call; sets ``reached`` after ``n`` calls."""

    def __init__(self, n=None):
        self._ticks = itertools.count()
        self.n = n
        self.reached = threading.Event()

    def __call__(self):
        tick = next(self._ticks)  # atomic: the sampler thread calls it too
        if self.n is not None and tick + 1 >= self.n:
            self.reached.set()
        return 1000.0 + tick


def inc(x):
    return x + 1


def alive_probe(seen):
    """A per-call callback recording, at each task start, how many sampler threads run."""
    return Callback(pretask=lambda key, dsk, state: seen.append(len(sampler_threads())))


DSK = {"x": 1, "a": (inc, "x"), "b": (inc, "a"), "c": (add, "a", "b")}


def test_with_block_on_every_scheduler(scheduler):
    _, get = scheduler
    seen = []
    clock = FakeClock()
    with ResourceProfiler(dt=3600, timer=clock) as rprof:
        assert rprof.running
        assert get(DSK, "c", callbacks=[alive_probe(seen)]) == 5
        # Still sampling between computations of the block ...
        assert rprof.running and len(sampler_threads()) == 1
        assert get(DSK, "b") == 3
    # ... stopped and joined afterwards.
    assert not rprof.running
    assert seen == [1, 1, 1]  # exactly one sampler thread, also while computing
    results = rprof.results
    # dt is an hour: only the start and stop samples, stamped by the fake clock.
    assert [r.time for r in results] == [1000.0, 1001.0]
    assert all(type(r) is ResourceData for r in results)
    assert all(r.mem > 0 and r.cpu >= 0 for r in results)


def test_registered_samples_only_during_compute(scheduler):
    _, get = scheduler
    seen = []
    rprof = ResourceProfiler(dt=3600, timer=FakeClock())
    rprof.register()
    try:
        assert not rprof.running and rprof.results == []
        with alive_probe(seen):  # (callbacks= would replace the registered ones)
            assert get(DSK, "c") == 5
        assert seen == [1, 1, 1]
        assert not sampler_threads()
        assert [r.time for r in rprof.results] == [1000.0, 1001.0]
        assert get(DSK, "a") == 2
        assert [r.time for r in rprof.results] == [1000.0, 1001.0, 1002.0, 1003.0]
    finally:
        rprof.unregister()
    assert get(DSK, "a") == 2
    assert len(rprof.results) == 4


def test_registered_stops_after_error(scheduler):
    _, get = scheduler
    rprof = ResourceProfiler(dt=3600, timer=FakeClock())
    rprof.register()
    try:
        with pytest.raises(ZeroDivisionError):
            get({"a": (truediv, 1, 0)}, "a")
    finally:
        rprof.unregister()
    assert not rprof.running and not sampler_threads()
    assert len(rprof.results) == 2


def test_with_block_and_registered_share_one_thread():
    from localsched.local import get_sync

    seen = []
    with ResourceProfiler(dt=3600, timer=FakeClock()) as rprof:
        rprof.register()
        try:
            get_sync(DSK, "c", callbacks=[alive_probe(seen), rprof])
        finally:
            rprof.unregister()
        assert rprof.running
    assert seen == [1, 1, 1]
    assert not rprof.running
    # One start sample, one stop sample: the nested starts took none.
    assert len(rprof.results) == 2


def test_concurrent_computations_share_one_thread():
    from localsched.local import get_sync

    barrier = threading.Barrier(2, timeout=30)
    counts = []
    errors = []

    def task():
        barrier.wait()  # both computations are running now
        counts.append(len(sampler_threads()))
        barrier.wait()  # neither ends before both have counted
        return True

    def compute():
        try:
            assert get_sync({"t": (task,)}, "t")
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    rprof = ResourceProfiler(dt=3600, timer=FakeClock())
    rprof.register()
    try:
        threads = [threading.Thread(target=compute) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        rprof.unregister()
    assert not errors
    assert counts == [1, 1]
    assert not rprof.running
    assert len(rprof.results) == 2  # one start and one stop, shared


def test_sampling_loop_runs_every_dt():
    clock = FakeClock(n=6)
    with ResourceProfiler(dt=0.001, timer=clock) as rprof:
        assert clock.reached.wait(30), "sampler thread took no samples"
    times = [r.time for r in rprof.results]
    assert len(times) >= 7  # start sample, >= 5 loop samples, stop sample
    assert times == sorted(times) == [1000.0 + i for i in range(len(times))]


def broken_clock():
    raise OSError("no clock")


def test_failing_sampler_is_reported_not_swallowed():
    with pytest.raises(RuntimeError, match="could not take a sample") as info:
        with ResourceProfiler(dt=3600, timer=broken_clock):
            pass
    assert isinstance(info.value.__cause__, OSError)

    from localsched.local import get_sync

    rprof = ResourceProfiler(dt=3600, timer=broken_clock)
    with pytest.warns(RuntimeWarning, match="no clock"):
        assert get_sync(DSK, "c", callbacks=[rprof]) == 5
    assert not rprof.running


def test_exception_in_block_stops_thread():
    with pytest.raises(KeyError):
        with ResourceProfiler(dt=3600, timer=FakeClock()) as rprof:
            raise KeyError("boom")
    assert not rprof.running
    assert len(rprof.results) == 2


def test_enter_clears_and_sample_outside_block():
    rprof = ResourceProfiler(timer=FakeClock())
    first = rprof.sample()
    assert rprof.results == [first] and first.time == 1000.0 and first.mem > 0
    with rprof:
        pass
    assert [r.time for r in rprof.results] == [1001.0, 1002.0]
    rprof.clear()
    assert rprof.results == []


@pytest.mark.parametrize("dt", [0, -1, "1", None, True])
def test_bad_dt_fails_loudly(dt):
    with pytest.raises(ValueError, match="dt"):
        ResourceProfiler(dt=dt)


def test_bad_timer_fails_loudly():
    with pytest.raises(TypeError, match="timer"):
        ResourceProfiler(timer=5)


ALLOCATE_AND_WAIT = (
    "import sys\n"
    "block = b'x' * (200 * 1024 * 1024)\n"  # written, so resident
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "sys.stdin.read()\n"
)


def spawn_big_child():
    child = subprocess.Popen(
        [sys.executable, "-c", ALLOCATE_AND_WAIT],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert child.stdout.readline() == "ready\n"  # ordered by the pipe, no sleep
    return child


def close_child(child):
    child.stdin.close()
    child.wait(timeout=30)
    child.stdout.close()


def test_child_memory_is_included():
    rprof = ResourceProfiler(timer=FakeClock())
    without = rprof.sample()
    child = spawn_big_child()
    try:
        with_child = rprof.sample()
    finally:
        close_child(child)
    after = rprof.sample()
    assert with_child.mem - without.mem >= 150
    assert with_child.mem - after.mem >= 150


def test_process_pool_workers_are_included():
    import localsched.multiprocessing as lmp

    during = []

    def sample_while_running(key, dsk, state):
        # pretask fires once the task runs on a worker: the pool is up now.
        children = psutil.Process().children(recursive=True)
        own = psutil.Process().memory_info().rss / 1e6
        during.append((rprof.sample(), own, len(children)))

    try:
        with ResourceProfiler(dt=3600, timer=FakeClock()) as rprof:
            lmp.get({"a": (inc, 1)}, "a", callbacks=[Callback(pretask=sample_while_running)])
    finally:
        if hasattr(lmp, "shutdown"):
            lmp.shutdown()
    [(sample, own, n_children)] = during
    assert n_children >= 1
    # Each worker is a Python interpreter, several MB resident.
    assert sample.mem > own + 2 * n_children


def test_survives_child_exiting_between_samples():
    with ResourceProfiler(dt=3600, timer=FakeClock()) as rprof:
        child = spawn_big_child()
        try:
            big = rprof.sample()
        finally:
            close_child(child)  # exits and is reaped between samples
        small = rprof.sample()
    assert big.mem - small.mem >= 150
    assert len(rprof.results) == 4


@needs_waitid
def test_survives_zombie_child():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Wait for the exit without reaping (WNOWAIT): the child stays a zombie.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        with ResourceProfiler(dt=3600, timer=FakeClock()) as rprof:
            rprof.sample()
    finally:
        child.wait(timeout=30)
    assert len(rprof.results) == 3 and all(r.mem > 0 for r in rprof.results)


def test_vanished_and_forbidden_processes_are_skipped(monkeypatch):
    """A child listed, then gone (or hidden) before it is measured, is skipped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stale = psutil.Process(child.pid)
    child.wait(timeout=30)  # reaped: every query on ``stale`` now raises NoSuchProcess

    class Forbidden:
        pid = -1

        def oneshot(self):
            raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(
        psutil.Process, "children", lambda self, recursive=False: [stale, Forbidden()]
    )
    tree = resource._ProcessTree()
    mem, cpu = tree.measure()
    own = psutil.Process().memory_info().rss / 1e6
    assert 0 < mem < own * 1.5 and cpu >= 0


def test_process_handles_are_kept_across_samples():
    """cpu_percent() needs the same psutil.Process each sample to measure a delta."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        tree = resource._ProcessTree()
        tree.measure()
        first = tree._known[child.pid]
        tree.measure()
        assert tree._known[child.pid] is first
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    tree.measure()
    assert child.pid not in tree._known


def test_samples_reach_results_when_sampling_stops():
    """As dask's: a ``with`` block's samples appear when it ends; registered,
    each computation's when it ends."""
    from localsched.local import get_sync

    with ResourceProfiler(dt=3600, timer=FakeClock()) as rprof:
        get_sync(DSK, "c")
        assert rprof.results == []
        rprof.sample()
        assert rprof.results == []
    assert [r.time for r in rprof.results] == [1000.0, 1001.0, 1002.0]


def test_dask_names_close_is_running_and_settable_results():
    with ResourceProfiler(dt=3600, timer=FakeClock()) as rprof:
        assert rprof._is_running()
        rprof.close()  # stops now, and the block's end does not complain
        assert not rprof._is_running() and not sampler_threads()
        assert len(rprof.results) == 2
    rprof.close()  # idempotent
    rprof.results = [(1.0, 2.0, 3.0)]
    assert rprof.results == [ResourceData(1.0, 2.0, 3.0)]
    with rprof:  # and it starts again
        pass
    assert len(rprof.results) == 2 and not rprof.running
