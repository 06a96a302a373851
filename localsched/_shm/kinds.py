"""Where a segment's bytes live, and how to reach them by name: the kinds
of segment (``localsched.system.platform`` says which this platform has).

Every kind answers the calls of ``SegmentKind``; ``store``
holds one of them (its platform's: ``kind_in_use.kind_of``), and asks only through those
calls and the class flags (``reuse``: a free list; ``owner_lock``: an
owner lock, a reaper and sweeps; ``maps_by_descriptor``: readers map a
descriptor themselves, copy-on-write, else ``read_private``;
``held_outside_rss``: a segment held as a handle is in no process's
resident set; ``writer_holds``: a writer holds what it wrote until its
owner does).

Beside other users.  ``/dev/shm`` and the temporary directory are shared
and anyone may plant a file, a link or a FIFO at a name localsched used
or will use.  So every kind keeps these rules: a segment, a lock file or
a journal is made exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``); a name
is opened again only without following links and without waiting
(``_platform.O_CAREFUL``), and what was opened is used only if ``fstat``
on the descriptor says it is a regular file of this user's
(``_platform.is_ours``); a name is removed only after ``lstat`` (or, for
objects, ``fstat``) says it is ours -- in a sticky directory no other
user can then swap it before the removal.  Nothing is ever renamed.  A
planted name therefore costs at most that segment (the value takes the
pipe, with one warning): never a value written into another user's file,
never a wait on a FIFO, never another user's file removed.

The kinds: ``DevShmFiles`` (Linux: files, written with ``pwrite``,
mapped copy-on-write, reused in place), ``PosixObjects`` (macOS, the BSDs:
objects filled once and copied out by readers, a journal of names since
they cannot be listed) and ``NamedMappings`` (Windows, and its simulation
on Linux: ``named_mappings``); each class's docstring says why it does
what it does.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import secrets
import stat
from collections.abc import Iterator
from typing import Any

from ..system import platform as _platform
from ..system.platform import LOCK_EX, LOCK_NB, LOCK_SH, LOCK_UN, O_CAREFUL, SHM_DIR, flock, is_ours

__all__ = ["SegmentKind", "DevShmFiles", "PosixObjects", "LOCK_SUFFIX", "JOURNAL_SUFFIX", "base36"]

LOCK_SUFFIX = ".lock"
JOURNAL_SUFFIX = ".names"
JOURNAL_COMPACT = 64 * 1024  # bytes of journal before a compaction is tried
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_CREATE = os.O_CREAT | os.O_EXCL | O_CAREFUL


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
    # pwrite copies straight into the file's pages (see DevShmFiles).
    for (off, n), b in zip(layout, buffers, strict=True):
        done = 0
        while done < n:
            done += os.pwrite(fd, b[done:], off + done)


def _not_ours(name: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, "not a segment of this user's (planted by another?)",
                             name)


def open_checked(path: str, flags: int, dir_fd: int | None = None) -> int:
    """``path`` opened without following a link or waiting on a FIFO, if it
    is a regular file of this user's; FileNotFoundError otherwise (the
    descriptor closed: what someone else planted is never used)."""
    fd = os.open(path, flags | O_CAREFUL, dir_fd=dir_fd)
    try:
        if not is_ours(os.fstat(fd)):
            raise _not_ours(path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def remove_if_ours(path: str, dir_fd: int | None = None, same_as: int | None = None) -> None:
    """Remove ``path`` if it is a regular file of this user's (and the file
    of descriptor ``same_as``, if given); anything else stays.  In a
    sticky directory nobody else can swap our file between the look and
    the removal."""
    try:
        st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        if not is_ours(st):
            return
        if same_as is not None:
            held = os.fstat(same_as)
            if (held.st_dev, held.st_ino) != (st.st_dev, st.st_ino):
                return
        os.unlink(path, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


class SegmentKind:
    """What every kind answers; the defaults are the common answers."""

    prefix = ""
    reuse = False  # released segments kept for reuse in place (a free list)
    owner_lock = True  # an owner lock file, a reaper, sweeps by name
    maps_by_descriptor = False  # readers map a descriptor (else read_private)
    held_outside_rss = False  # a held, unmapped segment is in no RSS
    writer_holds = False  # a writer holds what it wrote until the owner does
    number_text = staticmethod(base36)  # (how numbers appear in names)

    @property
    def directory(self) -> str:
        """Where the owner locks (and journals) are."""
        raise OSError(errno.ENOSYS, "no owner locks for this kind of segment")

    def use_directory(self, path: str) -> None:
        """(In a worker) the owner's ``directory``, as the owner found it."""

    def _at(self, name: str) -> tuple[str, int | None]:
        """``(path, dir_fd)`` of a name beside the owner locks."""
        return os.path.join(self.directory, name), None

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

    def room(self) -> tuple[int, int] | None:
        """``(free bytes, free inodes or -1 for no limit)`` now, or None
        where that cannot be known (``room``)."""
        return None

    # -- the owner lock (``store``: who holds it, and what it means) -----------

    def lock_name(self, owner: str) -> str:
        return f"{self.prefix}{owner}{LOCK_SUFFIX}"

    def create_lock(self, owner: str) -> int:
        """A new lock file for ``owner`` (FileExistsError if the name is
        taken: by another user's plant, as the name is random)."""
        path, dir_fd = self._at(self.lock_name(owner))
        return os.open(path, _CREATE | os.O_RDWR, 0o600, dir_fd=dir_fd)

    def open_lock(self, owner: str) -> int | None:
        """``owner``'s lock file, opened to be locked; None if the name is
        not a lock file of this user's (never waited on, never removed);
        FileNotFoundError if there is none."""
        path, dir_fd = self._at(self.lock_name(owner))
        try:
            return open_checked(path, os.O_RDONLY, dir_fd)
        except FileNotFoundError:
            if os.path.lexists(path) if dir_fd is None else _lexists(path, dir_fd):
                return None
            raise
        except OSError:  # (a link: ELOOP; a directory; no permission)
            return None

    def lock_still_named(self, owner: str, fd: int) -> bool:
        """Whether ``fd`` is still the file named ``owner``'s lock."""
        path, dir_fd = self._at(self.lock_name(owner))
        try:
            named = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return False
        held = os.fstat(fd)
        return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)

    def remove_lock(self, owner: str, fd: int) -> None:
        """Remove ``owner``'s lock file if it is still the file of ``fd``."""
        path, dir_fd = self._at(self.lock_name(owner))
        remove_if_ours(path, dir_fd, same_as=fd)

    # -- segments ----------------------------------------------------------------

    @contextlib.contextmanager
    def registering(self, name: str) -> Iterator[None]:
        """Around the making of segment ``name`` (where nothing lists them,
        its name is noted first)."""
        yield

    def create(self, name: str, size: int) -> Any:
        """A new segment ``name`` of ``size`` bytes: a token for ``write``."""
        raise NotImplementedError

    def open_to_rewrite(self, name: str, size: int) -> Any:
        """A free segment ``name`` of this user's, locked exclusively and
        sized ``size``: a token for ``write``; OSError if it cannot be had."""
        raise OSError(errno.ENOTSUP, "segments of this kind are not reused")

    def hold(self, name: str) -> int:
        """A descriptor of this user's segment ``name`` (the free list's)."""
        raise OSError(errno.ENOTSUP, "segments of this kind are not reused")

    def write(self, token: Any, size: int, layout: tuple, buffers: list) -> None:
        raise NotImplementedError

    def done_writing(self, token: Any) -> None:
        os.close(token)

    def read_private(self, name: str, size: int) -> memoryview:
        """The segment's bytes as this process's own (copy-on-write or a
        copy): FileNotFoundError when it is gone."""
        raise NotImplementedError

    def open_for_reading(self, name: str) -> int:
        """A descriptor to map segment ``name`` from (``maps_by_descriptor``
        kinds), checked to be this user's."""
        raise NotImplementedError

    def adopt(self, name: str) -> None:
        """The owner received a handle to ``name`` (nothing to do where a
        segment lives until it is unlinked)."""

    def let_go(self, names: list) -> None:
        """A worker's segments its owner has adopted (see ``adopt``)."""

    def unlink(self, name: str) -> None:
        """This process is done with ``name``: the segment goes (where it
        lives until unlinked, and if it is this user's), or this process's
        handle of it closes."""
        raise NotImplementedError

    def sweep_away(self, name: str) -> None:
        """Remove ``name`` whoever holds it (the sweeps: a dead owner's or
        worker's segments; never another user's)."""
        self.unlink(name)

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


