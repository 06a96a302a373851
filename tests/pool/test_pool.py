"""The process pool (localsched._pool): the Executor contract, messages that
never reach the wrong job, start-up failures that break the pool instead of
respawning, workers that die with their parent, Ctrl-C, forks."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import psutil
import pytest

from localsched import multiprocessing as lmp
from localsched import threaded
from localsched._pool import pool_size
from localsched._pool.workers import BUSY, DEAD, IDLE, STARTING, STOPPING, Worker, WorkerStateError
from localsched.callbacks import Callback
from localsched.system.platform import Platform
from tests.support.gates import Gate, notify, wait_for
from tests.support.platform_marks import (
    FALSE_COMMAND,
    needs_false_command,
    needs_fork,
    needs_forkserver,
    needs_glibc,
    needs_posix_signals,
    present_start_methods,
)
from tests.support.windows_sim import WINDOWS, my_segments, windows_subprocess
from tests.support.windows_sim import env as windows_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def inc(x):
    return x + 1


def _gone_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` has ended (or is a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


@pytest.fixture(params=["native", "windows-like"])
def shared(request, monkeypatch):
    """Shared pools of this platform, then of the one Windows gets
    (``tests/support/windows_sim.py``: multiprocessing's spawn, sockets, pipes for
    every value), stopped after the test."""
    platform = None
    if request.param == "windows-like":
        windows_subprocess(monkeypatch)
        platform = WINDOWS
    pools = lmp.SharedPools(platform)
    yield pools
    pools.shutdown()


# -- worker states ---------------------------------------------------------------


def test_worker_states_refuse_illegal_moves():
    w = Worker(Platform.detect())
    w.pid = 0
    assert w.state is STARTING
    w.move(IDLE)
    w.move(BUSY)
    with pytest.raises(WorkerStateError, match="cannot go from busy to starting"):
        w.move(STARTING)
    w.move(STOPPING)
    with pytest.raises(WorkerStateError, match="from stopping to idle"):
        w.move(IDLE)  # a killed worker is never given work again
    w.move(DEAD)
    with pytest.raises(WorkerStateError):
        w.move(DEAD)


# -- 1. a message never reaches another job ---------------------------------------


class _ArrivesBroken:
    """Pickles in the worker; cannot be unpickled in the parent."""

    def __reduce__(self):
        return (_refuse, ())


def _refuse():
    raise RuntimeError("cannot be rebuilt here")


def _emit_unreadable_then_more(go, *, emit):
    # Records as core.run_batch makes them: (i, ok, value, start, end, worker id).
    emit([(0, True, _ArrivesBroken(), 0.0, 0.0, 0)])
    wait_for(go)  # the job goes on after the parent failed to read it
    emit([(1, True, "stale record of the first job", 0.0, 0.0, 0)])


def _emit_own(*, emit):
    emit([(0, True, "record of the second job", 0.0, 0.0, 0)])


def test_a_job_whose_record_cannot_be_read_keeps_its_worker_until_it_ends():
    first_records: list = []
    second_records: list = []
    with Gate() as go:
        pool = lmp.ProcessPool(1)
        try:
            first = pool.submit(_emit_unreadable_then_more, go.address,
                                emit=first_records.append)
            with pytest.raises(RuntimeError, match="could not read a message from worker"):
                first.result(timeout=30)
            # The only worker still runs the first job: the second must wait for
            # it, and get none of its messages.
            second = pool.submit(_emit_own, emit=second_records.append)
            go.open()
            assert second.result(timeout=30) is None
            assert second_records == [[(0, True, "record of the second job", 0.0, 0.0, 0)]]
            assert first_records == []
        finally:
            pool.terminate()  # (a failing test must not leave the gated job waiting)


# -- 2. the Executor contract --------------------------------------------------------


def test_results_are_there_after_the_with_block(shared):
    with lmp.ProcessPool(2, platform=shared.platform) as pool:
        futures = [pool.submit(pow, 2, i) for i in range(8)]
    assert [f.result(timeout=0) for f in futures] == [2**i for i in range(8)]


def _announce_then_wait(started, go):
    notify(started)
    wait_for(go)
    return "done"


def test_shutdown_cancels_only_pending_work_and_running_work_finishes(shared):
    with Gate() as started, Gate() as go:
        pool = lmp.ProcessPool(1, platform=shared.platform)
        try:
            running = pool.submit(_announce_then_wait, started.address, go.address)
            started.wait()
            waiting = [pool.submit(pow, 2, i) for i in range(3)]
            pool.shutdown(wait=False, cancel_futures=True)
            assert all(f.cancelled() for f in waiting)
            with pytest.raises(RuntimeError, match="after shutdown"):
                pool.submit(pow, 2, 2)
            # As in concurrent.futures: a running future cannot be cancelled.
            assert running.cancel() is False and running.running()
            go.open()
            assert running.result(timeout=30) == "done"
            pool.shutdown(wait=True)
            assert pool.pids == []
        finally:
            pool.terminate()


def test_shutdown_without_wait_still_finishes_pending_work():
    with Gate() as started, Gate() as go:
        pool = lmp.ProcessPool(1)
        try:
            running = pool.submit(_announce_then_wait, started.address, go.address)
            started.wait()
            queued = pool.submit(pow, 3, 2)
            pool.shutdown(wait=False)
            go.open()
            assert running.result(timeout=30) == "done" and queued.result(timeout=30) == 9
            pool.shutdown(wait=True)
        finally:
            pool.terminate()


# -- 3. start-up failures break the pool -------------------------------------------


def _broken_pool_error(pool) -> pytest.ExceptionInfo:
    """The error of a job given to a pool whose workers cannot start: its
    future fails, or, if the pool broke before the submit, the submit."""
    with pytest.raises(lmp.BrokenProcessPool) as info:
        pool.submit(pow, 2, 3).result(timeout=30)
    return info


def _count_start_then_exit(path):
    with open(path, "a", encoding="utf-8") as f:
        f.write("x")
    os._exit(3)


def test_workers_exiting_at_start_up_break_the_pool_instead_of_respawning(shared, tmp_path):
    log = tmp_path / "starts"
    pool = lmp.ProcessPool(2, platform=shared.platform, initializer=_count_start_then_exit,
                           initargs=(str(log),))
    info = _broken_pool_error(pool)
    info.match(r"exited at start-up \(exit code 3\)")
    with pytest.raises(lmp.BrokenProcessPool, match="exit code 3"):
        pool.submit(pow, 2, 3)
    pool.shutdown(wait=True)
    assert len(log.read_text(encoding="utf-8")) <= 2  # each worker started once, none respawned


def test_an_idle_pool_whose_workers_exit_at_start_up_breaks_and_stops(tmp_path):
    log = tmp_path / "starts"
    pool = lmp.ProcessPool(2, initializer=_count_start_then_exit, initargs=(str(log),))
    deadline = time.monotonic() + 30
    while pool.broken is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(pool.broken, lmp.BrokenProcessPool)
    pool.shutdown(wait=True)
    assert len(log.read_text(encoding="utf-8")) <= 2


@needs_false_command
def test_a_worker_that_cannot_start_at_all_breaks_the_pool(monkeypatch):
    monkeypatch.setattr(sys, "executable", FALSE_COMMAND)
    pool = lmp.ProcessPool(1)
    _broken_pool_error(pool).match(r"exited at start-up \(exit code 1\)")
    pool.shutdown()


def _failing_init():
    raise ValueError("no database")


def test_an_initializer_that_raises_breaks_the_pool_with_its_error(shared):
    pool = lmp.ProcessPool(1, platform=shared.platform, initializer=_failing_init)
    info = _broken_pool_error(pool)
    info.match(r"initializer failed: ValueError\('no database'\)")
    assert isinstance(info.value, RuntimeError)
    error = info.value
    if isinstance(error.__cause__, lmp.BrokenProcessPool):  # raised by submit: the pool's own
        error = error.__cause__
    assert isinstance(error.__cause__, ValueError)
    assert isinstance(error.__cause__.__cause__, lmp.RemoteTraceback)
    pool.shutdown()


def _exit_init():
    os._exit(3)


def test_get_with_an_exiting_initializer_fails_every_time_without_hanging():
    for _ in range(2):  # the broken shared pool is replaced, and breaks again
        with pytest.raises(lmp.BrokenProcessPool, match="exit code 3"):
            lmp.get({"x": (inc, 1)}, "x", num_workers=2, initializer=_exit_init)
    assert lmp.get({"x": (inc, 1)}, "x", num_workers=2) == 2


# -- 4. a task's own EOFError ------------------------------------------------------


def _raise(exc_type):
    raise exc_type("from the task")


@pytest.mark.parametrize("exc_type", [EOFError, BrokenPipeError])
def test_a_tasks_own_pipe_errors_come_back_as_its_errors(shared, exc_type):
    assert shared.get({"x": (inc, 1)}, "x", num_workers=1) == 2
    pids = shared.pool(1).pids
    with pytest.raises(exc_type, match="from the task") as info:
        shared.get({"x": (_raise, exc_type)}, "x", num_workers=1)
    assert isinstance(info.value.__cause__, lmp.RemoteTraceback)
    assert "in _raise" in str(info.value.__cause__)
    assert shared.pool(1).pids == pids  # the worker stayed


@pytest.mark.parametrize("exc_type", [EOFError, BrokenPipeError])
def test_a_plain_jobs_pipe_errors_are_its_own_not_a_dead_worker(exc_type):
    with lmp.ProcessPool(1) as pool:
        assert pool.submit(pow, 2, 2).result(timeout=30) == 4
        pids = pool.pids
        with pytest.raises(exc_type, match="from the task") as info:
            pool.submit(_raise, exc_type).result(timeout=30)
        assert isinstance(info.value.__cause__, lmp.RemoteTraceback)
        assert pool.pids == pids
        assert pool.submit(pow, 2, 3).result(timeout=30) == 8


# -- 5. forks ---------------------------------------------------------------------


def _nested_get(x):
    return lmp.get({"a": x, "b": (inc, "a")}, "b", num_workers=1)


@needs_fork
@pytest.mark.timeout(60)
def test_nested_get_inside_a_fork_started_worker():
    # A shared spawn pool exists when the fork worker is created: the worker
    # must not take it for its own.
    assert lmp.get({"x": (inc, 1)}, "x", num_workers=1) == 2
    dsk = {"x": 1, "y": (_nested_get, "x")}
    assert lmp.get(dsk, "y", num_workers=1, context="fork") == 2


@needs_fork
@pytest.mark.timeout(60)
def test_get_in_a_child_forked_after_the_pools_were_used():
    assert lmp.get({"x": (inc, 1)}, "x", num_workers=1) == 2
    assert threaded.get({"x": (inc, 1)}, "x", num_workers=1) == 2
    pid = os.fork()
    if pid == 0:  # the child: report by exit code, never return into pytest
        code = 1
        try:
            ok = (lmp.get({"x": (inc, 2)}, "x", num_workers=1) == 3
                  and threaded.get({"x": (inc, 3)}, "x", num_workers=1) == 4)
            lmp.shutdown()
            threaded.shutdown()
            code = 0 if ok else 2
        except BaseException:  # noqa: B036 -- reported through the exit code
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("a get in the forked child hung")
    assert os.waitstatus_to_exitcode(status) == 0


# -- 6 and 8. Ctrl-C ---------------------------------------------------------------


@needs_posix_signals
def test_after_ctrl_c_the_next_get_never_lands_on_a_killed_worker(shared):
    """Ctrl-C lands as the batch finishes: the pool kills that worker; the
    next computation must wait for its replacement, not be handed to it."""
    main = threading.get_ident()

    def posttask(key, result, dsk, state, worker_id):
        signal.pthread_kill(main, signal.SIGINT)

    ctrl_c = Callback(posttask=posttask)
    for _ in range(40):
        with pytest.raises(KeyboardInterrupt):
            shared.get({"x": (inc, 1), "y": (inc, "x")}, "y", num_workers=1, callbacks=[ctrl_c])
        assert shared.get({"x": (inc, 1)}, "x", num_workers=1) == 2


@needs_posix_signals
def test_ctrl_c_kills_the_running_workers_and_the_next_get_does_not_wait(shared):
    assert shared.get({"x": (inc, 1)}, "x", num_workers=1) == 2
    pool = shared.pool(1)
    (pid,) = pool.pids
    started = threading.Event()
    main = threading.get_ident()

    def interrupter():
        if started.wait(30):
            signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=interrupter)
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            shared.get({"long": (time.sleep, 600)}, "long", num_workers=1,
                    callbacks=[Callback(pretask=lambda key, dsk, state: started.set())])
    finally:
        started.set()
        t.join()
    # The 600 s task is not waited for: its worker was killed and replaced.
    assert shared.get({"x": (inc, 1)}, "x", num_workers=1) == 2
    assert shared.pool(1) is pool and pid not in pool.pids
    assert _gone_within(pid, 10)


_CTRL_C_SCRIPT = textwrap.dedent("""
    import signal, threading, time
    from localsched.callbacks import Callback
    from localsched.multiprocessing import default_pool, get

    get({"warm": (abs, -1)}, "warm", num_workers=1)
    print(*default_pool(1).pids, flush=True)
    started = threading.Event()
    main = threading.get_ident()

    def interrupter():
        started.wait(60)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupter, daemon=True).start()
    get({"long": (time.sleep, 60)}, "long", num_workers=1,
        callbacks=[Callback(pretask=lambda key, dsk, state: started.set())])
