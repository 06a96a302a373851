"""Where a segment's bytes live, and how to reach them by name: the kinds
of segment (``localsched._platform`` says which this platform has).

Every kind answers the calls of ``SegmentKind``; ``segments`` (the store)
holds one of them, ``kind_in_use.kind()``, and asks only through those
calls and the class flags (``reuse``: a free list; ``owner_lock``: an
owner lock, a reaper and sweeps; ``maps_by_descriptor``: readers map a
descriptor themselves, copy-on-write, else ``read_private``;
``held_outside_rss``: a segment held as a handle is in no process's
resident set; ``writer_holds``: a writer holds what it wrote until its
owner does).

``DevShmFiles`` (Linux): files in ``/dev/shm``.  Written with ``pwrite``
(no mapping, no page faults on the writing side, ENOSPC instead of
SIGBUS), mapped copy-on-write (zero-copy), reusable through renames (the
free list), guarded by ``flock`` (a reader's shared lock keeps a lent
segment from being rewritten), found by listing the directory.

``PosixObjects`` (macOS, the BSDs): POSIX shared-memory objects.  macOS
sizes an object once, reads and writes it only through ``MAP_SHARED``
mappings, names it in 31 characters and lists nothing.  So an object is
sized, mapped and filled once; a reader copies it once into private
anonymous memory (the value is then the reader's alone, writable, as an
unpickled one would be); names are short (base 36); nothing is reused
(``reuse`` False: no free list); and each name goes into its owner's
*journal* (a file beside the owner's lock in ``_platform.registry_dir()``)
before the object exists, so that the reaper and the sweeps, which cannot
list objects, read the journal.  The journal is compacted (names whose
object is gone dropped) when it grows past ``JOURNAL_COMPACT`` bytes and
no computation runs.

``NamedMappings`` (Windows) and its simulation on Linux: see
``named_mappings``.
"""

from __future__ import annotations

import mmap
import os
import secrets
from typing import Any

from .. import _platform
from .._platform import LOCK_NB, LOCK_SH, SHM_DIR, flock

__all__ = ["SegmentKind", "DevShmFiles", "PosixObjects", "LOCK_SUFFIX", "JOURNAL_SUFFIX", "base36"]

LOCK_SUFFIX = ".lock"
JOURNAL_SUFFIX = ".names"
JOURNAL_COMPACT = 64 * 1024  # bytes of journal before a compaction is tried
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def base36(n: int) -> str:
    """``n`` (>= 0) in base 36: short names.

    >>> base36(0), base36(35), base36(4194304)
    ('0', 'z', '2hwcg')
    """
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = _DIGITS[d] + out
        if not n:
            return out


def _write_buffers(fd: int, layout: tuple, buffers: list) -> None:
    # pwrite copies straight into the file's pages (see the module note).
    for (off, n), b in zip(layout, buffers, strict=True):
        done = 0
        while done < n:
            done += os.pwrite(fd, b[done:], off + done)


class SegmentKind:
    """What every kind answers; the defaults are the common answers."""

    prefix = ""
    reuse = False  # released segments kept for reuse (renamed: a free list)
    owner_lock = True  # an owner lock file, a reaper, sweeps by name
    maps_by_descriptor = False  # readers map a descriptor (else read_private)
    held_outside_rss = False  # a held, unmapped segment is in no RSS
    writer_holds = False  # a writer holds what it wrote until the owner does
    number_text = staticmethod(base36)  # (how numbers appear in names)

    @property
    def directory(self) -> str:
        """Where the owner locks (and journals) are."""
        raise OSError(38, "no owner locks for this kind of segment")

    def pid_label(self, pid: int) -> str:
        return self.number_text(pid)

    def owner_label(self, pid: int) -> str:
        # Short (a POSIX name fits in 31 characters with the job's parts),
        # with a random part: owners in other PID namespaces share names.
        return f"{base36(pid)}_{base36(secrets.randbelow(36 ** 4))}"

    def usable(self, inodes: int) -> tuple[int | None, str]:
        """``(free bytes, or -1 if that cannot be known; "")`` if segments
        can be made now, else ``(None, why not)``."""
        return -1, ""

    def free_bytes(self) -> int | None:
        return None

    def register(self, name: str) -> None:
        """Note ``name`` before its segment is made (where nothing lists them)."""

    def create(self, name: str, size: int) -> Any:
        """A new segment ``name`` of ``size`` bytes: a token for ``write``."""
        raise NotImplementedError

    def write(self, token: Any, size: int, layout: tuple, buffers: list) -> None:
        raise NotImplementedError

    def done_writing(self, token: Any) -> None:
        os.close(token)

    def read_private(self, name: str, size: int) -> memoryview:
        """The segment's bytes as this process's own (copy-on-write or a
        copy): FileNotFoundError when it is gone."""
        raise NotImplementedError

    def adopt(self, name: str) -> None:
        """The owner received a handle to ``name`` (nothing to do where a
        segment lives until it is unlinked)."""

    def let_go(self, names: list) -> None:
        """A worker's segments its owner has adopted (see ``adopt``)."""

    def unlink(self, name: str) -> None:
        """This process is done with ``name``: the segment goes (where it
        lives until unlinked), or this process's handle of it closes."""
        raise NotImplementedError

    def sweep_away(self, name: str) -> None:
        """Remove ``name`` whoever holds it (the sweeps: a dead owner's or
        worker's segments)."""
        self.unlink(name)

    def rename(self, old: str, new: str) -> None:
        raise OSError(95, "segments of this kind cannot be renamed")

    def names(self, owner: str | None = None) -> list:
        """The names the sweeps may look at (those of ``owner``, or all)."""
        return []

    def size(self, name: str) -> int:
        raise FileNotFoundError(name)

    def forget(self, owner: str) -> None:
        """The owner is gone and its segments unlinked."""

    def compact(self, owner: str) -> None:
        """No computation runs: tidy what the owner keeps of its names."""

    def reaper_script(self) -> str:
        raise NotImplementedError


