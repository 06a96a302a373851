"""The worker's side of shared memory: the owner lock a pool worker holds
for the owner it writes segments for, and what one job writes.

A worker writes its job's large results into segments named after the
job's prefix (``WorkerSegments``), or rewrites in place a free segment the
owner lent it (opened by name, checked to be this user's, locked
exclusively: ``kinds``).  Before the first, it holds a shared lock on the
owner's lock file for the rest of its life (``hold_owner_lock``; the
owner's directory comes with the job, so a ``tempfile.tempdir`` set in
the owner alone changes nothing), so the owner's reaper cannot run while
it may still write under the owner's name.  Kinds whose writer holds
what it wrote (Windows' named mappings) let go at the next job.

Fork: a process a task forks from a worker is not that worker: it closes
the owner locks it inherited (a descriptor kept open would keep the lock,
and so a dead owner's segments, alive as long as the child lives) and
forgets what the worker holds for its owner.
"""

from __future__ import annotations

import itertools
import os

from .._platform import LOCK_SH, flock
from .kind_in_use import kind
from .store import _owner_of, write_segment

__all__ = ["hold_owner_lock", "WorkerSegments", "let_go_of_last_job"]

_owner_locks: dict = {}  # owner -> descriptor of its lock file (shared lock held)


def hold_owner_lock(prefix: str, directory: str | None = None) -> bool:
    """In a worker: hold the lock of the owner named by job ``prefix`` (in
    ``directory``, where the owner keeps it) for the worker's life, so
    that the owner counts as alive while this process may still write
    segments under its name.  False if the owner is gone -- its lock file
    removed, by its reaper or at its exit, before this worker held it:
    then nothing would remove what the job wrote, and its values must take
    the pipe -- or if the name is not a lock file of this user's.  (The lock
    file can go while this worker waits for the lock -- the reaper holds
    it exclusively as it removes what the owner left -- so having it is not
    enough: the file must still be the one the lock is on.)"""
    segment_kind = kind()
    if segment_kind is None or not segment_kind.owner_lock:
        return True
    owner = _owner_of(prefix)
    if owner in _owner_locks:
        return True
    try:
        if directory is not None:
            segment_kind.use_directory(directory)
        fd = segment_kind.open_lock(owner)
    except OSError:
        return False  # the owner is gone: this worker is about to be
    if fd is None:
        return False  # (not a lock file of this user's: never waited on)
    try:
        flock(fd, LOCK_SH)
        held = segment_kind.lock_still_named(owner, fd)
    except OSError:
        held = False
    if not held:
        os.close(fd)  # (removed while this worker waited; maybe made anew since)
        return False
    _owner_locks[owner] = fd
    return True


class WorkerSegments:
    """The segments one job writes in a worker: names under the job's
    prefix, the free segments it was lent, and which of them it used."""

    __slots__ = ("prefix", "lent", "used", "_numbers")

    def __init__(self, prefix: str, lent: list):
        self.prefix = prefix
        self.lent = list(lent)
        self.used: list = []
        self._numbers = itertools.count()

    def write(self, buffers: list, reserve: int) -> tuple[str, int, tuple]:
        """A new segment holding ``buffers``: ``(name, size, layout)``."""
        segment_kind = kind()
        n = next(self._numbers)
        proposed = f"{self.prefix}{segment_kind.number_text(n) if segment_kind else n}"
        name, size, layout = write_segment(proposed, buffers, reserve, self.lent)
        if name != proposed:  # (a lent free segment, rewritten in place)
            self.used.append(name)
        if segment_kind is not None and segment_kind.writer_holds:
            _held_for_owner.append(name)
        return name, size, layout


# Segments this worker wrote and holds until its owner holds them too
# (``writer_holds`` kinds: Windows' named mappings).
_held_for_owner: list = []


def let_go_of_last_job() -> None:
    """In a worker, as its next job arrives: the owner has adopted every
    segment of the jobs before (see ``named_mappings``); let them go."""
    if _held_for_owner:
        names = _held_for_owner[:]
        del _held_for_owner[:len(names)]
        segment_kind = kind()
        if segment_kind is not None:
            segment_kind.let_go(names)




def _after_fork_in_child() -> None:
    for fd in _owner_locks.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _owner_locks.clear()
    _held_for_owner.clear()  # (the parent's)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
