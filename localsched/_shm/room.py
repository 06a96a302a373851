"""The room left for segments: one reading of the directory, reused while
it is far from the limit.

Whether shared memory can take a job's values is asked for every job the
process pool streams (``store.available``), and whether a new segment
fits for every segment made, in the caller and in the workers
(``store.write_segment``): each a ``statvfs`` of ``/dev/shm`` (and, per
job, a ``stat`` of it).  A reading that said *yes* is reused for ``AGE``
seconds, but only while what this process has written since, subtracted
from it, still leaves more than ``FAR`` bytes and ``FAR_INODES`` inodes
above what is asked: a directory that fills up is read again long before
it is full, and a small one (a container's 64 MB) is read every time, as
before.  A *no* is never reused: the next question reads again, so room
freed by others is seen at once.  What other processes write meanwhile
is bounded by the age; a value that does not fit after all fails in its
write (ENOSPC) and takes the pipe, as it always could.

Only kinds that know their room keep readings (``SegmentKind.room``:
files in ``/dev/shm``); the others are asked every time.  The per-job
question (``usable``) reuses only a reading made by a full check (present,
writable, sticky: ``SegmentKind.usable``); the per-segment one
(``free_bytes``) any.  One reading per kind of segment and process,
behind a lock (jobs are submitted from several threads); a forked child
starts with none.
"""

from __future__ import annotations

import threading
import time

from ..system.forking import at_fork_in_child

__all__ = ["usable", "free_bytes", "wrote", "forget", "AGE", "FAR", "FAR_INODES"]

#: Seconds a reading that said yes is reused (others' writes in between
#: are bounded by it).
AGE = 0.1
#: Bytes the room must still exceed the question by, after this process's
#: writes since the reading, for the reading to be reused.
FAR = 256 << 20
#: Inodes likewise (each segment takes one).
FAR_INODES = 64

# kind -> [free bytes, free inodes (-1: no limit), deadline, made by a
# full check], this process's writes since the reading subtracted as they
# happen.
_readings: dict = {}
_lock = threading.Lock()


@at_fork_in_child
def forget() -> None:
    """Drop every reading (a forked child; the tests)."""
    global _lock
    _lock = threading.Lock()
    _readings.clear()


def _reused(kind: object, need: int, inodes: int, checked: bool) -> int | None:
    """The reading's room if it may stand for ``need`` bytes and ``inodes``
    inodes now (made by a full check, if ``checked``), else None."""
    with _lock:
        reading = _readings.get(kind)
        if reading is None:
            return None
        free, free_inodes, deadline, full = reading
        if time.monotonic() > deadline or free - need < FAR or (
                free_inodes >= 0 and free_inodes - inodes < FAR_INODES):
            del _readings[kind]
            return None
        return free if full or not checked else None


def _keep(kind, need: int, full: bool) -> int | None:
    """Read ``kind``'s room now and keep it if it is far above ``need``:
    its free bytes, or None where the kind cannot tell."""
    room = kind.room()
    if room is None:
        return None
    free, free_inodes = room
    with _lock:  # (the fresh reading replaces any other)
        if free - need >= FAR:
            _readings[kind] = [free, free_inodes, time.monotonic() + AGE, full]
        else:
            _readings.pop(kind, None)
    return free


def usable(kind, inodes: int, need: int) -> tuple[int | None, str]:
    """``kind.usable(inodes)`` (``(free bytes or -1, "")``, or ``(None, why
    not)``), from a recent full check where one stands for ``need`` bytes."""
    free = _reused(kind, need, inodes, checked=True)
    if free is not None:
        return free, ""
    free, why = kind.usable(inodes)
    if free is not None and free - need >= FAR:  # (worth keeping: read the inodes)
        _keep(kind, need, full=True)
    else:  # (the fresh answer replaces any reading)
        with _lock:
            _readings.pop(kind, None)
    return free, why


def free_bytes(kind, need: int) -> int | None:
    """``kind.free_bytes()`` (None: not known), from a recent reading where
    one stands for ``need`` bytes and a segment's inode."""
    free = _reused(kind, need, 1, checked=False)
    if free is not None:
        return free
    free = _keep(kind, need, full=False)
    return free if free is not None else kind.free_bytes()


def wrote(kind, size: int) -> None:
    """This process made a segment of ``size`` bytes of ``kind``: the
    reading's room shrinks by it, and by an inode."""
    with _lock:
        reading = _readings.get(kind)
        if reading is not None:
            reading[0] -= size
            if reading[1] >= 0:
                reading[1] -= 1
