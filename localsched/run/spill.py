"""The spill store: results a memory budget moves out of RAM, one private
directory per computation.

The scheduler's budget decides *which* result goes to disk and when (the
one whose next use in the planned order is furthest away); this module only
writes, reads back and forgets values by task number, and cleans up after
itself and after owners that were killed.

The directory is made on the first ``put`` (a run that never spills
creates nothing), exclusively, mode 0700, and used by descriptor, so
nothing swapped in under its name is followed; an exclusive ``flock`` on
its ``owner.lock`` says its owner lives, whatever PID namespace it lives
in.  ``close()`` (the caller's ``finally``) or a finalizer removes it; a
killed owner's is reaped by the next store (``reap_stale``).  Details:
:class:`SpillStore`.

Each value is one file: pickle protocol 5 with its out-of-band buffers
written as they lie in memory and read back into fresh buffers, no copy
into one bytes object.  A write the disk refuses raises ``SpillError``
and the value stays with the caller: nothing is lost.

Why not ``zict``.  ``zict.File`` (dask.distributed's spill; zict 3.0)
writes a list of frames per key and reads them back as one buffer, in a
directory it makes with ``os.makedirs(exist_ok=True)``: no exclusive
private directory, no owner lock, nothing reaps a killed owner's files;
eviction is its callers' (here the scheduler chooses exactly).  What this
store needs from it, writing buffers to a file and reading them back, is
a few lines of ``os.writev``/``readinto``; the directory's life is the
part that matters, and zict has none of it.  So: our own code, no new
dependency.
"""

from __future__ import annotations

import errno
import io
import os
import pickle
import stat
import struct
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from ..system.platform import FILE_LOCKS, LOCK_EX, LOCK_NB, flock
from .budget_record import DISK_READ, DISK_WRITE, BudgetRecord

__all__ = ["SpillStore", "SpillError", "BudgetRecord", "reap_stale", "PREFIX",
           "LOCK_NAME", "LOCKLESS_GRACE"]

#: The name every spill directory starts with (what ``reap_stale`` looks at).
PREFIX = "localsched-spill-"
#: The owner's lock file inside a spill directory.
LOCK_NAME = "owner.lock"
#: Seconds after which a spill directory without a lock file is reaped.
LOCKLESS_GRACE = 600.0

_SUFFIX = ".spill"
_MAGIC = b"LSSPILL1"
_HEAD = struct.Struct("<8sQQ")  # magic, pickle length, number of buffers
_LEN = struct.Struct("<Q")
#: Errors of a disk that refuses the bytes: SpillError, not a crash.
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES,
                          errno.EPERM, errno.EFBIG})
#: Whether ``os.writev`` is there (not on Windows: one ``os.write`` per buffer).
_WRITEV = hasattr(os, "writev")
#: Buffers per ``writev`` call (POSIX guarantees at least 16; Linux takes 1024).
_IOV_MAX = 1024
#: Largest single write/read: Linux moves at most 0x7ffff000 bytes per call.
_CHUNK = 1 << 30
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)  # (Windows: no newline translation)
#: Whether directories are used by descriptor (the ``*at`` calls), else by path.
_AT = (os.open in os.supports_dir_fd and os.unlink in os.supports_dir_fd
       and os.rmdir in os.supports_dir_fd and os.listdir in os.supports_fd)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class SpillError(OSError):
    """The spill directory refused a value (disk full, read-only or
    unwritable, or the store's ``max_bytes`` cap); the value was not lost:
    the caller still holds it."""


