"""Shared fixtures: every test must leave no thread, child process or
registered callback behind."""

from __future__ import annotations

import os
import threading

import psutil
import pytest

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
    if rt is not None and hasattr(rt._resource_tracker, "_stop"):
        rt._resource_tracker._stop()


@pytest.fixture(autouse=True)
def no_leftovers():
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
    for p in me.children(recursive=True):
        if p.pid in children_before:
            continue
        try:
            p.wait(timeout=10)
        except psutil.TimeoutExpired:
            problems.append(f"child process left running: {p.pid} {p.name()}")
            p.kill()
        except psutil.NoSuchProcess:
            pass
    if problems:
        pytest.fail("; ".join(problems))


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