""")


@needs_posix_signals
def test_after_ctrl_c_the_program_exits_without_waiting_for_its_workers():
    proc = subprocess.Popen([sys.executable, "-c", _CTRL_C_SCRIPT], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=40)  # far less than the 60 s task
    finally:
        proc.kill()
        proc.wait()
    assert "KeyboardInterrupt" in err and proc.returncode != 0
    (worker_pid,) = map(int, out.split())
    assert _gone_within(worker_pid, 10)


# -- 7. workers die with their parent ----------------------------------------------

_PARENT = textwrap.dedent("""
    import os, sys, time
    from localsched.multiprocessing import ProcessPool

    def task(path):
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
        time.sleep(60)

    pool = ProcessPool(1, context=sys.argv[2])
    pool.submit(task, sys.argv[1])
    time.sleep(120)
""")


@pytest.mark.parametrize("context, how, windows_like", [
    ("spawn", "kill", False),  # (SIGKILL; TerminateProcess on Windows)
    ("spawn", "terminate", False),  # (SIGTERM)
    pytest.param("fork", "kill", False, marks=needs_fork),
    pytest.param("forkserver", "kill", False, marks=needs_forkserver),
    # (no PDEATHSIG there: the lifeline alone must end the worker)
    ("spawn", "kill", True),
])
def test_busy_workers_die_with_their_parent(tmp_path, context, how, windows_like):
    marker = str(tmp_path / "worker-pid")
    env = windows_env() if windows_like else None
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, marker, context], cwd=ROOT,
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    worker_pid = None
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(marker):
            assert parent.poll() is None, parent.stderr.read().decode()
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.02)
        with open(marker, encoding="utf-8") as f:
            worker_pid = int(f.read())
        getattr(parent, how)()
        parent.wait(30)
        assert _gone_within(worker_pid, 10), f"worker {worker_pid} outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        parent.stderr.close()
        if worker_pid is not None:
            try:
                psutil.Process(worker_pid).kill()
            except psutil.NoSuchProcess:
                pass


# -- pools the user hands over ------------------------------------------------------


def _check_in(address):
    with socket.create_connection(tuple(address), timeout=60) as s:
        s.sendall(b"in")
        return s.recv(2) == b"go"


def _tasks_met(get_with_pool, n: int) -> int:
    """Run n tasks that each wait until all n have checked in (or 20 s pass):
    how many were running at once."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(20)
    conns: list = []

    def host():
        try:
            while len(conns) < n:
                c, _ = server.accept()
                c.recv(2)
                conns.append(c)
        except OSError:  # timed out: fewer ran at once
            pass
        finally:
            met.append(len(conns))
            for c in conns:
                c.sendall(b"go")
                c.close()
            server.close()

    met: list = []
    t = threading.Thread(target=host)
    t.start()
    try:
        address = server.getsockname()
        dsk = {("meet", i): (_check_in, list(address)) for i in range(n)}
        get_with_pool(dsk, list(dsk))
    except Exception:
        pass  # tasks that came too late find the door closed
    finally:
        t.join()
    return met[0]


