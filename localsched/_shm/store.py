"""The segment store: named shared-memory segments, who owns them, how
they are written, reused, released and reaped.

A segment is a file in ``/dev/shm`` on Linux, a POSIX shared-memory object
on macOS and the BSDs, a named mapping on Windows (``kinds``).  The store
asks only through its kind's calls: it names no directory and touches no
file itself, so the rules every kind keeps beside other users (made
exclusively, never followed, never waited on, removed only when ours)
hold for the store too.

Names.  Every segment of an *owner* (a process that runs a process pool)
starts with ``localsched-<pid>_<nonce>-``: the pid is a label for people,
never a liveness test; the nonce makes the owner unique across PID
namespaces sharing ``/dev/shm``.  A job's segments add ``<pool>-<job>-``.

Liveness and reaping.  Each owner holds a shared ``flock`` on its
``localsched-<owner>.lock`` for life, and so does every worker that writes
segments for it; the owner is dead when an exclusive lock can be taken,
whatever PID namespace it lives in.  A small detached reaper process per
owner waits for that lock, then unlinks the owner's segments and lock
(``_start_reaper``): so a SIGKILLed owner leaves nothing, at no cost per
segment.  ``memfd_create`` segments passed by ``SCM_RIGHTS`` were turned
down: one descriptor per live result (over ``ulimit -n`` on big persists)
and sockets instead of pipes (foreign pools have none).  ``sweep_stale``
removes what a dead owner left when its reaper could not run.

Finalizers take no lock: they only append events, which ``drain`` applies
from ordinary code (``SegmentStore.drain``).  A released segment goes to a
free list while computations run (``SegmentStore``), since a fresh
segment costs page allocation.

One store per platform value and process: ``store(platform)``, made on
first use; ``usable_store`` says whether shared memory works now, else
the caller takes the pipes.  Every function that touches segments takes
the kind (or store) it works on; none looks a platform up.  A forked child
forgets its parent's stores (``at_fork_in_child``, beside them).
"""

from __future__ import annotations

import collections
import errno
import itertools
import os
import subprocess
import sys
import threading
import warnings
from typing import Any

from ..system import platform as _platform
from ..system import settings as user_settings
from ..system.forking import at_fork_in_child
from ..system.platform import LOCK_EX, LOCK_NB, LOCK_SH, SHM_DIR, Platform, flock
from . import room
from .kind_in_use import kind_of
from .kinds import LOCK_SUFFIX, SegmentKind

__all__ = ["SegmentStore", "store", "current", "settings", "available", "warn_once",
           "forget_warning", "write_segment", "sweep", "sweep_stale", "live_segments",
           "usable_store", "held_bytes", "SHM_DIR", "PREFIX", "ALIGN", "FREE_MAX", "kind_of"]

PREFIX = "localsched-"  # (of the files; ``SegmentKind.prefix`` of each kind)
# Buffers start on 64-byte boundaries in a segment: NumPy's SIMD loops and
# any dtype (complex256 included) find their data aligned.
ALIGN = 64
FREE_MAX = 8  # segments in the free list at most
LEND_MAX = 4  # free segments lent to one job at most

# Warnings given in this process: the first ``next()`` gives 0 (one C call,
# atomic: no lock, so nothing for a forked child to renew).
_warnings = itertools.count()


def settings() -> tuple[bool, int, int]:
    """``(enabled, threshold, reserve)`` from the environment (see ``shm``).

    >>> settings()[1] > 0
    True
    """
    return (user_settings.flag("LOCALSCHED_SHM"),
            user_settings.integer("LOCALSCHED_SHM_THRESHOLD"),
            user_settings.integer("LOCALSCHED_SHM_RESERVE"))


#: In a pool worker, where its warnings go instead (set by the worker loop:
#: the job's notes, which it hands to the caller); None elsewhere.
notes_to: list | None = None


def warn_once(message: str) -> None:
    """One warning per process: a RuntimeWarning in the caller; in a pool
    worker, a note its job hands to the caller (``notes_to``), who warns
    once for all its workers (the user sees one line, not one per worker)."""
    if next(_warnings):
        return
    if notes_to is not None:
        notes_to.append(message)
    else:
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def forget_warning() -> None:
    """Warn again at the next ``warn_once`` (the tests, one warning each)."""
    global _warnings
    _warnings = itertools.count()