class DevShmFiles(SegmentKind):
    """Segments as files in ``/dev/shm`` (Linux)."""

    prefix = "localsched-"
    reuse = True  # renames make a free list
    maps_by_descriptor = True  # readers map copy-on-write, zero-copy

    @staticmethod
    def number_text(n: int) -> str:
        return str(n)

    @property
    def directory(self) -> str:
        return SHM_DIR

    def owner_label(self, pid: int) -> str:
        # (a random nonce: owners in other PID namespaces share /dev/shm)
        return f"{pid}_{secrets.token_hex(4)}"

    def usable(self, inodes: int) -> tuple[int | None, str]:
        """``(free bytes, "")`` if segments can be made now, else
        ``(None, why not)``."""
        st, why = _platform.shm_dir_stats(inodes)
        if st is None:
            return None, why
        return st.f_bavail * st.f_frsize, ""

    def free_bytes(self) -> int | None:
        st = os.statvfs(SHM_DIR)
        return st.f_bavail * st.f_frsize

    def create(self, name: str, size: int) -> Any:
        return os.open(os.path.join(SHM_DIR, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)

    def write(self, fd: Any, size: int, layout: tuple, buffers: list) -> None:
        _write_buffers(fd, layout, buffers)

    def open_for_reading(self, name: str) -> int:
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
        try:
            # Being rewritten (an exclusive lock): the handle is stale.
            flock(fd, LOCK_SH | LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FileNotFoundError(f"shared-memory segment {name} was released") from None
        return fd

    def unlink(self, name: str) -> None:
        try:
            os.unlink(os.path.join(SHM_DIR, name))
        except FileNotFoundError:
            pass

    def rename(self, old: str, new: str) -> None:
        os.rename(os.path.join(SHM_DIR, old), os.path.join(SHM_DIR, new))

    def names(self, owner: str | None = None) -> list:
        """Every name in the directory (``owner``: a hint others need)."""
        try:
            return os.listdir(SHM_DIR)
        except OSError:
            return []

    def size(self, name: str) -> int:
        return os.stat(os.path.join(SHM_DIR, name)).st_size

    def reaper_script(self) -> str:
        return _REAP_FILES


class PosixObjects(SegmentKind):
    """Segments as POSIX shared-memory objects (macOS, the BSDs)."""

    prefix = "lsc"
    held_outside_rss = True  # readers copy: nobody keeps a held one mapped

    def __init__(self) -> None:
        self._directory: str | None = None

    @property
    def directory(self) -> str:
        """The registry directory (made and checked once per process)."""
        if self._directory is None:
            self._directory = _platform.registry_dir()
        return self._directory

    def usable(self, inodes: int) -> tuple[int | None, str]:
        """``(-1, "")`` (the room left cannot be known: objects live in
        virtual memory) if the registry directory is there and writable,
        else ``(None, why not)``."""
        try:
            directory = self.directory
            if not os.access(directory, os.W_OK):
                return None, f"{directory} is not writable"
        except OSError as exc:
            return None, f"no directory for the owner lock ({exc.strerror or exc})"
        return -1, ""

    def create(self, name: str, size: int) -> Any:
        return _platform.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR)

    def write(self, fd: Any, size: int, layout: tuple, buffers: list) -> None:
        os.ftruncate(fd, size)  # (once: macOS allows no second)
        with mmap.mmap(fd, size) as pages:  # (MAP_SHARED, read and write)
            view = memoryview(pages)
            try:
                for (off, n), b in zip(layout, buffers, strict=True):
                    view[off:off + n] = memoryview(b).cast("B")
            finally:
                view.release()

    def open_for_reading(self, name: str) -> int:
        return _platform.shm_open(name, os.O_RDONLY)

    def read_private(self, name: str, size: int) -> memoryview:
        """The object's ``size`` bytes, copied once into private anonymous
        memory (page-aligned and writable; freed with the last view)."""
        fd = self.open_for_reading(name)
        try:
            shared = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        try:
            private = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)  # (anonymous)
            out = memoryview(private)
            with memoryview(shared) as source:
                out[:] = source
        finally:
            shared.close()
        return out

    def unlink(self, name: str) -> None:
        _platform.shm_unlink(name)

    def _journal(self, owner: str) -> str:
        return os.path.join(self.directory, f"{self.prefix}{owner}{JOURNAL_SUFFIX}")

    def register(self, name: str) -> None:
        """Append ``name`` to its owner's journal (before the object is
        made: a name in the journal may not exist; an object never lacks
        its name there)."""
        owner = name[len(self.prefix):].split("-", 1)[0]
        fd = os.open(self._journal(owner), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                     0o600)
        try:
            os.write(fd, name.encode() + b"\n")
        finally:
            os.close(fd)

    def names(self, owner: str | None = None) -> list:
        """The names in the journals (of ``owner`` alone, if given), and the
        lock files of the registry (the sweeps judge owners by them)."""
        try:
            directory = self.directory
            entries = os.listdir(directory)
        except OSError:
            return []
        out = [e for e in entries if e.endswith(LOCK_SUFFIX)]
        for entry in entries:
            if not entry.endswith(JOURNAL_SUFFIX):
                continue
            if owner is not None and entry != f"{self.prefix}{owner}{JOURNAL_SUFFIX}":
                continue
            try:
                with open(os.path.join(directory, entry), "rb") as f:
                    out.extend(line.decode() for line in f.read().split() if line)
            except (OSError, UnicodeDecodeError):
                continue
        return out

    def size(self, name: str) -> int:
        fd = self.open_for_reading(name)
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def forget(self, owner: str) -> None:
        """The owner is gone and its objects unlinked: its journal goes."""
        try:
            os.unlink(self._journal(owner))
        except OSError:
            pass

    def compact(self, owner: str) -> None:
        """Drop the names whose object is gone from ``owner``'s journal,
        once it is large (call while no computation runs: a worker's name
        appended meanwhile could be lost with the old file)."""
        path = self._journal(owner)
        try:
            if os.stat(path).st_size < JOURNAL_COMPACT:
                return
            with open(path, "rb") as f:
                names = [line.decode() for line in f.read().split() if line]
        except (OSError, UnicodeDecodeError):
            return
        alive = []
        for name in names:
            try:
                os.close(self.open_for_reading(name))
            except OSError:
                continue
            alive.append(name)
        tmp = f"{path}.{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write("".join(n + "\n" for n in alive).encode())
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def reaper_script(self) -> str:
        return _REAP_POSIX


# The reapers: wait for every holder of the owner's lock to go, then remove
# what the owner left.  Run as ``python -I -S -c SCRIPT <lock path> <prefix>``.
_REAP_WAIT = """\
import fcntl, os, sys
path, prefix = sys.argv[1], sys.argv[2]
try:
    fd = os.open(path, os.O_RDONLY)
except OSError:
    sys.exit()
fcntl.flock(fd, fcntl.LOCK_EX)
"""

_REAP_FILES = _REAP_WAIT + """\
d = os.path.dirname(path)
for name in os.listdir(d):
    if name.startswith(prefix):
        try:
            os.unlink(os.path.join(d, name))
        except OSError:
            pass
try:
    os.unlink(path)
except OSError:
    pass
"""

_REAP_POSIX = _REAP_WAIT + """\
import _posixshmem
journal = path[:-len(".lock")] + ".names"
try:
    with open(journal, "rb") as f:
        names = f.read().split()
except OSError:
    names = []
for name in names:
    try:
        _posixshmem.shm_unlink("/" + name.decode())
    except (OSError, UnicodeDecodeError):
        pass
for p in (journal, path):
    try:
        os.unlink(p)
    except OSError:
        pass
"""
