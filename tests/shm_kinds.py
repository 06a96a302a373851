"""The kinds of shared-memory segment the shm tests run on, and what they
share: each test module that imports ``segment_kind`` and ``clean_shm``
runs every test on each kind -- files in /dev/shm (Linux), POSIX objects
(macOS; simulated on Linux, tests/macos_sim.py) and named mappings
(Windows; simulated, tests/windows_sim.py) -- and checks that no segment
of this process is left once the shared pools are stopped."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import time

import numpy as np
import pytest

from localsched import _platform
from localsched import multiprocessing as lmp
from localsched._shm import store as segments
from localsched._shm import transport as shm
from tests.macos_sim import end_simulation, objects_of, simulate_macos
from tests.windows_sim import simulate_windows

# This platform's own kind runs natively (macOS: posix, Windows: named);
# Linux also simulates the other two.
NATIVE_KIND = _platform.Platform.detect().segment_kind
SIMULATES = sys.platform.startswith("linux") and NATIVE_KIND == "files"

BIG = 200_000  # elements: above the 64 KiB threshold for every dtype

# Every test runs on each kind of segment: files in /dev/shm (Linux), POSIX
# objects (macOS, simulated: tests/macos_sim.py) and named mappings (Windows,
# simulated with the rest of Windows' process pool: tests/windows_sim.py).
# All live in Linux's /dev/shm, where ``mine()`` counts them.
files_only = pytest.mark.files_only  # (free room, /proc: what the files kind alone has)


def released() -> bool:
    """Whether this process's segments are all gone.  At once for files and
    POSIX objects, released as the computation returns; for named mappings
    once each worker has let go of what it wrote (``named_mappings``: the
    pool tells it to as it reads the worker's last message), a moment later."""
    if _kind_now[0] == "named":
        deadline = time.monotonic() + 10
        while mine() and time.monotonic() < deadline:
            time.sleep(0.01)
    return not mine()


_kind_now = ["files"]


def mine() -> dict:
    """This process's localsched segments now, as the store sees them and,
    where it cannot list them (POSIX objects), as /dev/shm shows them."""
    found = dict(shm.live_segments(pids=[os.getpid()]))
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
    if not native:
        (simulate_macos if param == "posix" else simulate_windows)(monkeypatch)
    _kind_now[0] = param
    yield param
    if not native:
        end_simulation()


@pytest.fixture(autouse=True)
def clean_shm(segment_kind, monkeypatch):
    for var in ("LOCALSCHED_SHM", "LOCALSCHED_SHM_THRESHOLD", "LOCALSCHED_SHM_RESERVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(segments, "_warned", False)
    lmp.shutdown()  # workers start with this test's environment
    before = mine()
    yield
    lmp.shutdown()  # (kills what an aborted computation left running, sweeps)
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
