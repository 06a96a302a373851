"""Shared fixtures: every test must leave no thread, child process or
registered callback behind."""

from __future__ import annotations

import os
import threading

import psutil
import pytest

from localsched.batching import forget as forget_learned
from localsched.callbacks import Callback

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _stop_shared_pools() -> None:
    import sys

    for name in ("localsched.threaded", "localsched.multiprocessing"):
        mod = sys.modules.get(name)
        if mod is not None:
            mod.shutdown()
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


# True while a module's shared LocalCluster runs (see cluster_client).
_cluster_alive = False


@pytest.fixture(scope="module")
def cluster_client():
    """A Client of a LocalCluster with two single-threaded worker processes
    on 127.0.0.1 (ephemeral ports, dashboard on an ephemeral port), shared
    by a module's cluster tests.  Not the default Client: other tests'
    ``x.compute()`` must stay local.  Module-scoped, not session-scoped: its
    worker processes are children of this process, and other modules'
    tests measure this process tree's memory.  When the module ends its
    workers, threads and ports must be gone."""
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
    ports = [cluster.scheduler.port] + [
        int(a.rsplit(":", 1)[1]) for a in cluster.scheduler_info["workers"]]
    workers = list(psutil.Process().children(recursive=True))
    yield client
    client.close()
    cluster.close()
    _cluster_alive = False
    _stop_shared_pools()  # (the resource tracker its processes used)
    problems = _reap(workers, "cluster process left running")
    for t in set(threading.enumerate()) - threads_before:
        t.join(timeout=10)
    left = [t.name for t in set(threading.enumerate()) - threads_before if t.is_alive()]
    problems += [f"cluster thread left running: {name}" for name in left]
    listening = {c.laddr.port for c in psutil.Process().net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN}
    problems += [f"cluster port left open: {port}" for port in ports if port in listening]
    if problems:
        raise AssertionError("; ".join(problems))


@pytest.fixture(scope="module")
def subprocess_cluster_client(tmp_path_factory):
    """A Client of real ``dask scheduler`` + two ``dask worker`` processes
    (one thread each, no nanny) on 127.0.0.1, ephemeral ports, shared by
    a module's tests; their process groups are killed at the end."""
    pytest.importorskip("distributed")
    from tests.cluster_procs import SubprocessCluster

    cluster = SubprocessCluster(tmp_path_factory.mktemp("dask-cluster"))
    yield cluster.client
    cluster.close()


def _wants_cluster(request) -> list:
    """The shared clusters a test runs on (parametrized with "distributed"
    or "dask-worker", or marked ``cluster``)."""
    callspec = getattr(request.node, "callspec", None)
    params = set(callspec.params.values()) if callspec is not None else set()
    wanted = []
    if "distributed" in params or request.node.get_closest_marker("cluster") is not None:
        wanted.append("cluster_client")
    if "dask-worker" in params:
        wanted.append("subprocess_cluster_client")
    return wanted


@pytest.fixture(autouse=True)
def no_leftovers(request):
    # The shared clusters live for a module by design: start them before
    # taking the snapshot (their own end is checked by their fixtures).
    for name in _wants_cluster(request):
        request.getfixturevalue(name)
    # Each test plans from scratch: nothing learned from an earlier test's
    # computations (localsched.batching, "Across computations").
    forget_learned()
    threads_before = set(threading.enumerate())
    active_before = set(Callback.active)
    me = psutil.Process()
    children_before = {p.pid for p in me.children(recursive=True)}
    yield
    # The shared pools live across calls by design; a test ends them.
    _stop_shared_pools()
    problems = []
    leaked_callbacks = set(Callback.active) - active_before
    if leaked_callbacks:
        Callback.active.difference_update(leaked_callbacks)
        problems.append(f"callbacks left registered: {leaked_callbacks}")
    for t in set(threading.enumerate()) - threads_before:
        t.join(timeout=10)  # a thread that is finishing gets its moment
        if t.is_alive():
            problems.append(f"thread left running: {t.name}")
    problems += _reap([p for p in me.children(recursive=True) if p.pid not in children_before],
                      "child process left running")
    if problems:
        pytest.fail("; ".join(problems))


def _reap(processes, what: str) -> list:
    """Wait up to 10 s for each process to end; kill and list those that did not."""
    problems = []
    for p in processes:
        try:
            p.wait(timeout=10)
        except psutil.TimeoutExpired:
            problems.append(f"{what}: {p.pid} {p.name()}")
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return problems


@pytest.fixture
def chromium_path():
    """Path of Debian's headless Chromium: skipped locally if missing,
    a failure in CI (the test command installs it)."""
    import shutil

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if IN_CI:
            pytest.fail("chromium is not installed in CI; the test command must install it")
        pytest.skip("chromium not installed")
    return path
