"""Which task a worker process is running, readable after it dies.

A worker hands its tasks' records over every millisecond or every few
results, not per task (``localsched.worker.runtime.FLUSH_INTERVAL``): that is
what makes tiny tasks cheap, and why the records cannot say which task a
worker was running when it died.  So each worker gets a *task slot*: two
8-byte integers of memory it shares with the pool, written with plain
memory stores (no system call)::

    [JOB]   the id of the job the worker runs (written as the job starts)
    [TASK]  the index of the task its batch runner started last
            (``NO_TASK`` until the first; written per task by
            ``localsched.worker.runtime.run_batch``)

When the worker dies, the pool reads the slot (the memory outlives the
process) and its ``WorkerDiedError`` carries the task's index if the slot
speaks of the job the worker was running.  A live view reads it too, only
when it asks (``jobs._JobFuture.task_at_work``): the tasks before that one
in the batch have ended, though their records may still be in the worker.

How the worker gets its slot, by start method: "fork" inherits an
anonymous shared mapping; "spawn" is passed the descriptor of a small file
with no name, which it maps; "forkserver" is sent that descriptor with its
start arguments (multiprocessing's ``DupFd``, as its Connections are);
"named" (multiprocessing's spawn, which carries no descriptor: Windows) is
handed the name of a mapping made exclusively under an unguessable name
(``Platform.slot_names``), which it opens.  Where the platform has none of
these (``localsched.system.platform``), a worker has no slot: its death
names no task, and the scheduler names every task the lost batch may have
been running.
"""

from __future__ import annotations

import mmap
import os
import secrets
from typing import Any

from ..system import platform as _platform

__all__ = ["TaskSlot", "JOB", "TASK", "NO_TASK", "attach"]

JOB, TASK = 0, 1
NO_TASK = -1
_SLOT_BYTES = 16  # (two signed 8-byte integers: memoryview format "q")


class TaskSlot:
    """The pool's side of one worker's slot (see the module docstring)."""

    __slots__ = ("mapping", "view", "fd", "named")

    def __init__(self, method: str, slot_names: Any = None):
        # (method: "fork", "spawn" -- a descriptor passed by number --,
        # "forkserver", "named" -- by ``slot_names``, ``Platform.slot_names``
        # -- or "none": a worker that cannot be handed one)
        self.fd: int | None = None
        self.named: tuple | None = None  # (slot_names, name, handle)
        mapping = None
        if method == "named" and slot_names is not None:
            name = f"lsslot{os.getpid()}_{secrets.token_hex(8)}"
            try:
                handle, mapping = slot_names.create(name, _SLOT_BYTES)
            except (OSError, ValueError):
                mapping = None
            else:
                self.named = (slot_names, name, handle)
        elif method == "fork":
            mapping = _platform.shared_anonymous_mapping(_SLOT_BYTES)
        elif method in ("spawn", "forkserver"):
            fd = _platform.shared_file_fd(_SLOT_BYTES)
            if fd is not None:
                try:
                    mapping = mmap.mmap(fd, _SLOT_BYTES)
                except (OSError, ValueError):
                    os.close(fd)
                else:
                    self.fd = fd
        self.mapping = mapping
        self.view: Any = memoryview(mapping).cast("q") if mapping is not None else None
        if self.view is not None:
            self.view[JOB] = 0
            self.view[TASK] = NO_TASK

    def for_child(self, method: str) -> Any:
        """What the worker's start arguments carry (``attach`` takes it):
        the mapping itself (fork), a descriptor (spawn: passed by number,
        forkserver: sent), its name (named), or None (no slot)."""
        if self.view is None:
            return None
        if self.named is not None:
            return self.named[:2]  # (slot_names, name)
        if method == "fork":
            return self.mapping
        if method == "forkserver":
            return _SentFd(self.fd)
        return self.fd

    def started(self) -> None:
        """The worker has its copy of the descriptor: close this one (the
        mapping stays)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def task_of(self, job_id: int) -> int | None:
        """The index of the task job ``job_id``'s batch had started last,
        or None (no slot, another job, no task started yet)."""
        view = self.view
        if view is None or view[JOB] != job_id or view[TASK] == NO_TASK:
            return None
        return int(view[TASK])

    def close(self) -> None:
        self.started()
        if self.view is not None:
            self.view.release()
            self.view = None
        if self.mapping is not None:
            self.mapping.close()
            self.mapping = None
        if self.named is not None:
            slot_names, name, handle = self.named
            self.named = None
            slot_names.release(name, handle)


class _SentFd:
    """A descriptor pickled into a forkserver worker's start arguments."""

    __slots__ = ("fd",)

    def __init__(self, fd: int | None):
        self.fd = fd

    def __reduce__(self):
        from multiprocessing.reduction import DupFd

        return _received_fd, (DupFd(self.fd),)


def _received_fd(dup: Any) -> int:
    return dup.detach()


def attach(given: Any) -> Any:
    """In the worker: the slot's integers (a memoryview) from what its
    start arguments carried (``TaskSlot.for_child``), or None."""
    if given is None:
        return None
    if isinstance(given, tuple):  # (slot_names, name): opened by name
        slot_names, name = given
        try:
            given = slot_names.attach(name, _SLOT_BYTES)
        except (OSError, ValueError):
            return None
    elif isinstance(given, int):
        fd = given
        if fd < 0:
            return None
        try:
            given = mmap.mmap(fd, _SLOT_BYTES)
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)
    return memoryview(given).cast("q")
