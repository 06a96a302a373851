"""The kinds of shared-memory segment the shm tests run on, and what they
share: each test module that imports ``segment_kind`` and ``clean_shm``
runs every test on each kind -- files in /dev/shm (Linux), POSIX objects
(macOS; simulated on Linux, tests/support/macos_sim.py) and named mappings
(Windows; simulated, tests/support/windows_sim.py) -- and checks that no segment
of this process is left once the shared pools are stopped."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import time

import numpy as np
import pytest

from localsched import multiprocessing as lmp
from localsched._shm import store as segments
from localsched._shm import transport as shm
from localsched.system import platform as _platform
from tests.support.macos_sim import MACOS, objects_of
from tests.support.windows_sim import WINDOWS, windows_subprocess

# This platform's own kind runs natively (macOS: posix, Windows: named);
# Linux also simulates the other two.
NATIVE = _platform.Platform.detect()
NATIVE_KIND = NATIVE.segment_kind
SIMULATES = sys.platform.startswith("linux") and NATIVE_KIND == "files"

BIG = 200_000  # elements: above the 64 KiB threshold for every dtype

# Every test runs on each kind of segment: files in /dev/shm (Linux), POSIX
# objects (macOS, simulated: tests/support/macos_sim.py) and named mappings (Windows,
# simulated with the rest of Windows' process pool: tests/support/windows_sim.py),
# each a ``Platform`` value the test's pools and store are given.  All live
# in Linux's /dev/shm, where ``mine()`` counts them.
files_only = pytest.mark.files_only  # (free room, /proc: what the files kind alone has)

_SIMULATED = {"posix": MACOS, "named": WINDOWS}


def released() -> bool:
    """Whether this process's segments are all gone.  At once for files and
    POSIX objects, released as the computation returns; for named mappings
    once each worker has let go of what it wrote (``named_mappings``: the
    pool tells it to as it reads the worker's last message), a moment later."""
    if _now[0].family == "windows":
        deadline = time.monotonic() + 10
        while mine() and time.monotonic() < deadline:
            time.sleep(0.01)
    return not mine()


_now = [NATIVE]  # the platform value of the test running
_pools: list = []  # [its shared pools], while it runs


def platform_now() -> _platform.Platform:
    """The platform value the running test runs as (its kind's)."""
    return _now[0]


def pools() -> lmp.SharedPools:
    """The running test's shared pools (of ``platform_now()``; workers
    with the test's environment, stopped after it)."""
    return _pools[0]


def store_now() -> segments.SegmentStore:
    """This process's segment store for ``platform_now()``."""
    return segments.store(_now[0])


def writer(prefix: str) -> shm.WorkerSegments:
    """What a worker of ``platform_now()`` writes for job ``prefix``."""
    return shm.WorkerSegments(store_now().kind, prefix, [])


def mine() -> dict:
    """This process's localsched segments now, as the store sees them and,
    where it cannot list them (POSIX objects), as /dev/shm shows them."""
    found = dict(shm.live_segments(pids=[os.getpid()], platform=_now[0]))
    found.update(dict.fromkeys(objects_of(os.getpid()), -1))
    return found


@pytest.fixture(autouse=True, params=["files", "posix", "named"])
def segment_kind(request, monkeypatch):
    param = request.param
    native = NATIVE_KIND == param
    if not native and not (SIMULATES and param != "files"):
        pytest.skip(f"the {param} kind: native elsewhere, simulated on Linux only")
    if param != "files" and request.node.get_closest_marker("files_only"):
        pytest.skip("the files kind's own behaviour")
    _now[0] = NATIVE if native else _SIMULATED[param]
    if _now[0].family == "windows":
        windows_subprocess(monkeypatch)
    yield param
    _now[0] = NATIVE


@pytest.fixture(autouse=True)
def clean_shm(segment_kind, monkeypatch):
    for var in ("LOCALSCHED_SHM", "LOCALSCHED_SHM_THRESHOLD", "LOCALSCHED_SHM_RESERVE"):
        monkeypatch.delenv(var, raising=False)
    segments.forget_warning()  # (each test sees its own warning)
    lmp.shutdown()
    _pools[:] = [lmp.SharedPools(_now[0])]  # workers start with this test's environment
    before = mine()
    yield
    _pools.pop().shutdown()  # (kills what an aborted computation left running, sweeps)
    lmp.shutdown()
    left = set(mine()) - set(before)
    assert not left, f"segments left in {shm.SHM_DIR}: {sorted(left)}"


# -- what the tests' tasks make, and how it arrived ----------------------------


def make(dtype: str, n: int = BIG):
    return (np.arange(n) % 120).astype(dtype)


def backing(a) -> str:
    """What an array's memory belongs to: 'mmap' when it points into a
    mapped segment (Python's mmap in a worker, a descriptor-less mapping in
    the caller), else the owner's type (or 'own')."""
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, np.ndarray):
        return "own"
    if isinstance(base, memoryview):
        if isinstance(base.obj, (mmap.mmap, ctypes.Array)):
            return "mmap"
        return type(base.obj).__name__
    return type(base).__name__
