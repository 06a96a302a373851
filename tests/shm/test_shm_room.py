"""The room left in /dev/shm: read once for a burst of jobs while it is far
from the reserve, read again as it fills, and a "no" never reused.

The directory's readings are a fake ``statvfs`` (the room a test says);
the segments written are real, small files of this process's, removed
again.  ``room.AGE`` is made long, so that no test depends on how fast
the machine runs.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from localsched._shm import room
from localsched._shm import store as segments
from localsched.system import platform as _platform

pytestmark = pytest.mark.skipif(
    _platform.Platform.detect().segment_kind != "files",
    reason="readings of /dev/shm's room are the files kind's")

MIB = 1 << 20
RESERVE = 16 * MIB
THRESHOLD = 64 * 1024


class FakeShm:
    """``statvfs`` of /dev/shm as a test says (other paths: the real one),
    counting the readings."""

    def __init__(self, free: int, inodes: int = 1_000_000):
        self.free = free
        self.inodes = inodes
        self.reads = 0
        self._real = os.statvfs

    def __call__(self, path, *args, **kwargs):
        if path != _platform.SHM_DIR:
            return self._real(path, *args, **kwargs)
        self.reads += 1
        blocks = self.free // 4096
        return os.statvfs_result((4096, 4096, blocks * 2, blocks, blocks,
                                  self.inodes * 2, self.inodes, self.inodes, 0, 255))


@pytest.fixture
def shm(monkeypatch):
    monkeypatch.setenv("LOCALSCHED_SHM_RESERVE", str(RESERVE))
    monkeypatch.setenv("LOCALSCHED_SHM_THRESHOLD", str(THRESHOLD))
    monkeypatch.setattr(room, "AGE", 3600.0)  # (a burst: as long as the test)
    fake = FakeShm(64 << 30)
    monkeypatch.setattr(os, "statvfs", fake)
    monkeypatch.setattr(_platform, "_statvfs", fake)
    room.forget()
    segments.forget_warning()
    yield fake
    room.forget()
    segments.forget_warning()


def _platform_now():
    return _platform.Platform.detect()


def _write(kind, name: str, nbytes: int) -> str:
    written, _, _ = segments.write_segment(kind, name, [memoryview(np.ones(nbytes, "u1"))],
                                           RESERVE)
    return written


def _names():
    return f"localsched-roomtest{os.getpid()}-{os.urandom(4).hex()}-"


def test_a_roomy_dev_shm_is_read_once_for_a_burst_of_jobs(shm):
    platform = _platform_now()
    assert all(segments.available(platform) for _ in range(50))
    assert shm.reads <= 2  # (the check, and the inodes of the reading kept)


def test_new_segments_in_a_roomy_dev_shm_reuse_the_reading(shm):
    kind = segments.kind_of(_platform_now())
    prefix = _names()
    names = []
    try:
        for i in range(20):
            names.append(_write(kind, f"{prefix}{i}", 4096))
        assert shm.reads == 1
    finally:
        for name in names:
            kind.unlink(name)


def test_a_filling_dev_shm_is_read_again_before_it_is_full(shm):
    # Room for the reserve, a value and FAR + 2 MiB: the reading stands
    # until this process has written 2 MiB, then /dev/shm is read again,
    # and found full (others filled it meanwhile): the pipes, one warning.
    platform = _platform_now()
    kind = segments.kind_of(platform)
    shm.free = RESERVE + THRESHOLD + room.FAR + 2 * MIB
    assert segments.available(platform)
    reads = shm.reads
    assert segments.available(platform) and shm.reads == reads  # (reused)
    prefix = _names()
    names = []
    try:
        for i in range(3):
            names.append(_write(kind, f"{prefix}{i}", MIB))
        shm.free = RESERVE  # full, by what others wrote
        with pytest.warns(RuntimeWarning, match="too small"):
            assert not segments.available(platform)
        assert shm.reads > reads
        with pytest.raises(OSError, match="not enough free space"):
            _write(kind, f"{prefix}big", MIB)
    finally:
        for name in names:
            kind.unlink(name)


def test_a_segment_that_does_not_fit_is_never_judged_by_an_old_reading(shm):
    kind = segments.kind_of(_platform_now())
    shm.free = RESERVE + room.FAR + 8 * MIB
    prefix = _names()
    name = _write(kind, f"{prefix}0", 4096)
    try:
        shm.free = RESERVE  # others filled it
        # (a value that would eat into the room the reading keeps in hand:
        # read again, and refused)
        with pytest.raises(OSError, match="not enough free space"):
            _write(kind, f"{prefix}1", 16 * MIB)
    finally:
        kind.unlink(name)


def test_no_is_never_reused(shm):
    platform = _platform_now()
    shm.free = RESERVE  # too small
    with pytest.warns(RuntimeWarning, match="too small"):
        assert not segments.available(platform)
    shm.free = 64 << 30  # others freed it
    assert segments.available(platform)


def test_few_inodes_are_read_every_time(shm):
    platform = _platform_now()
    shm.inodes = room.FAR_INODES  # (an owner lock and a segment: not far above)
    for _ in range(5):
        assert segments.available(platform)
    assert shm.reads >= 5
