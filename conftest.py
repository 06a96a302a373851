"""Shared fixtures: every test must leave no thread, child process or
registered callback behind."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from localsched.callbacks import Callback
from localsched.run.batching import forget as forget_learned

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# A shell without job control starts a background job (``pytest &``) with
# SIGINT ignored, and Python then never raises KeyboardInterrupt; every
# script a test starts would inherit that too.  The Ctrl-C tests need the
# terminal's behaviour whatever started the run.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _stop_shared_pools(processes: bool = True) -> None:
    import sys

    for name in ("localsched.threaded", "localsched.multiprocessing"):
        mod = sys.modules.get(name)
        if mod is not None and (processes or name == "localsched.threaded"):
            mod.shutdown()
    if not processes:
        return
    # multiprocessing's own helper processes (started by the forkserver start
    # method) are process-wide singletons; stop them too between tests.
    fs = sys.modules.get("multiprocessing.forkserver")
    if fs is not None and hasattr(fs._forkserver, "_stop"):
        fs._forkserver._stop()
    rt = sys.modules.get("multiprocessing.resource_tracker")
    # (not while the shared cluster lives: its worker processes hold the
    # tracker's pipe, so stopping it would wait for them forever)
    if rt is not None and not _cluster_alive and hasattr(rt._resource_tracker, "_stop"):
        rt._resource_tracker._stop()


# True while the session's shared LocalCluster runs (see cluster_client).
_cluster_alive = False
# pid sets of the shared clusters' processes now (name -> callable), so a
# test that restarts a shared cluster's workers is not blamed for them.
_shared_cluster_pids: dict = {}


def pytest_collection_modifyitems(session, config, items):
    """The tests on the shared clusters run last, together, in their
    collected order: the clusters are session-scoped (one start-up each)
    and other tests, which measure this process tree's memory and
    threads, never see them."""
    on_cluster = [item for item in items if _cluster_names(item)]
    if on_cluster:
        chosen = set(on_cluster)
        items[:] = [item for item in items if item not in chosen] + on_cluster


@pytest.fixture(scope="session")
def cluster_client():
    """A Client of a LocalCluster with two single-threaded worker processes
    (with nannies) on 127.0.0.1 (ephemeral ports, dashboard on an
    ephemeral port), shared by every cluster test of the session, which
    run last (``pytest_collection_modifyitems``).  Not the default Client:
    other tests' ``x.compute()`` must stay local.  When the session ends,
    its workers, threads and ports must be gone."""
    global _cluster_alive
    distributed = pytest.importorskip("distributed")
    from distributed.utils import _offload_executor

    # distributed's offload thread is process-wide and lives until exit (by
    # distributed's design, not a leak of ours): start it before any
    # snapshot, so no test is blamed for it.
    _offload_executor.submit(int).result()
    threads_before = set(threading.enumerate())
    _cluster_alive = True
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0")
    client = distributed.Client(cluster, set_as_default=False)
    _shared_cluster_pids["cluster_client"] = lambda: _shared_cluster_pids_of(client)
    try:
        yield client
    finally:
        _shared_cluster_pids.pop("cluster_client", None)
        ports = [cluster.scheduler.port] + [
            int(a.rsplit(":", 1)[1]) for a in cluster.scheduler_info["workers"]]
        workers = [psutil.Process(pid) for pid in _shared_cluster_pids_of(client)]
        client.close()
        cluster.close()
        _cluster_alive = False
        _stop_shared_pools()  # (the resource tracker its processes used)
    problems = _reap(workers, "cluster process left running")
    for t in set(threading.enumerate()) - threads_before - _timeout_timers():
        _join(t)
    left = [t.name for t in set(threading.enumerate()) - threads_before - _timeout_timers()
            if t.is_alive()]
    problems += [f"cluster thread left running: {name}" for name in left]
    listening = {c.laddr.port for c in psutil.Process().net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN}
    problems += [f"cluster port left open: {port}" for port in ports if port in listening]
    if problems:
        raise AssertionError("; ".join(problems))


#: The shared subprocess cluster's scheduler clock runs this many seconds
#: ahead of this process's (a preload), so every test on it checks that
#: times reach the callbacks on the caller's clock.
SCHEDULER_CLOCK_SHIFT = 5.0


@pytest.fixture(scope="session")
def subprocess_cluster_client(tmp_path_factory):
    """A Client of real ``dask scheduler`` + two ``dask worker`` processes
    (one thread each, no nanny) on 127.0.0.1, ephemeral ports, shared by
    the session's tests (which run last); the scheduler's clock is shifted
    by ``SCHEDULER_CLOCK_SHIFT`` and its ``no-workers-timeout`` is 1 s (a
    test loses every worker); their process groups are killed at the end."""
    pytest.importorskip("distributed")
    from tests.support.cluster_procs import SHIFT_CLOCK, SubprocessCluster

    tmp = tmp_path_factory.mktemp("dask-cluster")
    preload = tmp / "shift_clock.py"
    preload.write_text(SHIFT_CLOCK.format(seconds=SCHEDULER_CLOCK_SHIFT), encoding="utf-8")
    cluster = SubprocessCluster(
        tmp, scheduler_args=["--preload", str(preload)],
        env={"DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT": "1s"})
    cluster.client.cluster_procs = cluster  # (tests that restart workers)
    _shared_cluster_pids["subprocess_cluster_client"] = cluster.pids
    try:
        yield cluster.client
    finally:
        _shared_cluster_pids.pop("subprocess_cluster_client", None)
        cluster.close()


def _shared_cluster_pids_of(client) -> set:
    """The pids of a LocalCluster's worker processes now."""
    try:
        return set(client.run(os.getpid).values())
    except Exception:  # noqa: BLE001 -- (a cluster without workers for the moment)
        return set()


