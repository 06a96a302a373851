"""Zero-copy transport: large buffers travel through shared memory, not the pipe.

The facade the scheduler uses (``transport=Transport(pool.platform)`` in
``localsched.run.core``: ``load``, ``release``, ``SharedValue``, ``Inbox``)
over the package's rooms (drawn in ``localsched._shm``'s note).

How a large result travels::

    worker A                        scheduler (owner)                 worker B
    ────────                        ─────────────────                 ────────
    result ─► pickle, big buffers ─► SharedValue in the cache ──────► loads_job
              pwrite()n into a       (a name, never mapped here)      maps the
              segment; the record    released with the cache entry    segment:
              carries the handle                                      arrays point
                                                                      into it

The owner releases a segment when its ``SharedValue`` goes (the cache
releases the key; the computation fails or is interrupted: ``Inbox.abandon``;
or at the end, when an output is mapped for the user).  A segment a worker
made but never reported (it died, or was killed on Ctrl-C) is found by its
job's name prefix and swept once the worker is reaped.  The process sweeps
its own names at exit, and its reaper does when it is killed outright.

What takes the pipe: objects without large buffers, buffers below the
threshold, object arrays (pickle sends their items in-band), plain
``bytes`` nested inside a result (a ``bytes`` result itself travels through
shared memory and is copied out on arrival).  Everything takes the pipe
when shared memory is switched off, or the platform has none that works
(``localsched.system.platform``: no file locks, ``/dev/shm`` missing, read-only,
not sticky, too small or out of inodes; a macOS registry directory that is
not the user's own; Windows' named mappings failing their self-test),
decided when a computation starts and at each job, before any file is
made; a value that does not fit later takes the pipe alone.  One warning
per process, the caller's (a worker's failure reaches it as a ``NOTE``
message).

Knobs (environment variables, read when used; workers read theirs at
start-up, so set them before the pool starts):

- ``LOCALSCHED_SHM=0``: off (pipe only, no warning);
- ``LOCALSCHED_SHM_THRESHOLD``: smallest buffer sent through shared memory,
  bytes (default 64 KiB: where a segment starts to beat two pipe hops,
  see ``benchmarks/README.md``);
- ``LOCALSCHED_SHM_RESERVE``: bytes of ``/dev/shm`` left free for others
  (default 16 MiB); a value that does not fit goes through the pipe.
"""

from __future__ import annotations

from ..system.platform import Platform
from .handles import Inbox, SharedValue, load, release, release_records
from .oob import dump_records, dumps_job, dumps_oob, loads_job, loads_records, share
from .store import (
                       PREFIX,
                       SHM_DIR,
                       available,
                       current,
                       live_segments,
                       settings,
                       store,
                       sweep,
                       sweep_stale,
)
from .worker_side import WorkerSegments, WorkerSide

__all__ = ["Transport", "WorkerSide", "SharedValue", "Inbox", "load", "release",
           "release_records", "dumps_oob",
           "dump_records", "dumps_job", "loads_job", "loads_records", "share", "available",
           "sweep", "sweep_stale", "settings", "live_segments", "store", "current",
           "WorkerSegments", "PREFIX", "SHM_DIR"]


class Transport:
    """What the scheduler is given to exchange values with a pool of
    ``platform`` (the pool's, as multiprocessing's objects take a context):
    ``load``, ``release``, ``release_records``, ``SharedValue`` and
    ``Inbox(put)``, whose store is this process's for that platform."""

    __slots__ = ("platform",)

    SharedValue = SharedValue
    load = staticmethod(load)
    release = staticmethod(release)
    release_records = staticmethod(release_records)

    def __init__(self, platform: Platform):
        self.platform = platform

    def Inbox(self, put) -> Inbox:  # noqa: N802 -- the class it makes, as the scheduler asks for it
        """Where a computation's records arrive (``handles.Inbox``)."""
        return Inbox(put, self.platform)
