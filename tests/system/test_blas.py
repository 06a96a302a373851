"""Each process worker runs BLAS and OpenMP on its share of the cores
(``localsched.system.blas``): a pool of one worker per core whose workers
each start a BLAS thread per core runs cores x cores threads, which fight
for the cores (a matrix product 1.5-3x slower: ``benchmarks/README.md``).

What a user relies on: the workers' variables and the threads their loaded
BLAS really runs, on every start method (a forked worker inherits its
parent's loaded BLAS: threadpoolctl limits it there); the user's own
setting stands; the caller's process is left as it was.
"""

from __future__ import annotations

import os

import pytest

import localsched.multiprocessing as lm
from localsched.system import blas


def worker_view():
    """In a worker: its BLAS variables, and the threads its loaded BLAS
    runs per call (None without NumPy and threadpoolctl)."""
    env = {name: os.environ.get(name) for name in blas.VARIABLES}
    try:
        import numpy  # noqa: F401 -- (loads BLAS, if the worker had not)
        from threadpoolctl import threadpool_info
    except ImportError:
        return env, None
    return env, sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})


def blas_threads_here():
    pytest.importorskip("numpy")
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return sorted({i["num_threads"] for i in threadpoolctl.threadpool_info()
                   if i["user_api"] == "blas"})


@pytest.fixture
def unset(monkeypatch):
    """The caller's environment sets none of the variables."""
    for name in blas.VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("context", ["spawn", "fork", "forkserver"])
def test_each_worker_runs_blas_on_its_share_of_the_cores(unset, context):
    here = blas_threads_here()  # (NumPy loaded here first: a forked worker inherits it)
    env, threads = lm.get({"v": (worker_view,)}, "v", num_workers=2, context=context)
    share = blas.worker_threads(2, os.cpu_count())
    assert env == dict.fromkeys(blas.VARIABLES, str(share)), env
    assert threads == [share], (threads, here)
    # (the caller's own process is left as it was)
    assert not any(name in os.environ for name in blas.VARIABLES)
    assert blas_threads_here() == here


def test_the_users_own_setting_stands(monkeypatch, unset):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    env, _ = lm.get({"v": (worker_view,)}, "v", num_workers=2)
    assert env == {**dict.fromkeys(blas.VARIABLES), "OPENBLAS_NUM_THREADS": "2"}


def test_one_worker_on_many_cores_keeps_them_all():
    assert blas.worker_environment(1, 8, environ={}) == dict.fromkeys(blas.VARIABLES, "8")
    assert blas.worker_environment(3, 8, environ={})["OMP_NUM_THREADS"] == "2"
    assert blas.worker_environment(4, None, environ={})["MKL_NUM_THREADS"] == "1"


def test_threadpoolctl_is_asked_only_where_a_blas_is_already_loaded(monkeypatch):
    import sys
    import types

    asked = []
    fake = types.ModuleType("threadpoolctl")
    fake.threadpool_limits = asked.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "threadpoolctl", fake)
    env = blas.worker_environment(2, 2, environ={})
    environ: dict = {}
    blas.apply_in_worker(env, environ=environ, modules={})  # (a fresh worker: nothing loaded)
    assert environ == env and asked == []
    blas.apply_in_worker(env, environ={}, modules={"numpy": object()})  # (a forked one)
    assert asked == [1]
    blas.apply_in_worker({}, environ=environ, modules={"numpy": object()})  # (the user chose)
    assert asked == [1]