def _lexists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


class DevShmFiles(SegmentKind):
    """Segments as files in ``/dev/shm`` (Linux).

    Written with ``pwrite``
    (no mapping, no page faults on the writing side, ENOSPC instead of
    SIGBUS), mapped copy-on-write (zero-copy), reusable in place (the free
    list keeps a released segment under its name, its owner holding a
    descriptor of it), guarded by ``flock`` (a reader's shared lock keeps a
    lent segment from being rewritten), found by listing the directory.
    """

    prefix = "localsched-"
    reuse = True  # a free list, reused in place
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

    def room(self) -> tuple[int, int] | None:
        st = os.statvfs(SHM_DIR)
        return st.f_bavail * st.f_frsize, st.f_favail if st.f_files else -1

    def create(self, name: str, size: int) -> Any:
        return os.open(os.path.join(SHM_DIR, name), _CREATE | os.O_RDWR, 0o600)

    def open_to_rewrite(self, name: str, size: int) -> Any:
        fd = open_checked(os.path.join(SHM_DIR, name), os.O_RDWR)
        try:
            flock(fd, LOCK_EX | LOCK_NB)  # (fails while anyone maps it)
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def hold(self, name: str) -> int:
        # (read and write: the owner rewrites its own job's inputs through it)
        return open_checked(os.path.join(SHM_DIR, name), os.O_RDWR)

    def write(self, fd: Any, size: int, layout: tuple, buffers: list) -> None:
        _write_buffers(fd, layout, buffers)

    def done_writing(self, fd: Any) -> None:
        flock(fd, LOCK_UN)  # (a reused segment's: a descriptor of it may stay open)
        os.close(fd)

    def open_for_reading(self, name: str) -> int:
        fd = open_checked(os.path.join(SHM_DIR, name), os.O_RDONLY)
        try:
            # Being rewritten (an exclusive lock): the handle is stale.
            flock(fd, LOCK_SH | LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FileNotFoundError(f"shared-memory segment {name} was released") from None
        return fd

    def unlink(self, name: str) -> None:
        remove_if_ours(os.path.join(SHM_DIR, name))

    def names(self, owner: str | None = None) -> list:
        """Every name in the directory (``owner``: a hint others need)."""
        try:
            return os.listdir(SHM_DIR)
        except OSError:
            return []

    def size(self, name: str) -> int:
        st = os.stat(os.path.join(SHM_DIR, name), follow_symlinks=False)
        if not is_ours(st):
            raise _not_ours(name)
        return st.st_size

    def reaper_script(self) -> str:
        return _REAP_FILES


def _object_is_ours(fd: int) -> bool:
    # (macOS reports an object's owner; its type may read as 0 there)
    st = os.fstat(fd)
    return st.st_uid == _platform.euid() and stat.S_IFMT(st.st_mode) in (0, stat.S_IFREG)


class PosixObjects(SegmentKind):
    """Segments as POSIX shared-memory objects (macOS, the BSDs).

    macOS
    sizes an object once, reads and writes it only through ``MAP_SHARED``
    mappings, names it in 31 characters and lists nothing.  So an object is
    sized, mapped and filled once; a reader copies it once into private
    anonymous memory (the value is then the reader's alone, writable, as an
    unpickled one would be); names are short (base 36); nothing is reused
    (``reuse`` False: no free list); and each name goes into its owner's
    *journal* (a file beside the owner's lock in ``_platform.registry_dir()``,
    a private directory used through its descriptor; workers are handed
    their owner's, wherever its temporary directory was) before the object
    exists, so that the reaper and the sweeps, which cannot list objects,
    read the journal.  A writer holds a shared ``flock`` on the journal from
    its append until its object exists; the compaction (names whose object
    is gone dropped, once the journal grows past ``JOURNAL_COMPACT`` bytes and
    no computation runs) holds it exclusively, so no name written meanwhile,
    nor one whose object is about to be made, is lost.
    """

    prefix = "lsc"
    held_outside_rss = True  # readers copy: nobody keeps a held one mapped

    def __init__(self) -> None:
        self._registry: tuple[str, int] | None = None  # (path, descriptor)

    def _directory_fd(self) -> tuple[str, int]:
        """The registry directory, made and checked once per process."""
        if self._registry is None:
            self._registry = _platform.registry_dir()
        return self._registry

    @property
    def directory(self) -> str:
        return self._directory_fd()[0]

    def use_directory(self, path: str) -> None:
        if self._registry is None or self._registry[0] != path:
            old, self._registry = self._registry, _platform.registry_dir(path)
            if old is not None:
                os.close(old[1])

    def _at(self, name: str) -> tuple[str, int | None]:
        return name, self._directory_fd()[1]

    def usable(self, inodes: int) -> tuple[int | None, str]:
        """``(-1, "")`` (the room left cannot be known: objects live in
        virtual memory) if the registry directory is this user's private
        directory, else ``(None, why not)``."""
        try:
            self._directory_fd()
        except OSError as exc:
            return None, f"no private directory for the owner lock ({exc.strerror or exc})"
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
        fd = _platform.shm_open(name, os.O_RDONLY)
        if not _object_is_ours(fd):
            os.close(fd)
            raise _not_ours(name)
        return fd

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
        # Objects have no lstat: the name is opened and its owner checked
        # (others cannot remove an object of ours in between).
        try:
            fd = _platform.shm_open(name, os.O_RDONLY)
        except OSError:
            return
        try:
            ours = _object_is_ours(fd)
        finally:
            os.close(fd)
        if ours:
            _platform.shm_unlink(name)

    def _journal(self, owner: str) -> str:
        return f"{self.prefix}{owner}{JOURNAL_SUFFIX}"

    @contextlib.contextmanager
    def registering(self, name: str) -> Iterator[None]:
        """Append ``name`` to its owner's journal and hold a shared lock on
        the journal until the object is made (a name in the journal may not
        exist; an object never lacks its name there, and a compaction,
        which holds the lock exclusively, never drops a name whose object
        is being made)."""
        owner = name[len(self.prefix):].split("-", 1)[0]
        fd = self._locked_journal(owner)
        try:
            os.write(fd, name.encode() + b"\n")
            yield
        finally:
            os.close(fd)

    def register(self, name: str) -> None:
        """Append ``name`` to its owner's journal."""
        with self.registering(name):
            pass

    def _locked_journal(self, owner: str) -> int:
        """The owner's journal, opened to append and holding a shared lock,
        the file its name has (a compaction may have replaced the one
        opened while this waited for the lock)."""
        directory = self._directory_fd()[1]
        name = self._journal(owner)
        while True:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | O_CAREFUL, 0o600,
                         dir_fd=directory)
            try:
                if not is_ours(os.fstat(fd)):
                    raise _not_ours(name)
                flock(fd, LOCK_SH)
                named = os.stat(name, dir_fd=directory, follow_symlinks=False)
                held = os.fstat(fd)
            except BaseException:
                os.close(fd)
                raise
            if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
                return fd
            os.close(fd)

    def _read_journal(self, name: str, directory: int) -> list:
        fd = open_checked(name, os.O_RDONLY, directory)
        with os.fdopen(fd, "rb") as f:
            return [line.decode() for line in f.read().split() if line]

    def names(self, owner: str | None = None) -> list:
        """The names in the journals (of ``owner`` alone, if given), and the
        lock files of the registry (the sweeps judge owners by them)."""
        try:
            directory = self._directory_fd()[1]
            entries = os.listdir(directory)
        except OSError:
            return []
        out = [e for e in entries if e.endswith(LOCK_SUFFIX)]
        for entry in entries:
            if not entry.endswith(JOURNAL_SUFFIX):
                continue
            if owner is not None and entry != self._journal(owner):
                continue
            try:
                out.extend(self._read_journal(entry, directory))
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
            remove_if_ours(self._journal(owner), self._directory_fd()[1])
        except OSError:
            pass

    def compact(self, owner: str) -> None:
        """Drop the names whose object is gone from ``owner``'s journal,
        once it is large, holding the journal's lock exclusively (see
        ``registering``)."""
        directory = self._directory_fd()[1]
        name = self._journal(owner)
        try:
            fd = open_checked(name, os.O_RDONLY, directory)
        except OSError:
            return
        try:
            if os.fstat(fd).st_size < JOURNAL_COMPACT:
                return
            flock(fd, LOCK_EX)
            names = self._read_journal(name, directory)
            alive = []
            for n in names:
                try:
                    os.close(self.open_for_reading(n))
                except OSError:
                    continue
                alive.append(n)
            tmp = f"{name}.{os.getpid()}"
            remove_if_ours(tmp, directory)
            out = os.open(tmp, _CREATE | os.O_WRONLY, 0o600, dir_fd=directory)
            try:
                os.write(out, "".join(n + "\n" for n in alive).encode())
            finally:
                os.close(out)
            os.replace(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except (OSError, UnicodeDecodeError):
            remove_if_ours(f"{name}.{os.getpid()}", directory)
        finally:
            os.close(fd)

    def reaper_script(self) -> str:
        return _REAP_POSIX


# The reapers: wait for every holder of the owner's lock to go, then remove
# what the owner left -- what is this user's alone, as everywhere else.  Run
# as ``python -I -S -c SCRIPT <directory> <lock name> <prefix>``.
_REAP_WAIT = """\
import fcntl, os, stat, sys
directory, lock, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
careful = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
me = os.geteuid()
def ours(st):
    return stat.S_ISREG(st.st_mode) and st.st_uid == me
def remove(name, d):
    try:
        if ours(os.stat(name, dir_fd=d, follow_symlinks=False)):
            os.unlink(name, dir_fd=d)
    except OSError:
        pass
try:
    d = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | careful)
    st = os.fstat(d)
    if not (st.st_uid == me and not st.st_mode & 0o022 or st.st_mode & stat.S_ISVTX):
        sys.exit()  # (neither private nor sticky: nothing in it is surely ours)
    fd = os.open(lock, os.O_RDONLY | careful, dir_fd=d)
    if not ours(os.fstat(fd)):
        sys.exit()
except OSError:
    sys.exit()
fcntl.flock(fd, fcntl.LOCK_EX)
"""

_REAP_FILES = _REAP_WAIT + """\
for name in os.listdir(d):
    if name.startswith(prefix):
        remove(name, d)
remove(lock, d)
"""

_REAP_POSIX = _REAP_WAIT + """\
import _posixshmem
nonblock = os.O_NONBLOCK if sys.platform.startswith("linux") else 0  # (see _platform.shm_open)
journal = lock[:-len(".lock")] + ".names"
try:
    j = os.open(journal, os.O_RDONLY | careful, dir_fd=d)
    with os.fdopen(j, "rb") as f:
        names = f.read().split() if ours(os.fstat(j)) else []
except OSError:
    names = []
for name in names:
    try:
        o = _posixshmem.shm_open("/" + name.decode(), os.O_RDONLY | nonblock, 0o600)
        mine = os.fstat(o).st_uid == me
        os.close(o)
        if mine:
            _posixshmem.shm_unlink("/" + name.decode())
    except (OSError, UnicodeDecodeError):
        pass
remove(journal, d)
remove(lock, d)
"""
