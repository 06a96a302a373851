"""The worker's side of shared memory: the owner lock a pool worker holds
for the owner it writes segments for, and what one job writes.

A pool worker makes one ``WorkerSide`` for its pool's platform (from its
boot message) and asks it for each job.  A worker writes its job's large
results into segments named after the job's prefix (``WorkerSegments``),
or rewrites in place a free segment the owner lent it (opened by name,
checked to be this user's, locked exclusively: ``kinds``).  Before the
first, it holds a shared lock on the owner's lock file for the rest of
its life (``WorkerSide.hold_owner_lock``; the owner's directory comes
with the job, so a ``tempfile.tempdir`` set in the owner alone changes
nothing), so the owner's reaper cannot run while it may still write under
the owner's name.  Kinds whose writer holds what it wrote (Windows' named
mappings) let go at the next job.

Fork: a process a task forks from a worker is not that worker: its copy
of the ``WorkerSide`` closes the owner locks it inherited (a descriptor
kept open would keep the lock, and so a dead owner's segments, alive as
long as the child lives) and forgets what the worker holds for its owner
(``forking.renew_in_child``).
"""

from __future__ import annotations

import itertools
import os

from ..system.forking import renew_in_child
from ..system.platform import LOCK_SH, Platform, flock
from .kind_in_use import kind_of
from .kinds import SegmentKind
from .store import _owner_of, write_segment

__all__ = ["WorkerSide", "WorkerSegments"]


class WorkerSide:
    """What a pool worker holds for the owners it writes segments for, as
    its pool's platform (``platform``) has them: the owner locks, and the
    segments it holds until their owner does (``writer_holds`` kinds)."""

    def __init__(self, platform: Platform):
        self.platform = platform
        self.kind: SegmentKind | None = kind_of(platform)
        self.owner_locks: dict = {}  # owner -> descriptor of its lock file (shared lock held)
        self.held_for_owner: list = []
        renew_in_child(self)

    def hold_owner_lock(self, prefix: str, directory: str | None = None) -> bool:
        """Hold the lock of the owner named by job ``prefix`` (in
        ``directory``, where the owner keeps it) for the worker's life, so
        that the owner counts as alive while this process may still write
        segments under its name.  False if the owner is gone -- its lock
        file removed, by its reaper or at its exit, before this worker held
        it: then nothing would remove what the job wrote, and its values
        must take the pipe -- or if the name is not a lock file of this
        user's.  (The lock file can go while this worker waits for the lock
        -- the reaper holds it exclusively as it removes what the owner left
        -- so having it is not enough: the file must still be the one the
        lock is on.)"""
        segment_kind = self.kind
        if segment_kind is None or not segment_kind.owner_lock:
            return True
        owner = _owner_of(segment_kind, prefix)
        if owner in self.owner_locks:
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
        self.owner_locks[owner] = fd
        return True

    def writer(self, prefix: str, lent: list) -> WorkerSegments | None:
        """What one job writes (None where this platform has no segments)."""
        if self.kind is None:
            return None
        return WorkerSegments(self.kind, prefix, lent, self.held_for_owner)

    def let_go_of_last_job(self) -> None:
        """As the next job arrives: the owner has adopted every segment of
        the jobs before (see ``named_mappings``); let them go."""
        held = self.held_for_owner
        if held and self.kind is not None:
            names = held[:]
            del held[:len(names)]
            self.kind.let_go(names)

    def _after_fork_in_child(self) -> None:
        for fd in self.owner_locks.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.owner_locks.clear()
        self.held_for_owner.clear()  # (the parent's)


class WorkerSegments:
    """The segments one job writes in a worker, of ``kind``: names under
    the job's prefix, the free segments it was lent, and which of them it
    used (``held``: where it notes what it must hold until its owner does)."""

    __slots__ = ("kind", "prefix", "lent", "used", "_held", "_numbers")

    def __init__(self, kind: SegmentKind, prefix: str, lent: list, held: list | None = None):
        self.kind = kind
        self.prefix = prefix
        self.lent = list(lent)
        self.used: list = []
        self._held = held
        self._numbers = itertools.count()

    def write(self, buffers: list, reserve: int) -> tuple[str, int, tuple]:
        """A new segment holding ``buffers``: ``(name, size, layout)``."""
        segment_kind = self.kind
        proposed = f"{self.prefix}{segment_kind.number_text(next(self._numbers))}"
        name, size, layout = write_segment(segment_kind, proposed, buffers, reserve, self.lent)
        if name != proposed:  # (a lent free segment, rewritten in place)
            self.used.append(name)
        if segment_kind.writer_holds and self._held is not None:
            self._held.append(name)
        return name, size, layout

    def unlink(self, name: str) -> None:
        """Remove a segment this job wrote (its records could not be sent)."""
        self.kind.unlink(name)