class _Place:
    """A directory, by descriptor where the platform has the ``*at`` calls
    (files opened and removed relative to it: nothing swapped in under its
    name is followed), else by path (Windows)."""

    __slots__ = ("path", "fd")

    def __init__(self, path: str, fd: int | None):
        self.path, self.fd = path, fd

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        if self.fd is not None:
            return os.open(name, flags | _BINARY, mode, dir_fd=self.fd)
        return os.open(os.path.join(self.path, name), flags | _BINARY, mode)

    def unlink(self, name: str) -> None:
        if self.fd is not None:
            os.unlink(name, dir_fd=self.fd)
        else:
            os.unlink(os.path.join(self.path, name))

    def rmdir(self, name: str) -> None:
        if self.fd is not None:
            os.rmdir(name, dir_fd=self.fd)
        else:
            os.rmdir(os.path.join(self.path, name))

    def names(self) -> list[str]:
        return os.listdir(self.fd if self.fd is not None else self.path)

    def mtime(self) -> float:
        return (os.fstat(self.fd) if self.fd is not None else os.stat(self.path)).st_mtime

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Dir:
    """The store's directory and its lock: what the finalizer needs (no
    reference back to the store)."""

    __slots__ = ("place", "lock_fd", "pid", "open")

    def __init__(self, place: _Place, lock_fd: int):
        self.place, self.lock_fd, self.pid, self.open = place, lock_fd, os.getpid(), True

    @property
    def path(self) -> str:
        return self.place.path


def _remove_dir(d: _Dir) -> None:
    """Remove the directory's files, the lock last, then the directory
    (in the process that made it only)."""
    if not d.open or d.pid != os.getpid():
        return
    d.open = False
    try:
        _empty(d.place, d.lock_fd)
        try:
            os.rmdir(d.path)
        except OSError:
            pass
    finally:
        d.place.close()


def _empty(place: _Place, lock_fd: int | None = None) -> None:
    """Unlink every entry but subdirectories (none are made), the lock file
    last (closed first where given: Windows removes no open file); never
    follows a link (unlink removes the link itself)."""
    names = place.names()
    names.sort(key=lambda n: n == LOCK_NAME)
    for name in names:
        if name == LOCK_NAME and lock_fd is not None:
            os.close(lock_fd)
            lock_fd = None
        try:
            place.unlink(name)
        except OSError:
            pass
    if lock_fd is not None:
        os.close(lock_fd)


def _mine(st: os.stat_result) -> bool:
    """A directory (not a link, nor a Windows junction) this user owns."""
    if not stat.S_ISDIR(st.st_mode):
        return False
    if getattr(st, "st_file_attributes", 0) & 0x400:  # (FILE_ATTRIBUTE_REPARSE_POINT)
        return False
    return not hasattr(os, "geteuid") or st.st_uid == os.geteuid()


def _owned_dir(name: str, parent: _Place, check_private: bool) -> _Place | None:
    """Directory ``name`` of ``parent`` if it is one, owned by this user
    (and, when asked, closed to others); None otherwise.  Never follows a
    link nor blocks (a fifo under the name is refused, not opened)."""
    path = os.path.join(parent.path, name)
    if not _AT:
        try:
            st = os.lstat(path)
        except OSError:
            return None
        return _Place(path, None) if _mine(st) else None
    try:
        fd = os.open(name, _DIR_FLAGS | _NONBLOCK, dir_fd=parent.fd)
    except OSError:
        return None
    st = os.fstat(fd)
    if not _mine(st) or (check_private and st.st_mode & 0o077):
        os.close(fd)
        return None
    return _Place(path, fd)


def _make_private_dir(root: str) -> _Dir:
    """Create and lock a fresh spill directory under ``root``."""
    for _ in range(100):
        name = PREFIX + os.urandom(8).hex()
        try:
            os.mkdir(os.path.join(root, name), 0o700)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(errno.EEXIST, "no fresh spill directory name", root)
    parent = _Place(root, None)
    if _AT:
        parent.fd = os.open(root, _DIR_FLAGS)
    try:
        place = _owned_dir(name, parent, check_private=True)
    finally:
        parent.close()
    path = os.path.join(root, name)
    if place is None:
        raise SpillError(errno.EPERM, f"spill directory {path} is not a private directory "
                         "of this user after creation", path)
    try:
        lock_fd = place.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW)
    except BaseException:
        place.close()
        try:
            os.rmdir(path)
        except OSError:
            pass
        raise
    if FILE_LOCKS:
        flock(lock_fd, LOCK_EX | LOCK_NB)
    return _Dir(place, lock_fd)