def _cluster_names(item) -> list:
    """The shared clusters a test item runs on (parametrized with
    "distributed" or "dask-worker", marked ``cluster``, or asking for the
    fixture)."""
    callspec = getattr(item, "callspec", None)
    params = set()
    if callspec is not None:
        for value in callspec.params.values():
            try:
                params.add(value)
            except TypeError:
                pass
    names = set(getattr(item, "fixturenames", ()))
    wanted = []
    if ("distributed" in params or item.get_closest_marker("cluster") is not None
            or "cluster_client" in names):
        wanted.append("cluster_client")
    if "dask-worker" in params or "subprocess_cluster_client" in names:
        wanted.append("subprocess_cluster_client")
    return wanted


def _timeout_timers() -> set:
    """pytest-timeout's timer threads (its "thread" method, the one it uses
    where there is no SIGALRM: Windows): one per test, cancelled after the
    test's teardown -- so the last test's is still there while a session
    fixture ends in that teardown.  pytest-timeout's, not ours."""
    return {t for t in threading.enumerate() if t.name.startswith("pytest_timeout ")}


def _process_wide_threads() -> set:
    """Threads a library keeps for the whole process by design, started on
    first use: distributed's offload executor (an in-process scheduler
    materializes every graph on it; distributed's own test utilities start
    it at import for the same reason)."""
    import sys

    utils = sys.modules.get("distributed.utils")
    executor = getattr(utils, "_offload_executor", None)
    return set(getattr(executor, "_threads", ()))


def _pools_per_module(node) -> bool:
    """Whether a test's module keeps the shared process pools from one test
    to the next (marked ``pools_per_module``): its tests compute on the
    processes scheduler without asserting anything of a fresh pool, so a
    pool's start-up (0.3-1 s, more on a busy machine) is paid once."""
    return node.get_closest_marker("pools_per_module") is not None


def _kept_pool_parts() -> tuple[set, set]:
    """The pids of the shared process pools' workers and of multiprocessing's
    helper processes (fork server, resource tracker), and the pools'
    listener threads: what a ``pools_per_module`` module keeps between tests."""
    import sys

    pids: set = set()
    threads: set = set()
    mod = sys.modules.get("localsched.multiprocessing")
    if mod is not None:
        for pool in list(mod._shared._pools.values()):
            pids.update(pool.pids)
            threads.add(pool._listener)
    fs = sys.modules.get("multiprocessing.forkserver")
    if fs is not None and getattr(fs._forkserver, "_forkserver_pid", None):
        pids.add(fs._forkserver._forkserver_pid)
    rt = sys.modules.get("multiprocessing.resource_tracker")
    # (kept while the shared cluster lives, which uses it: see _stop_shared_pools)
    if rt is not None and getattr(rt._resource_tracker, "_pid", None) and not _cluster_alive:
        pids.add(rt._resource_tracker._pid)
    return pids, threads