@pytest.mark.parametrize("kind", ["ProcessPool", "ProcessPoolExecutor", "multiprocessing.Pool"])
def test_a_users_pool_sets_the_worker_count(kind):
    if kind == "ProcessPool":
        pool = lmp.ProcessPool(3)
    elif kind == "ProcessPoolExecutor":
        pool = ProcessPoolExecutor(3)
    else:
        # (fork where there is fork: a spawn Pool's semaphores belong to the
        # resource tracker, which the suite stops after each test)
        pool = multiprocessing.get_context(present_start_methods(("fork", "spawn"))[0]).Pool(3)
    try:
        assert pool_size(pool) == 3
        assert _tasks_met(lambda dsk, keys: lmp.get(dsk, keys, pool=pool), 3) == 3
        # Lambdas and closures travel to any pool.
        offset = 10
        assert lmp.get({"a": 1, "b": (lambda x: x + offset, "a")}, "b", pool=pool) == 11
        with pytest.raises(ValueError, match="bad input") as info:
            lmp.get({"a": (_bad, 1)}, "a", pool=pool)
        assert "in _bad" in str(info.value.__cause__)
    finally:
        if kind == "multiprocessing.Pool":
            pool.close()
            pool.join()
        else:
            pool.shutdown()


def _bad(x):
    raise ValueError(f"bad input {x}")