def _take_if_dead(place: _Place) -> int | None:
    """Whether the directory's owner is gone: its lock held exclusively (a
    descriptor to close after the removal), -2 when there is no lock file
    any more (the directory old enough, or, without file locks, the lock
    file removable: Windows removes no file its owner has open), None when
    the owner lives or it is not ours to judge."""
    try:
        lock_fd = place.open(LOCK_NAME, os.O_RDWR | _NOFOLLOW | _NONBLOCK)
    except FileNotFoundError:
        age = time.time() - place.mtime()
        return -2 if age > LOCKLESS_GRACE else None
    except OSError:
        return None
    st = os.fstat(lock_fd)
    if not stat.S_ISREG(st.st_mode) or hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        os.close(lock_fd)
        return None
    if not FILE_LOCKS:
        os.close(lock_fd)
        try:
            place.unlink(LOCK_NAME)
        except OSError:
            return None
        return -2
    try:
        flock(lock_fd, LOCK_EX | LOCK_NB)
    except OSError:
        os.close(lock_fd)
        return None
    return lock_fd


def reap_stale(root: str | None = None) -> int:
    """Remove the spill directories under ``root`` (default: the temp
    directory) whose owner is gone (killed before it could clean up); how
    many.  Touches only ``localsched-spill-*`` directories this user owns,
    never follows a link, never waits on a lock."""
    if root is None:
        import tempfile

        root = tempfile.gettempdir()
    parent = _Place(root, None)
    try:
        if _AT:
            parent.fd = os.open(root, _DIR_FLAGS)
        names = parent.names()
    except OSError:
        parent.close()
        return 0
    n = 0
    try:
        for name in names:
            if name.startswith(PREFIX) and _reap_one(name, parent):
                n += 1
    finally:
        parent.close()
    return n


def _reap_one(name: str, parent: _Place) -> bool:
    """Reap one candidate directory if its owner is gone."""
    place = _owned_dir(name, parent, check_private=False)
    if place is None:
        return False
    try:
        lock_fd = _take_if_dead(place)
        if lock_fd is None:
            return False
        try:
            _empty(place, lock_fd if lock_fd >= 0 else None)
            parent.rmdir(name)
        except OSError:
            return False
        return True
    finally:
        place.close()


def _dumps(value: Any) -> tuple[bytes, list[memoryview]]:
    """The pickle stream and the out-of-band buffers (raw, contiguous)."""
    buffers: list = []
    try:
        data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception:
        try:
            import cloudpickle
        except ImportError:
            raise
        buffers = []
        data = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    return data, [b.raw() for b in buffers]


def _write_all(fd: int, views: Sequence[memoryview]) -> None:
    """Write every byte of ``views`` in order (``writev``, partial writes
    and the per-call limits handled)."""
    pending = [v.cast("B") if v.ndim != 1 or v.format != "B" else v for v in views if v.nbytes]
    i = 0
    while i < len(pending):
        batch: list[memoryview] = []
        total = 0
        for v in pending[i:i + _IOV_MAX]:
            if total + v.nbytes > _CHUNK and batch:
                break
            batch.append(v[:_CHUNK - total] if total + v.nbytes > _CHUNK else v)
            total += batch[-1].nbytes
        written = os.writev(fd, batch) if _WRITEV else os.write(fd, batch[0])
        while written:
            v = pending[i]
            if written >= v.nbytes:
                written -= v.nbytes
                i += 1
            else:
                pending[i] = v[written:]
                written = 0


def _read_exactly(fd: int, view: memoryview) -> None:
    """Fill ``view`` from ``fd`` (``readinto``, short reads handled)."""
    got, n = 0, view.nbytes
    with io.FileIO(fd, "rb", closefd=False) as f:
        while got < n:
            k = f.readinto(view[got:got + _CHUNK])
            if not k:
                raise EOFError("spill file ended early")
            got += k