def _pipes_instead(why: str) -> str:
    return (f"no shared memory for process tasks: {why}; large values travel through "
            f"pipes instead (slower; LOCALSCHED_SHM=0 silences this)")


def free_bytes(segment_kind: SegmentKind | None) -> int | None:
    """Bytes free for segments of ``segment_kind`` now, or None where that
    cannot be known."""
    return segment_kind.free_bytes() if segment_kind is not None else None


def available(platform: Platform) -> bool:
    """Whether shared memory can be used now: switched on, the platform has
    a kind of segment that works now (``segment_kinds``; files: present,
    writable, inodes left) with room for a value above the reserve where
    the room can be known.  Asked per job, so a directory that fills up or
    empties is noticed when it does (a recent *yes* far from the reserve
    is reused: ``room``); warns once per process when it cannot be used.
    ``platform``: which kind of segment (its own)."""
    enabled, threshold, reserve = settings()
    if not enabled:
        return False
    segment_kind = kind_of(platform)
    if segment_kind is None:
        warn_once(_pipes_instead(_platform.shm_dir_stats(platform=platform)[1]))
        return False
    # (an inode for the owner's lock file, until it exists, and a segment)
    # (a recent reading where it is far from the reserve: ``room``)
    free, why = room.usable(segment_kind, 1 if current(platform) is not None else 2,
                            reserve + threshold)
    if free is None:
        warn_once(_pipes_instead(why))
        return False
    if 0 <= free < reserve + threshold:
        warn_once(_pipes_instead(f"{SHM_DIR} is too small: {free >> 20} MiB free, "
                                 f"{reserve >> 20} MiB kept in reserve"))
        return False
    return True


def usable_store(platform: Platform) -> SegmentStore | None:
    """This process's store for ``platform`` if shared memory can be used
    now (``available``), created on first use; None (after the one
    warning) if it cannot, the store's lock file included: nothing is
    created before that is known.

    The segment kind says whether it works now (files: a ``statvfs`` of
    ``/dev/shm``, present, writable, sticky, inodes and room left, reused
    for a moment while far from the reserve: ``room``; objects:
    the registry directory is this user's private directory; named
    mappings: a self-test).  None sends the caller to the pipes after one
    warning (``warn_once``; in a worker, whose loop sets ``notes_to``, a
    note its job hands to the caller).  A platform with no kind (no file
    locks: ``localsched.system.platform``) always takes the pipes."""
    if not available(platform):
        return None
    try:
        return store(platform)
    except OSError as exc:
        warn_once(_pipes_instead(f"cannot create the owner's lock file: {exc.strerror or exc}"))
        return None