def test_pool_size_needs_a_size():
    with pytest.raises(TypeError, match="pass num_workers="):
        pool_size(object())


# -- memory a worker's tasks free ----------------------------------------------------


def _churn(megabytes: int) -> int:
    """Make and free blocks of 8 MB, ``megabytes`` of them alive at once; how
    many bytes of what was freed the worker still holds."""
    rss = psutil.Process().memory_info
    before = rss().rss
    held = [bytearray(8 << 20) for _ in range(megabytes // 8)]  # (zeroed: touched)
    del held
    return rss().rss - before


def _rss_within(pid: int, limit: int, seconds: float) -> int:
    """``pid``'s resident bytes once at most ``limit``, or the last reading."""
    deadline = time.monotonic() + seconds
    while True:
        now = psutil.Process(pid).memory_info().rss
        if now <= limit or time.monotonic() > deadline:
            return now
        time.sleep(0.02)


@needs_glibc
def test_a_busy_worker_reuses_the_memory_its_tasks_free_and_an_idle_one_gives_it_back():
    with lmp.ProcessPool(1) as pool:
        pool.submit(inc, 1).result(timeout=30)
        (pid,) = pool.pids
        base = psutil.Process(pid).memory_info().rss
        # While the job runs, what its tasks freed stays for the next task:
        # 8 MB arrays are not page-faulted in anew each time.
        kept = pool.submit(_churn, 160).result(timeout=30)
        assert kept > 100 << 20
        # Idle, the worker trims it (after IDLE_TRIM_AFTER).
        assert _rss_within(pid, base + (20 << 20), 10) <= base + (20 << 20)


def test_without_the_tuning_a_worker_frees_at_once(monkeypatch):
    monkeypatch.setenv("LOCALSCHED_WORKER_MALLOC", "Off")  # (read by new workers)
    with lmp.ProcessPool(1) as pool:
        assert pool.submit(_churn, 160).result(timeout=30) < 40 << 20




# -- what every platform's pool must do (Windows' path simulated) ------------------


def test_the_windows_like_pool_runs_without_passing_descriptors(monkeypatch):
    """Where pipe descriptors cannot be passed (Windows), the pool starts
    its workers through multiprocessing's spawn and waits on a socket and
    multiprocessing's pipes, one per worker."""
    from localsched._pool.workers import _MPWorker

    windows_subprocess(monkeypatch)
    shared = lmp.SharedPools(WINDOWS)
    assert shared.get({"x": (inc, 1)}, "x", num_workers=2) == 2
    pool = shared.pool(2)
    assert pool._wake_socks is not None
    workers = list(pool._workers)
    assert len(workers) == 2 and all(isinstance(w, _MPWorker) for w in workers)
    assert all(w.pidfd is None and w.exit_handle is None for w in workers)
    assert {w.proc._popen.method for w in workers} == {"spawn"}
    shared.shutdown()


def test_dask_arrays_and_bags_give_right_results_and_leave_nothing(shared):
    da = pytest.importorskip("dask.array")
    db = pytest.importorskip("dask.bag")
    np = pytest.importorskip("numpy")
    base = np.arange(400 * 400, dtype="float64").reshape(400, 400)
    x = da.from_array(base, chunks=200)  # (320 KB chunks: shared memory where there is some)
    got = (x + x.T).mean(axis=0).compute(scheduler=shared.get, num_workers=2)
    np.testing.assert_allclose(got, (base + base.T).mean(axis=0))
    bag = db.from_sequence(range(100), npartitions=4).map(inc).filter(lambda v: v % 2)
    assert bag.sum().compute(scheduler=shared.get, num_workers=2) == sum(
        v for v in range(1, 101) if v % 2)
    shared.shutdown()
    assert not my_segments(shared.platform)


def _fail(x):
    raise ValueError(f"bad input {x}")


def _exit_3(x):
    os._exit(3)


def test_a_failing_task_and_a_dying_worker_name_their_task_and_the_next_get_works(shared):
    with pytest.raises(ValueError, match="bad input 2"):
        shared.get({"a": (inc, 1), "bad": (_fail, "a")}, "bad", num_workers=2)
    dsk = {"a": 1, "fine": (inc, "a"), "doomed": (_exit_3, "a"), "after": (pow, "fine", "doomed")}
    with pytest.raises(lmp.WorkerDiedError) as info:
        shared.get(dsk, "after", num_workers=2)
    assert "while running task 'doomed'" in str(info.value)
    assert "exit code 3" in str(info.value)
    assert shared.get({"a": 1, "b": (inc, "a")}, "b", num_workers=2) == 2


def test_the_windows_like_pool_stays_within_what_one_wait_can_watch(monkeypatch):
    """Windows waits on at most 63 handles: a pool of more workers than one
    wait can watch is refused clearly, and the shared pools stop there."""
    windows_subprocess(monkeypatch)
    with pytest.raises(ValueError, match=rf"at most 62 on this platform \({sys.platform}"):
        lmp.ProcessPool(63, platform=WINDOWS)
    shared = lmp.SharedPools(dataclasses.replace(WINDOWS, wait_limit=3))
    try:
        assert shared.get({"x": (inc, 1)}, "x", num_workers=5) == 2
        assert len(shared.pool(2).pids) == 2
    finally:
        shared.shutdown()