class SpillStore:
    """Values moved out of memory, by task number, in a private directory.

    ``directory_root``: where the directory is made (default: the temp
    directory at the first ``put``); ``max_bytes``: a cap on the bytes on
    disk at once (None: the disk's room).  ``put``/``get``/``drop`` move
    one value; ``close()`` removes everything (idempotent).
    ``spilled_bytes``: bytes on disk now; ``events``: ``(start, end,
    activity, task_id, nbytes)`` per write (``"disk-write"``) and read
    (``"disk-read"``), epoch seconds; ``directory``: the directory's path
    once made (None before the first ``put`` and after ``close``).

    The directory.  Created on the first ``put`` (a run that never spills
    creates nothing), exclusively (``mkdir`` of a random name: an existing
    name, link included, is never reused), mode 0700, under ``directory_root``
    or the temp directory (``tempfile.gettempdir()``, read then).  It is opened
    once (``O_DIRECTORY | O_NOFOLLOW``), checked on the descriptor (a directory
    this user owns, no access for others) and every file is made and removed
    relative to that descriptor, so nothing swapped in under the name is
    followed.  Inside, ``owner.lock`` carries an exclusive ``flock`` for the
    store's life: the owner's liveness, whatever PID namespace it lives in.

    Cleaning up.  ``close()`` removes the directory (idempotent; the caller's
    ``finally`` calls it, so it runs on success, failure and Ctrl-C); a
    ``weakref.finalize`` does it too when the store is dropped or the
    interpreter exits (only in the process that made it: a forked child never
    removes its parent's directory).  A process killed outright (SIGKILL, OOM
    killer) leaves its directory; the next store's first ``put`` calls
    ``reap_stale(root)``, which removes the directories named
    ``localsched-spill-*`` in the root whose lock can be taken at once (their
    owner is gone): only directories, owned by this user, opened without
    following links and without blocking (a fifo or a link planted under the
    name is left alone, a live owner's lock is never waited on).  A directory
    without a lock file is younger than its owner's next step or a kill in
    between: it is removed once older than ``LOCKLESS_GRACE`` seconds.

    The format.  Pickle protocol 5 with out-of-band buffers (NumPy arrays,
    pandas' blocks, ``bytes``-like values): one file per value, a header (the
    lengths), the pickle stream, then each buffer as it lies in memory,
    written with ``os.writev`` straight from the buffers (no copy into one
    bytes object).  Reading allocates one fresh ``bytearray`` per buffer and
    fills it with ``readinto``; the unpickled arrays own it (as writable as the
    originals were).  Values
    pickle cannot take fall back to ``cloudpickle`` where installed.

    Errors.  A write refused by the disk (full ``ENOSPC``, quota ``EDQUOT``,
    read-only ``EROFS``, unwritable ``EACCES``/``EPERM``, file too large
    ``EFBIG``) or a ``max_bytes`` cap that the value would exceed raises
    ``SpillError`` (an ``OSError``) naming the directory and the bytes; the
    partial file is removed and the value stays with the caller: nothing is
    lost.  A value that cannot be pickled raises pickle's own error.

    Portability.  Where the platform lacks the ``*at`` calls or ``writev``
    (Windows), the directory is used by path and each buffer takes its own
    ``os.write``; without ``flock``, an owner's liveness is its open lock file,
    which Windows refuses to remove while it is open: a reaper that can remove
    it knows the owner is gone.

    Not thread-safe per task number: the budget calls ``put``/``get``/``drop``
    for one task from one thread at a time; the bookkeeping (bytes, events,
    the directory's creation) is under a lock.
    """

    def __init__(self, directory_root: str | None = None, max_bytes: int | None = None):
        self.directory_root = directory_root
        self.max_bytes = max_bytes
        self.spilled_bytes = 0
        self.events: list[tuple[float, float, str, int, int]] = []
        self._sizes: dict[int, int] = {}
        self._lock = threading.Lock()
        self._dir: _Dir | None = None
        self._finalizer: weakref.finalize | None = None
        self._closed = False

    @property
    def directory(self) -> str | None:
        d = self._dir
        return d.path if d is not None and d.open else None

    def __contains__(self, task_id: int) -> bool:
        return task_id in self._sizes

    def __len__(self) -> int:
        return len(self._sizes)

    def _root(self) -> str:
        if self.directory_root is not None:
            return self.directory_root
        import tempfile

        return tempfile.gettempdir()

    def _opened(self) -> _Dir:
        """The directory, made (and stale ones reaped) on first use."""
        with self._lock:
            if self._closed:
                raise ValueError("spill store is closed")
            if self._dir is None:
                root = self._root()
                reap_stale(root)
                try:
                    self._dir = _make_private_dir(root)
                except OSError as e:
                    if e.errno in _DISK_ERRNOS or isinstance(e, FileNotFoundError):
                        raise SpillError(e.errno, f"cannot create a spill directory under "
                                         f"{root}: {e.strerror}", root) from e
                    raise
                self._finalizer = weakref.finalize(self, _remove_dir, self._dir)
            return self._dir

    def put(self, task_id: int, value: Any) -> int:
        """Write ``value`` as task ``task_id``'s (replacing any); the bytes
        written.  ``SpillError`` when the disk or the cap refuses it (the
        value is untouched, nothing of it is left on disk)."""
        data, raws = _dumps(value)
        head = _HEAD.pack(_MAGIC, len(data), len(raws))
        lengths = b"".join(_LEN.pack(r.nbytes) for r in raws)
        nbytes = len(head) + len(lengths) + len(data) + sum(r.nbytes for r in raws)
        d = self._opened()
        old = self._sizes.get(task_id, 0)
        with self._lock:
            if self.max_bytes is not None and self.spilled_bytes - old + nbytes > self.max_bytes:
                raise SpillError(errno.ENOSPC, f"spilling {nbytes} bytes to {d.path} would "
                                 f"exceed the cap of {self.max_bytes} bytes "
                                 f"({self.spilled_bytes} spilled)", d.path)
        start = time.time()
        name = f"{task_id}{_SUFFIX}"
        try:
            fd = d.place.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW)
            try:
                _write_all(fd, [memoryview(head), memoryview(lengths), memoryview(data), *raws])
            finally:
                os.close(fd)
        except OSError as e:
            self._forget_file(name, d)
            with self._lock:
                self.spilled_bytes -= self._sizes.pop(task_id, 0)
            if e.errno in _DISK_ERRNOS:
                raise SpillError(e.errno, f"cannot spill {nbytes} bytes to {d.path}: "
                                 f"{e.strerror} ({self.spilled_bytes} bytes spilled there)",
                                 d.path) from e
            raise
        with self._lock:
            self._sizes[task_id] = nbytes
            self.spilled_bytes += nbytes - old
            self.events.append((start, time.time(), DISK_WRITE, task_id, nbytes))
        return nbytes

    @staticmethod
    def _forget_file(name: str, d: _Dir) -> None:
        try:
            d.place.unlink(name)
        except OSError:
            pass

    def get(self, task_id: int) -> Any:
        """Read task ``task_id``'s value back (fresh buffers; the file stays
        until ``drop``).  KeyError if it was not spilled."""
        if task_id not in self._sizes:
            raise KeyError(task_id)
        d = self._opened()
        start = time.time()
        fd = d.place.open(f"{task_id}{_SUFFIX}", os.O_RDONLY | _NOFOLLOW)
        try:
            head = bytearray(_HEAD.size)
            _read_exactly(fd, memoryview(head))
            magic, ndata, nbuf = _HEAD.unpack(head)
            if magic != _MAGIC:
                raise ValueError(f"not a spill file: {d.path}/{task_id}{_SUFFIX}")
            lengths = bytearray(_LEN.size * nbuf)
            _read_exactly(fd, memoryview(lengths))
            data = bytearray(ndata)
            _read_exactly(fd, memoryview(data))
            buffers = []
            for (n,) in _LEN.iter_unpack(lengths):
                buf = bytearray(n)
                _read_exactly(fd, memoryview(buf))
                buffers.append(buf)
        finally:
            os.close(fd)
        value = pickle.loads(data, buffers=buffers)
        nbytes = self._sizes.get(task_id, 0)
        with self._lock:
            self.events.append((start, time.time(), DISK_READ, task_id, nbytes))
        return value

    def drop(self, task_id: int) -> None:
        """Forget task ``task_id``'s spilled value (its file goes); no error
        if there is none."""
        with self._lock:
            n = self._sizes.pop(task_id, None)
            if n is None:
                return
            self.spilled_bytes -= n
            d = self._dir
        if d is not None and d.open:
            self._forget_file(f"{task_id}{_SUFFIX}", d)

    def close(self) -> None:
        """Remove the directory and everything in it (idempotent)."""
        with self._lock:
            self._closed = True
            self._sizes.clear()
            self.spilled_bytes = 0
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()

    def __enter__(self) -> SpillStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<SpillStore {self.directory or self._root()!r}: {len(self._sizes)} values, "
                f"{self.spilled_bytes} bytes>")