@pytest.fixture(autouse=True, scope="module")
def pools_of_the_module(request):
    """A ``pools_per_module`` module's shared pools end with the module:
    their workers, listener threads and multiprocessing's helpers must
    then be gone (each test checks all else it started, ``no_leftovers``)."""
    if not _pools_per_module(request.node):
        yield
        return
    yield
    pids, threads = _kept_pool_parts()
    workers = [psutil.Process(pid) for pid in pids if psutil.pid_exists(pid)]
    _stop_shared_pools()
    problems = _reap(workers, "pool process left running")
    for t in threads:
        _join(t)
        if t.is_alive():
            problems.append(f"pool thread left running: {t.name}")
    if problems:
        raise AssertionError("; ".join(problems))


@pytest.fixture(autouse=True)
def no_leftovers(request):
    # The shared clusters live for a module by design: start them before
    # taking the snapshot (their own end is checked by their fixtures).
    for name in _cluster_names(request.node):
        request.getfixturevalue(name)
    # Each test plans from scratch: nothing learned from an earlier test's
    # computations (localsched.run.batching, "Across computations").
    forget_learned()
    threads_before = set(threading.enumerate())
    active_before = set(Callback.active)
    me = psutil.Process()
    children_before = {p.pid for p in me.children(recursive=True)}
    yield
    # The shared pools live across calls by design; a test ends them (the
    # process pools: its module, if marked ``pools_per_module``).
    per_module = _pools_per_module(request.node)
    _stop_shared_pools(processes=not per_module)
    kept_pids, kept_threads = _kept_pool_parts() if per_module else (set(), set())
    problems = []
    leaked_callbacks = set(Callback.active) - active_before
    if leaked_callbacks:
        Callback.active.difference_update(leaked_callbacks)
        problems.append(f"callbacks left registered: {leaked_callbacks}")
    for t in set(threading.enumerate()) - threads_before - _process_wide_threads() - kept_threads:
        _join(t)  # a thread that is finishing gets its moment
        if t.is_alive():
            problems.append(f"thread left running: {t.name}")
    shared: set = set(kept_pids)
    for pids in list(_shared_cluster_pids.values()):
        shared |= pids()  # (a test may have restarted a shared cluster's workers)
    # (a shared pool replacing a worker killed by this test or the one
    # before may have started the new one and not yet listed it: it is
    # the pool's once listed, not a leftover)
    kept = (lambda: _kept_pool_parts()[0]) if per_module else None
    problems += _reap([p for p in me.children(recursive=True)
                       if p.pid not in children_before and p.pid not in shared],
                      "child process left running", kept)
    if problems:
        pytest.fail("; ".join(problems))


def _join(t: threading.Thread, timeout: float = 10.0) -> None:
    """Wait up to ``timeout`` s for ``t`` to end.  A thread whose
    ``start()`` a Ctrl-C interrupted (a pool starting its second worker
    when the test's SIGINT landed) is listed but not yet started, and
    ``join`` refuses it: it gets the same time to start first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:  # ("cannot join thread before it is started")
            if time.monotonic() >= deadline or t not in threading.enumerate():
                return
            time.sleep(0.01)


def _reap(processes, what: str, kept=None) -> list:
    """Wait up to 10 s for each process to end (or, with ``kept``, to be
    listed by ``kept()``: a shared pool's worker that was starting); kill
    and list those that did not."""
    problems = []
    for p in processes:
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    p.wait(timeout=0.05 if kept is not None else 10)
                    break
                except psutil.TimeoutExpired:
                    if kept is not None and p.pid in kept():
                        break
                    if time.monotonic() >= deadline:
                        raise
        except psutil.TimeoutExpired:
            problems.append(f"{what}: {p.pid} {p.name()}")
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return problems


@pytest.fixture
def chromium_path():
    """Path of the headless Chromium (``tests.support.browser.require_chromium``:
    skipped locally if missing, a failure in CI, where the test command
    installs it; skipped off Linux, where the driver cannot run)."""
    from tests.support.browser import require_chromium

    return require_chromium()