def _layout(buffers: list) -> tuple[int, tuple]:
    layout = []
    offset = 0
    for b in buffers:
        offset = -(-offset // ALIGN) * ALIGN
        layout.append((offset, b.nbytes))
        offset += b.nbytes
    return offset, tuple(layout)


def write_segment(segment_kind: SegmentKind, name: str, buffers: list, reserve: int,
                  reusable: list | None = None, claim=None) -> tuple[str, int, tuple]:
    """Write ``buffers`` into a new segment ``name`` of ``segment_kind``, or into a free one of
    about the right size from ``reusable`` (``[(name, size)]``: the one
    taken is removed from that list), which keeps its own name:
    ``(name, size, layout)``.  ``claim(name, size)`` opens a free segment to
    rewrite (default: the kind's ``open_to_rewrite``, by name, checked).
    OSError (the segment removed again) when it does not fit, or the name
    is taken."""
    size, layout = _layout(buffers)
    claimed = None
    if reusable and segment_kind.reuse:
        claimed = _claim(size, reusable, claim or segment_kind.open_to_rewrite)
    if claimed is not None:
        token, name = claimed
    else:
        free = room.free_bytes(segment_kind, size + reserve)
        if free is not None and free < size + reserve:
            raise OSError(errno.ENOSPC, "not enough free space for shared memory")
        with segment_kind.registering(name):
            token = segment_kind.create(name, size)
        room.wrote(segment_kind, size)
    try:
        segment_kind.write(token, size, layout, buffers)
    except BaseException:
        segment_kind.done_writing(token)
        if claimed is None:
            segment_kind.unlink(name)
        raise
    segment_kind.done_writing(token)
    return name, size, layout


def _claim(size: int, reusable: list, claim) -> tuple[Any, str] | None:
    """A free segment of about ``size`` bytes from ``reusable``, opened to
    be rewritten in place (locked exclusively: nobody maps it), and its
    name; or None.  One that cannot be had stays where it is (unused, it
    returns to the free list or goes with it)."""
    fits = sorted((s, n) for n, s in reusable if size <= s <= 2 * size + ALIGN)
    for free_size, free in fits:
        reusable.remove((free, free_size))
        try:
            return claim(free, size), free
        except OSError:  # still mapped somewhere, or not ours any more
            continue
    return None


# -- the owner's store -----------------------------------------------------------

class SegmentStore:
    """What this process owns in shared memory for one platform (its kind
    of segment): its name, lock and reaper, the handles it holds, its free
    list, and the events finalizers leave.

    The free list.  While a computation runs, a released segment is kept
    (at most ``FREE_MAX``) instead of unlinked.  It keeps its name, and the
    store holds a descriptor of it, opened while the name was surely still
    its own (a live handle's: nobody else can remove or replace it in a
    sticky directory) and checked; a job's input, whose name its worker
    removed once mapped, cannot be held again and goes.  The store counts
    its free list in memory (never by listing the directory), lends a few
    free segments to each job it sends (``lend``), and the worker reports
    which it used (``DONE``): it rewrites one in place, under its own name,
    opened by name and checked to be this user's; the store rewrites one
    for its own job's inputs through the descriptor it holds
    (``claim_lent``), never reopening the name.  Either overwrites only
    under an exclusive ``flock`` taken without waiting: worker-side
    mappings hold a shared lock for as long as they live, and this process
    never lends a segment it still maps (``mapped``).  When the last
    computation ends, the free list is unlinked.  ``bytes_held`` says what
    the store holds in no process's resident set (diagnostics, the memory
    budget)."""

    def __init__(self, platform: Platform) -> None:
        segment_kind = kind_of(platform)
        if segment_kind is None:
            raise OSError(errno.ENOSYS, "this platform has no shared memory")
        #: The platform this store was made for, and its kind of segment.
        self.platform = platform
        self.kind: SegmentKind = segment_kind
        self.pid = os.getpid()
        # (appended to by finalizers, from any thread: ("r", name, size) a
        # handle went, ("m", name) a mapping was made, ("u", name) it went)
        self.events: collections.deque = collections.deque()
        self._lock = threading.Lock()  # drain's, never a finalizer's
        self.running = 0  # computations running (``Inbox``)
        # The free list: name -> (size, a descriptor this process holds).
        self.free: dict = {}
        self.lent: dict = {}  # the same, lent to jobs not yet ended
        self.deferred: list = []  # released names to unlink when the loop waits
        self.owned: dict = {}  # name -> size of the live handles of this process
        self.mapped: dict = {}  # name -> live mappings of it in this process
        self._numbers = itertools.count()
        self._lock_fd: int | None = None
        self.reaper: int | None = None
        self.owner = segment_kind.owner_label(self.pid)
        if segment_kind.owner_lock:
            self._hold_lock_and_start_reaper()
        self.prefix = f"{segment_kind.prefix}{self.owner}-"

    def _hold_lock_and_start_reaper(self) -> None:
        # The name is random: taken, it was planted (a fresh one, twice).
        for attempt in range(3):
            try:
                self._lock_fd = self.kind.create_lock(self.owner)
                break
            except FileExistsError:
                if attempt == 2:
                    raise
                self.owner = self.kind.owner_label(self.pid)
        assert self._lock_fd is not None
        try:
            flock(self._lock_fd, LOCK_SH)
        except OSError:
            self.kind.remove_lock(self.owner, self._lock_fd)
            os.close(self._lock_fd)
            raise
        self.reaper = self._start_reaper()

    def _start_reaper(self) -> int | None:
        """Start the reaper, detached: ``kinds``' reaper script, a few
        lines of Python in its own session, waits for an exclusive lock on
        the owner's lock file (the owner and all its workers gone, however
        they went), unlinks the owner's segments and lock file -- those
        that are this user's regular files -- and exits.  It costs the
        owner one start; no message per segment (the name prefix says what
        to remove).  A shell starts it in the background
        and exits at once, so it is no child of this process (nothing
        waits for it, and it outlives this process by design).  Its exit
        status, or None if it could not start (then ``sweep_stale`` in a
        later process cleans up)."""
        try:
            return subprocess.call(
                ["/bin/sh", "-c", 'exec "$0" -I -S -c "$1" "$2" "$3" "$4" &',
                 sys.executable, self.kind.reaper_script(), self.kind.directory,
                 self.kind.lock_name(self.owner), f"{self.kind.prefix}{self.owner}-"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            return None

    @property
    def lock_path(self) -> str | None:
        """Where this owner's lock file is (for people and tests), or None."""
        if self._lock_fd is None:
            return None
        return os.path.join(self.kind.directory, self.kind.lock_name(self.owner))

    def job_prefix(self, pool_token: int, job_id: int) -> str:
        text = self.kind.number_text
        return f"{self.prefix}{text(pool_token)}-{text(job_id)}-"

    def for_workers(self, pool_token: int, job_id: int) -> tuple[str, str | None]:
        """What a job's worker needs to write segments for this owner: the
        job's name prefix and where this owner's lock is (a worker's own
        temporary directory may differ: ``tempfile.tempdir`` set here)."""
        directory = self.kind.directory if self.kind.owner_lock else None
        return self.job_prefix(pool_token, job_id), directory

    def number(self) -> int:
        return next(self._numbers)

    def bytes_held(self) -> int:
        """Bytes held here in no process's resident set (``bytes_held``):
        handles this process does not map, and the free list.  Read from
        any thread without the lock: each ``list()`` is one C call."""
        mapped = self.mapped
        held = sum([size for name, size in list(self.owned.items()) if name not in mapped])
        spare = [entry[0] for entry in [*list(self.free.values()), *list(self.lent.values())]]
        return held + sum(spare)

    # -- events in, decisions out -------------------------------------------

    def drain(self) -> None:
        """Apply what finalizers reported (never called from one).

        A handle's finalizer (and a mapping's) only appends an event to
        ``events`` (a deque: append and popleft are atomic); this applies
        them under the store's lock, from ordinary code: the scheduler's
        loop when it waits, each dispatch, the pool's listener after each
        message, an explicit ``release``.  A cyclic collection may run
        anywhere, inside ``drain`` included: it only appends."""
        events = self.events
        if not events:
            return
        with self._lock:
            while events:
                try:
                    event = events.popleft()
                except IndexError:
                    return
                kind, name = event[0], event[1]
                if kind == "m":
                    self.mapped[name] = self.mapped.get(name, 0) + 1
                elif kind == "u":
                    n = self.mapped.get(name, 1) - 1
                    if n:
                        self.mapped[name] = n
                    else:
                        self.mapped.pop(name, None)
                else:
                    self.owned.pop(name, None)
                    self._retire(name, event[2])

    def _retire(self, name: str, size: int) -> None:
        """(under _lock) A released segment: into the free list, under its
        own name and held by a descriptor, while a computation runs, it has
        room and nothing here maps it; else unlinked (later, while a
        computation runs).  (A job's input, whose name its worker removed
        once mapped, cannot be held again: it goes.)"""
        if self.running:
            if self.kind.reuse and len(self.free) < FREE_MAX and name not in self.mapped \
                    and name not in self.free and name not in self.lent:
                try:
                    self.free[name] = (size, self.kind.hold(name))
                    return
                except OSError:
                    pass
            self.deferred.append(name)
            return
        self.kind.unlink(name)

    def release(self, name: str, size: int) -> None:
        """A handle is released explicitly (not by a finalizer)."""
        self.events.append(("r", name, size))
        self.drain()

    def begin(self) -> None:
        """A computation starts."""
        with self._lock:
            self.running += 1

    def unlink_deferred(self) -> None:
        deferred = self.deferred
        while deferred:
            try:
                self.kind.unlink(deferred.pop())
            except IndexError:
                return

    def end(self) -> None:
        """A computation ends: with none left, the free list goes."""
        self.drain()
        with self._lock:
            self.running -= 1
            free: list = []
            if not self.running:  # (lent ones too: a worker may still claim one, or not)
                free = [*self.free.items(), *self.lent.items()]
                self.free = {}
                self.lent = {}
        for name, (_, fd) in free:
            _unlink_held(self.kind, name, fd)
        self.unlink_deferred()
        if not self.running:
            self.kind.compact(self.owner)

    def lend(self) -> list:
        """A few free segments for one job: ``[(name, size)]``, no longer in
        the free list (``give_back`` returns the unused ones)."""
        self.drain()
        if not self.free:
            return []
        with self._lock:
            names = list(self.free)[:LEND_MAX]
            for n in names:
                self.lent[n] = self.free.pop(n)
            return [(n, self.lent[n][0]) for n in names]

    def claim_lent(self, name: str, size: int) -> int:
        """(``write_segment``'s ``claim`` in this process) a free segment
        lent to this process's own job, rewritten through the descriptor
        the free list holds (a duplicate, locked exclusively): never
        reopened by name."""
        with self._lock:
            held = self.lent[name][1]
        fd = os.dup(held)
        try:
            flock(fd, LOCK_EX | LOCK_NB)  # (fails while anyone maps it)
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def give_back(self, lent: list, used=(), lost: bool = False) -> None:
        """A job ended: the segments it did not use return to the free list
        (unlinked if its worker died, or no computation runs); those it used
        hold values now (their handles own them)."""
        gone = []
        with self._lock:
            keep = self.running and not lost
            for n, _ in lent:
                entry = self.lent.pop(n, None)
                if entry is None:
                    continue
                if n in used:
                    gone.append((None, entry[1]))
                elif keep and len(self.free) < FREE_MAX:
                    self.free[n] = entry
                else:
                    gone.append((n, entry[1]))
        for n, fd in gone:
            _unlink_held(self.kind, n, fd)

    def take_free(self) -> list:
        """Free segments this process may rewrite itself (a job's inputs:
        ``claim_lent``)."""
        return self.lend()

    def sweep(self, prefix: str) -> int:
        """Unlink this owner's segments named ``prefix...`` that it holds no
        handle to (a dead worker's unreported results); how many."""
        return sweep(self.kind, prefix, self.owned)

    # -- the end --------------------------------------------------------------

    def close(self) -> None:
        """At exit: remove every segment of this owner, then the lock."""
        self.owned.clear()
        for name, (_, fd) in [*self.free.items(), *self.lent.items()]:
            _unlink_held(self.kind, name, fd)
        self.free, self.lent = {}, {}
        sweep(self.kind, self.prefix)
        self.kind.forget(self.owner)
        if self._lock_fd is not None:
            self.kind.remove_lock(self.owner, self._lock_fd)
            try:
                os.close(self._lock_fd)
            except OSError:
                pass

    def forget_in_child(self) -> None:
        """In a forked child: this store is the parent's (the lock stays
        the parent's: closing a copy of its descriptor releases nothing,
        and keeping it would keep the parent's lock after the parent)."""
        for fd in [self._lock_fd, *(fd for _, fd in self.free.values()),
                   *(fd for _, fd in self.lent.values())]:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


def _unlink_held(segment_kind: SegmentKind, name: str | None, fd: int) -> None:
    """Unlink free segment ``name`` (if given, and this user's) and close
    ``fd``, the free list's descriptor of it."""
    try:
        if name is not None:
            segment_kind.unlink(name)
    finally:
        os.close(fd)


# This process's stores: platform -> its store, or None where making it
# failed (the sweep of dead owners' segments, done before, is not
# repeated: a directory listing per job would be).  Guarded by
# _stores_lock; a forked child forgets both (below).
_stores: dict = {}
_stores_lock = threading.Lock()


@at_fork_in_child
def _forget_stores_in_child() -> None:
    global _stores_lock
    for s in _stores.values():
        if s is not None:
            s.forget_in_child()
    _stores.clear()
    _stores_lock = threading.Lock()


def store(platform: Platform) -> SegmentStore:
    """This process's store for ``platform``, created (with its lock and
    reaper) on first use; the first use also sweeps what dead owners of
    its kind left.  OSError if the lock file cannot be made
    (``usable_store`` then takes the pipes and asks again at the next job:
    the sweep is not repeated)."""
    s = _stores.get(platform)
    if s is not None:
        return s
    with _stores_lock:
        s = _stores.get(platform)
        if s is None:
            if platform not in _stores:
                _stores[platform] = None
                segment_kind = kind_of(platform)
                if segment_kind is not None:
                    sweep_stale(segment_kind)
            s = SegmentStore(platform)
            _stores[platform] = s
            import atexit

            atexit.register(_close_at_exit, s)
        return s


def current(platform: Platform) -> SegmentStore | None:
    """This process's store for ``platform`` if it has one."""
    return _stores.get(platform)


def stores() -> list[SegmentStore]:
    """This process's stores, one per platform a pool has used."""
    return [s for s in list(_stores.values()) if s is not None]


def held_bytes() -> int:
    """What this process's stores hold in no process's resident set
    (``SegmentStore.bytes_held``), summed."""
    return sum(s.bytes_held() for s in list(_stores.values()) if s is not None)


def _close_at_exit(s: SegmentStore) -> None:
    if s.pid == os.getpid():
        s.close()


# -- sweeps ------------------------------------------------------------------------


def sweep(segment_kind: SegmentKind, prefix: str, owned=()) -> int:
    """Unlink the segments of ``segment_kind`` named ``prefix...`` but those
    in ``owned`` (the handles their owner holds: a dead worker's unreported
    results go); how many.  Lists the directory (or reads the owner's
    journal): for a worker's death and exit, never a release."""
    n = 0
    for name in segment_kind.names(_owner_of(segment_kind, prefix)):
        if name.startswith(prefix) and name not in owned and not name.endswith(LOCK_SUFFIX):
            segment_kind.sweep_away(name)
            n += 1
    return n


def _owner_of(segment_kind: SegmentKind, name: str) -> str:
    """The owner part of a segment name, job prefix or lock file name."""
    return name[len(segment_kind.prefix):].split("-", 1)[0].removesuffix(LOCK_SUFFIX)


def sweep_stale(segment_kind: SegmentKind, mine: str | None = None) -> int:
    """Unlink what owners that no longer run left (killed, their reaper
    too); how many names.  An owner is judged by its lock, never its pid;
    a lock file that is not this user's regular file (another user's, a
    FIFO, a link) is never opened to wait, never removed: its owner counts
    as alive.  ``mine``: the owner label of a store of this process's (never
    judged)."""
    verdict: dict = {}
    names = [n for n in segment_kind.names() if n.startswith(segment_kind.prefix)]
    for name in names:
        owner = _owner_of(segment_kind, name)
        if owner != mine and owner not in verdict and "_" in owner:
            verdict[owner] = _take_if_dead(segment_kind, owner)
    n = 0
    for name in names:
        fd = verdict.get(_owner_of(segment_kind, name))
        if fd is not None and not name.endswith(LOCK_SUFFIX):
            segment_kind.sweep_away(name)
            n += 1
    for owner, fd in verdict.items():
        if fd is not None:
            segment_kind.forget(owner)
            segment_kind.remove_lock(owner, fd)
            os.close(fd)
    return n


def _take_if_dead(segment_kind: SegmentKind, owner: str) -> int | None:
    """The owner's lock, held exclusively, if the owner is dead (a
    descriptor to close once its names are gone); None if it lives, or its
    lock file is not one of this user's.  No lock file at all: it was never
    made, or its reaper removed it after its segments (a descriptor of
    /dev/null stands in)."""
    try:
        fd = segment_kind.open_lock(owner)
    except FileNotFoundError:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    if fd is None:
        return None
    try:
        flock(fd, LOCK_EX | LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def live_segments(pids=None, platform: Platform | None = None) -> dict:
    """``{name: size}`` of the localsched segments of ``platform``'s kind
    (None: the detected platform's) that exist (of the owner processes
    ``pids``, if given; lock files are not segments)."""
    out: dict = {}
    segment_kind = kind_of(platform or Platform.detect())
    if segment_kind is None:
        return out
    wanted = None if pids is None else {segment_kind.pid_label(p) for p in pids}
    for name in segment_kind.names():
        if not name.startswith(segment_kind.prefix) or name.endswith(LOCK_SUFFIX):
            continue
        if wanted is not None and _owner_of(segment_kind, name).split("_")[0] not in wanted:
            continue
        try:
            out[name] = segment_kind.size(name)
        except OSError:
            pass
    return out
