"""The platform as a value (issue #35): a pool is given a ``Platform``
(default: this machine's, detected once) as multiprocessing's objects are
given a context, and hands it to its workers and its segment store;
nothing in the library remembers a platform chosen for the whole process,
so pools of two platforms run side by side in one process."""

from __future__ import annotations

import os

import numpy as np
import pytest

from localsched import multiprocessing as lmp
from localsched._shm import store as segments
from localsched.callbacks import Callback
from localsched.system import platform as _platform
from tests.support.macos_sim import MACOS, objects_of
from tests.support.shm_kinds import SIMULATES, make

pytestmark = pytest.mark.skipif(not SIMULATES, reason="macOS's kind simulated on Linux only")


def _run(pools: lmp.SharedPools) -> tuple:
    """A big result travels from one task to the next on ``pools``: the
    value, and where its segment was while the next task ran."""
    seen: list = []

    def look(key, result, dsk, state, worker_id):
        if key == "a":
            files = segments.live_segments(pids=[os.getpid()])  # (this machine's kind)
            seen.append(("files" if files else "") + ("posix" if objects_of(os.getpid()) else ""))

    out = pools.get({"a": (make, "f8"), "b": (np.sum, "a")}, "b", num_workers=1, chunksize=1,
                    callbacks=[Callback(posttask=look)])
    return float(out), seen


def test_pools_of_two_platforms_run_side_by_side_each_as_given():
    native, macos = lmp.SharedPools(), lmp.SharedPools(MACOS)
    try:
        on_macos = _run(macos)
        on_native = _run(native)
        again = _run(macos)
    finally:
        macos.shutdown()
        native.shutdown()
    total = float(make("f8").sum())
    # The macOS pool's values travel as POSIX objects, the native pool's as
    # files in /dev/shm: each as its platform has them.
    assert on_macos == again == (total, ["posix"]) and on_native == (total, ["files"])
    # Each store holds the platform it was made for, and its kind.
    assert segments.current(MACOS).platform is MACOS
    assert type(segments.current(MACOS).kind).__name__ == "PosixObjects"
    detected = _platform.Platform.detect()
    assert type(segments.current(detected).kind).__name__ == "DevShmFiles"
    assert native.platform == detected


def test_a_pool_given_a_platform_starts_its_workers_as_that_platform():
    with lmp.ProcessPool(2, platform=MACOS) as pool:
        assert pool.submit(abs, -1).result(timeout=60) == 1
        assert pool.platform is MACOS
        assert {w.platform for w in pool._workers} == {MACOS}


def test_no_platform_is_chosen_for_the_whole_process():
    assert not hasattr(_platform, "use") and not hasattr(_platform, "current")
    np.testing.assert_array_equal(make("i1", 3), [0, 1, 2])
