"""What this platform offers, in one room.

Every platform-specific question localsched asks is answered here: no
other module tests ``sys.platform``, imports ``fcntl``, names ``/dev/shm``
or reads ``/proc``.  Each answer is a capability, decided once per process
(an import, a file's presence) or, where it can change while the process
runs (a directory filling up), at the moment of asking, so a failure is
noticed when it happens and not fixed at import.

What each platform gets, and why:

=================  ===================  ===============  ===================
platform           shared memory        owner liveness   /proc details
=================  ===================  ===============  ===================
Linux              files in /dev/shm    flock + reaper   PSS, child lists
Linux, /dev/shm    pipes, one warning   (none needed)    as above
missing, read-only
or out of room
macOS, the BSDs    POSIX shm objects,   flock + reaper,  psutil alone
                   copied out on        names in a
                   arrival              journal
Windows            named mappings,      (none needed:    psutil alone
                   after a self-test    the OS frees
                   (else the pipes)     them)
=================  ===================  ===============  ===================

Three kinds of segment (``localsched/_shm/kinds.py``), chosen by
``shared_memory_kind()`` (which says what each can and cannot do): files
in ``/dev/shm`` (Linux), POSIX objects (macOS, the BSDs: no copy-on-write,
no listing, no renaming, hence copies on arrival and a journal of names)
and named mappings (Windows: freed by the OS with their last view; never
run on Windows here, hence a self-test at first use).  Where there is no
kind (no file locks for an owner lock), or the kind does not work now,
values take the pipes, which always work, with one warning per process
(``LOCALSCHED_SHM=0`` silences it).

The answers that decide a path are one value, a frozen ``Platform``,
detected once (``Platform.detect()``) and passed, as multiprocessing's
objects take a context: the pool hands it to its workers and its segment
store.  Nothing here remembers a chosen platform and no environment
variable decides it, so the tests build other platforms' values on Linux
(``tests/support/macos_sim.py``, ``tests/support/windows_sim.py``) and
run them side by side.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import sys
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["FILE_LOCKS", "flock", "LOCK_SH", "LOCK_EX", "LOCK_NB", "LOCK_UN", "SHM_DIR",
           "shm_dir_stats", "proc_memory", "proc_mapped", "child_pids",
           "die_with_parent", "libc", "glibc_malloc", "pidfd", "descriptorless_mmap",
           "SESSIONS_AND_SIGNALS", "shared_anonymous_mapping", "shared_file_fd",
           "Platform", "NamedSlots",
           "thread_cpu_wait_reader", "thread_cpu_clock", "prepare_thread_cpu_wait",
           "threads_cpu_waits",
           "shared_memory_kind", "registry_dir", "shm_open", "shm_unlink", "SHM_NAME_MAX",
           "named_mapping_create", "named_mapping_open", "named_mapping_close",
           "named_mapping_view", "open_private_dir", "euid", "is_ours", "O_NOFOLLOW",
           "O_NONBLOCK", "O_CLOEXEC", "O_DIRECTORY", "O_CAREFUL"]

# -- file locks --------------------------------------------------------------------

try:
    import fcntl as _fcntl
except ImportError:  # Windows
    _fcntl = None  # type: ignore[assignment]

#: Whether ``flock`` locks files (advisory, per open file description).
FILE_LOCKS = _fcntl is not None

if _fcntl is not None:
    flock = _fcntl.flock
    LOCK_SH, LOCK_EX, LOCK_NB, LOCK_UN = (_fcntl.LOCK_SH, _fcntl.LOCK_EX, _fcntl.LOCK_NB,
                                          _fcntl.LOCK_UN)
else:
    LOCK_SH, LOCK_EX, LOCK_NB, LOCK_UN = 1, 2, 4, 8

    def flock(fd: int, operation: int) -> None:
        """No file locks here (callers check ``FILE_LOCKS`` first)."""
        raise OSError(errno.ENOSYS, "this platform has no file locks (fcntl)")


# -- shared memory as files -----------------------------------------------------------

#: The directory where shared-memory segments are files (a tmpfs on Linux;
#: absent on macOS, the BSDs and Windows, and in some sandboxes).
SHM_DIR = "/dev/shm"


# (None where segments cannot be files: no statvfs, or no file locks)
_statvfs = getattr(os, "statvfs", None) if _fcntl is not None else None
_READ_ONLY = getattr(os, "ST_RDONLY", 1)


def shm_dir_stats(inodes: int = 2,
                  platform: Platform | None = None) -> tuple[os.statvfs_result | None, str]:
    """``(stats, "")`` if segments can be files in ``SHM_DIR`` now, with
    ``inodes`` free inodes (the owner's lock file and a segment; once the
    lock exists, a segment), else ``(None, why not)``: one ``statvfs``,
    asked each time (a directory fills up, or gets room again, while a
    process runs).  ``platform``: whose answer (None: the detected one)."""
    windows = (platform or Platform.detect()).family == "windows"
    if _statvfs is None or windows:
        if _fcntl is None or windows:
            return None, "this platform has no file locks (fcntl), which shared memory needs"
        return None, "this platform has no statvfs"
    try:
        st = _statvfs(SHM_DIR)
    except OSError as exc:
        return None, f"{SHM_DIR} is missing ({exc.strerror})"
    if st.f_flag & _READ_ONLY:
        return None, f"{SHM_DIR} is read-only"
    try:
        mode = os.stat(SHM_DIR).st_mode
    except OSError as exc:
        return None, f"{SHM_DIR} is missing ({exc.strerror})"
    if mode & 0o002 and not mode & stat.S_ISVTX:
        # (without the sticky bit anyone could rename or remove our files)
        return None, f"{SHM_DIR} is writable by all but not sticky"
    if st.f_files and st.f_favail < inodes:  # (f_files 0: no inode limit)
        return None, f"{SHM_DIR} has no free inodes"
    return st, ""


# -- shared memory as POSIX objects ---------------------------------------------------

#: The longest name a POSIX shared-memory object may have on every platform
#: (macOS: ``PSHMNAMLEN``, 31, the leading slash included).
SHM_NAME_MAX = 31

_LINUX = sys.platform.startswith("linux")

try:
    import _posixshmem  # (CPython's, on POSIX; what multiprocessing.shared_memory uses)
except ImportError:
    _posixshmem = None


def shared_memory_kind() -> str | None:
    """Which kind of segment this platform can have: ``"files"`` in
    ``SHM_DIR`` (Linux), ``"posix"`` shared-memory objects (macOS, the
    BSDs), ``"named"`` mappings (Windows), or None.  Whether it works *now*
    is asked separately, per job.  (What a pool and its store use is
    their ``Platform``'s ``segment_kind``.)

    - **files** (Linux): files in ``SHM_DIR``, a tmpfs, written with
      ``pwrite``, mapped copy-on-write (``MAP_PRIVATE``: zero-copy, and a
      task that writes into an input gets private pages), renamed into and
      out of a free list, guarded by ``flock``; the reaper and the sweeps
      find a dead owner's segments by listing the directory.
    - **posix** (macOS, the BSDs): POSIX shared-memory objects
      (``shm_open``, what ``multiprocessing.shared_memory`` uses).  macOS
      lets an object be sized once (one ``ftruncate``), written and read
      only through a mapping (no ``pwrite``), mapped only ``MAP_SHARED``
      (no copy-on-write), named in 31 characters at most, and never listed
      nor renamed.  So a segment is written through a shared mapping, read
      by copying it once into private memory (a task may write into its
      input, as with pickled values), has a short name, and there is no
      free list.  Owner locks live as files in ``registry_dir()`` (a
      private directory under the temporary directory, where ``flock``
      works), and every segment's name is appended to its owner's journal
      there before the object is made: the reaper and the sweeps read the
      journal instead of a listing.
    - **named** (Windows): named mappings backed by the paging file, which
      the OS frees with their last handle or view (nothing to reap, no
      owner lock), but which die the moment the worker that wrote one lets
      go, before the scheduler holds it: the writer holds what it wrote
      until the pool has read the job to its end
      (``localsched/_shm/named_mappings.py``).  None of it has run on
      Windows here: a self-test at first use sends the values through the
      pipes, with one warning, if a call fails."""
    if os.name == "nt":
        return "named"
    if not FILE_LOCKS or os.name != "posix":
        return None
    if _LINUX:
        return "files"
    return "posix" if _posixshmem is not None else None


def shm_open(name: str, flags: int, mode: int = 0o600) -> int:
    """A descriptor of POSIX shared-memory object ``name`` (no slash:
    added here).  ENAMETOOLONG for names longer than macOS allows.  Never
    waits: on Linux an object is a file in ``/dev/shm``, where another
    user may plant a FIFO (glibc adds ``O_NOFOLLOW`` itself)."""
    if _posixshmem is None:
        raise OSError(errno.ENOSYS, "this platform has no POSIX shared memory")
    if len(name) + 1 > SHM_NAME_MAX:
        raise OSError(errno.ENAMETOOLONG, f"shared-memory name too long: {name}")
    if _LINUX:
        flags |= O_NONBLOCK
    return _posixshmem.shm_open("/" + name, flags, mode)


def shm_unlink(name: str) -> None:
    """Remove POSIX shared-memory object ``name`` (gone already: nothing)."""
    if _posixshmem is None:
        return
    try:
        _posixshmem.shm_unlink("/" + name)
    except FileNotFoundError:
        pass


# -- shared memory as Windows named mappings -----------------------------------------
# (what multiprocessing.shared_memory does on Windows: a mapping backed by the
# paging file, named, alive while any process holds a handle or a view)


def _windows_api() -> Any:
    import importlib

    return importlib.import_module("_winapi")  # (typed as Any: its stubs are Windows')


def named_mapping_create(name: str, size: int):
    """A handle of a new named mapping of ``size`` bytes; FileExistsError if
    the name is taken."""
    _winapi = _windows_api()

    handle = _winapi.CreateFileMapping(_winapi.INVALID_HANDLE_VALUE, _winapi.NULL,
                                       _winapi.PAGE_READWRITE, (size >> 32) & 0xFFFFFFFF,
                                       size & 0xFFFFFFFF, name)
    if _winapi.GetLastError() == _winapi.ERROR_ALREADY_EXISTS:
        _winapi.CloseHandle(handle)
        raise FileExistsError(errno.EEXIST, "a named mapping exists by that name", name)
    return handle


def named_mapping_open(name: str):
    """A handle of existing named mapping ``name``; FileNotFoundError when
    no process holds it any more (then it no longer exists)."""
    _winapi = _windows_api()

    return _winapi.OpenFileMapping(_winapi.FILE_MAP_READ, False, name)


def named_mapping_close(handle) -> None:
    _winapi = _windows_api()

    _winapi.CloseHandle(handle)


def named_mapping_view(name: str, size: int, private: bool):
    """An ``mmap`` view of named mapping ``name`` (which some handle keeps
    alive): writable and shared, or ``private`` (copy-on-write: writes stay
    in this view).  The view keeps the mapping alive by itself."""
    import mmap

    access = mmap.ACCESS_COPY if private else mmap.ACCESS_WRITE
    make: Any = mmap.mmap
    return make(-1, size, tagname=name, access=access)


def registry_dir(base: str | None = None) -> tuple[str, int]:
    """This user's directory for owner locks and segment journals where
    segments are POSIX objects, ``(path, descriptor)``: ``base`` (an owner's
    directory, passed to its workers) or ``localsched-<uid>`` in the
    temporary directory, created private on first use.  Used through the
    descriptor (``dir_fd=``), never its path again: ``open_private_dir``."""
    if base is None:
        import tempfile

        uid = os.getuid() if hasattr(os, "getuid") else 0
        base = os.path.join(tempfile.gettempdir(), f"localsched-{uid}")
        try:
            os.mkdir(base, 0o700)
        except FileExistsError:
            pass
    return base, open_private_dir(base)


def open_private_dir(path: str) -> int:
    """A descriptor of directory ``path`` if it is a real directory (not a
    link to one), this user's, and closed to everyone else (mode 0700);
    PermissionError if not.  Checked on the open descriptor: a link
    re-pointed after the check changes nothing."""
    fd = os.open(path, os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != euid() or st.st_mode & 0o077:
        os.close(fd)
        raise PermissionError(errno.EACCES, f"{path} is not this user's private directory")
    return fd


def euid() -> int:
    """This process's effective user id (0 where there are none)."""
    return os.geteuid() if hasattr(os, "geteuid") else 0


def is_ours(st: os.stat_result) -> bool:
    """Whether ``st`` (of an open descriptor, or ``lstat``) is a regular file
    of this user's: what localsched made, never another user's file, link,
    FIFO or device planted at the same name."""
    return stat.S_ISREG(st.st_mode) and st.st_uid == euid()


#: Flags for opening a name in a shared directory (absent: 0): never follow
#: a link, never wait on a FIFO, never leak into an exec'd child.
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
#: How to open a name someone else may have planted (see ``is_ours``).
O_CAREFUL = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC


# -- /proc ---------------------------------------------------------------------------


def _kb_field(path: str, field: bytes) -> int:
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def proc_memory(pid: int) -> tuple[int, int, int]:
    """``(rss, rss_shmem, pss_shmem)`` bytes of process ``pid`` (only where
    ``Platform.proc_details``): its resident set, the shared-memory part of it, and
    that part shared out among the processes mapping it.  Elsewhere the
    ResourceProfiler and the live page use psutil alone (shared pages then
    count once per process mapping them, as any RSS sum does)."""
    rss = rss_shmem = 0
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith(b"RssShmem:"):
                rss_shmem = int(line.split()[1]) * 1024
    return rss, rss_shmem, _kb_field(f"/proc/{pid}/smaps_rollup", b"Pss_Shmem:")


def proc_mapped(pid: int, prefix: str) -> set:
    """Names of the files in ``SHM_DIR`` starting with ``prefix`` that
    process ``pid`` maps (only where ``Platform.proc_details``)."""
    needle = f"{SHM_DIR}/{prefix}".encode()
    skip = len(SHM_DIR) + 1
    names = set()
    with open(f"/proc/{pid}/maps", "rb") as f:
        for line in f:
            at = line.find(needle)
            if at >= 0:
                names.add(line[at + skip:].split()[0].decode())
    return names


def child_pids(pid: int, platform: Platform | None = None) -> list | None:
    """The direct children of process ``pid`` from ``/proc``'s per-thread
    lists (a few small reads), or None where there are none (then ask
    psutil, which reads every process of the machine).  ``platform``:
    whose answer (None: the detected one)."""
    if not (platform or Platform.detect()).proc_details:
        return None
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    pids: set = set()
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids.update(map(int, f.read().split()))
        except FileNotFoundError:  # (the thread ended meanwhile)
            continue
        except OSError:
            return None
    return sorted(pids)


# -- processes --------------------------------------------------------------------

#: Whether processes have sessions and POSIX signals (SIGTERM, SIGKILL to a
#: process group): not on Windows.
SESSIONS_AND_SIGNALS = os.name == "posix"


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


@functools.cache
def libc():
    """The C library of this process (``ctypes.CDLL``, errno kept), or
    None where there is none to ask by that name (Windows)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (OSError, TypeError):
        return None


def _pread_holding_the_gil():
    """libc's ``pread`` called with the GIL held (``ctypes.PyDLL``), or
    None; made once per process (``prepare_thread_cpu_wait`` makes it in
    the caller's thread, before a sampler thread needs it)."""
    return _pread_made() if Platform.detect().family != "windows" else None


@functools.cache
def _pread_made():
    if os.name != "posix":
        return None
    try:
        import ctypes

        fn = ctypes.PyDLL(None).pread
        fn.restype = ctypes.c_ssize_t
        fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long)
    except (OSError, AttributeError):
        return None
    return fn


def prepare_thread_cpu_wait() -> None:
    """Make what ``thread_cpu_wait_reader`` needs, in this thread (an
    import in a sampler thread would wait for the GIL at each of its many
    system calls while the tasks' Python code holds it)."""
    _pread_holding_the_gil()


def threads_cpu_waits(pids) -> dict | None:
    """``{(pid, tid): seconds}`` each thread of processes ``pids`` has
    waited for a CPU since it started (Linux's ``schedstat``, second
    field), None where the system does not say; a process or thread gone
    meanwhile is left out.  (Read now and then, not per task.)"""
    if not os.path.exists("/proc/thread-self/schedstat"):
        return None
    out: dict = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    out[(pid, tid)] = int(f.read().split()[1]) / 1e9
            except (OSError, ValueError, IndexError):
                continue
    return out


def thread_cpu_wait_reader():
    """``(read, close)`` for the calling thread: ``read()`` gives the
    seconds it has waited for a CPU so far (Linux's
    ``/proc/thread-self/schedstat``), or None where the system does not say.

    The file stays open and is read with ``pread`` called with the GIL held:
    a few microseconds, where a Python-level open/read would hand the GIL
    over at each system call and wait up to a switch interval (5 ms) to get
    it back -- several times per look, which starved a sampler of its looks
    on GIL-bound threads."""
    pread = _pread_holding_the_gil()
    if pread is None:
        return None
    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    except OSError:
        return None
    import ctypes  # (imported by _pread_holding_the_gil: no system call now)

    buf = ctypes.create_string_buffer(128)

    def read() -> float:
        n = pread(fd, buf, 127, 0)
        return int(buf.raw[:max(n, 0)].split()[1]) / 1e9

    try:
        read()
    except (OSError, ValueError, IndexError):
        os.close(fd)
        return None
    return read, lambda: os.close(fd)


def thread_cpu_clock(platform: Platform | None = None):
    """The calling thread's CPU clock (``time.thread_time``: seconds) where
    it is precise to a microsecond or so (Linux, macOS, the BSDs), None on
    Windows, whose thread times move in ticks of 15.6 ms (a task of a
    millisecond would read 0 or 15.6)."""
    platform = platform if platform is not None else Platform.detect()
    if platform.family == "windows":
        return None
    return time.thread_time


def die_with_parent(platform: Platform | None = None) -> bool:
    """Ask the kernel to SIGKILL this process when the thread that started
    it ends (Linux's ``PR_SET_PDEATHSIG``); False where that cannot be had
    (callers watch a pipe instead).  ``platform``: whose answer (None: the
    detected one)."""
    import signal

    if not (platform or Platform.detect()).die_with_parent:
        return False
    prctl = getattr(libc(), "prctl", None)  # (Linux's alone)
    kill = getattr(signal, "SIGKILL", None)  # (not on Windows)
    return prctl is not None and kill is not None and prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0) == 0


def glibc_malloc() -> tuple | None:
    """``(mallopt, malloc_trim)`` where the allocator is glibc's, else None
    (musl, macOS, Windows)."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (AttributeError, OSError, ValueError):  # (no confstr, or no such name)
        return None
    c = libc()
    mallopt, malloc_trim = getattr(c, "mallopt", None), getattr(c, "malloc_trim", None)
    return (mallopt, malloc_trim) if mallopt is not None and malloc_trim is not None else None


def pidfd(pid: int, platform: Platform | None = None) -> int | None:
    """A descriptor readable when process ``pid`` ends, even while a
    grandchild holds its pipes (Linux 5.3+ ``pidfd_open``), or None
    (``platform``: whose answer; None, the detected one)."""
    if not (platform or Platform.detect()).pidfd:
        return None
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def descriptorless_mmap() -> tuple | None:
    """``(mmap, munmap)`` of the C library, typed, for mappings that keep
    no file descriptor (Python's ``mmap`` keeps a duplicate), or None where
    there is no such C call (Windows)."""
    c = libc()
    if c is None or not hasattr(c, "mmap"):
        return None
    import ctypes

    mmap, munmap = c.mmap, c.munmap
    mmap.restype = ctypes.c_void_p
    mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                     ctypes.c_int, ctypes.c_long)
    munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    return mmap, munmap


# -- a few bytes shared with a child process -------------------------------------------


def shared_anonymous_mapping(size: int):
    """``size`` zeroed bytes of memory (an ``mmap``) that a child forked
    from now on shares with this process, or None where there is no fork
    (Windows: ``mmap(-1)`` is private there)."""
    if os.name != "posix":
        return None
    import mmap

    try:
        return mmap.mmap(-1, size)  # (MAP_SHARED | MAP_ANONYMOUS)
    except OSError:
        return None


def shared_file_fd(size: int) -> int | None:
    """A descriptor (close-on-exec) of a ``size``-byte file with no name,
    which another process given the descriptor can map: a memfd (Linux),
    else an unlinked temporary file (the other POSIX systems); None on
    Windows, or when neither can be had.  (What a spawned worker shares
    with its pool: which task it runs, read by the pool when it dies; a
    forked one gets ``shared_anonymous_mapping``.)"""
    if os.name != "posix":
        return None
    fd = None
    try:
        memfd_create = getattr(os, "memfd_create", None)
        if memfd_create is not None:
            fd = memfd_create("localsched-slot")
        else:
            import tempfile

            with tempfile.TemporaryFile() as f:  # (unlinked at once on POSIX)
                fd = os.dup(f.fileno())
        os.ftruncate(fd, size)
    except OSError:
        if fd is not None:
            os.close(fd)
        return None
    return fd



class NamedSlots:
    """Windows' way to share a worker's task slot (``localsched._pool.taskslot``):
    multiprocessing's spawn carries no descriptor, so the pool makes a
    named mapping (exclusively: ``named_mapping_create`` refuses a name
    taken) and hands the worker its name; the worker opens a view by name.
    The mapping lives while the pool's handle or any view does."""

    @staticmethod
    def create(name: str, size: int) -> tuple[Any, Any]:
        """(a handle that keeps it alive, a shared view) of a new slot."""
        handle = named_mapping_create(name, size)
        try:
            return handle, named_mapping_view(name, size, private=False)
        except BaseException:
            named_mapping_close(handle)
            raise

    @staticmethod
    def attach(name: str, size: int) -> Any:
        """In the worker: a shared view of the slot named ``name``."""
        return named_mapping_view(name, size, private=False)

    @staticmethod
    def release(name: str, handle: Any) -> None:
        named_mapping_close(handle)


# -- the platform as a value --------------------------------------------------------


@dataclass(frozen=True)
class Platform:
    """What decides localsched's paths on this platform, as one value:
    detected once (``detect``), passed on (the pool hands it to the
    workers it starts, the store its segment kind), built otherwise only
    by the tests (``dataclasses.replace``).

    The questions of this module that depend on it take it as an argument
    (None: the detected one).  The pool (``localsched/_pool/workers.py``)
    hands a spawned worker its pipes by descriptor number and waits on them
    with ``select`` (``fd_passing``); Windows can do neither, so there its
    workers start through multiprocessing's spawn, which carries pipe
    handles, and the pool waits on those pipes and a socket pair, at most
    ``wait_limit`` at once."""

    #: "linux", "macos", "bsd" (the other POSIX systems) or "windows"
    family: str
    #: The kind of segment: "files", "posix", "named", None (the pipes), or
    #: a ``SegmentKind`` class (a simulated kind, the tests')
    segment_kind: Any
    #: Whether ``/proc`` tells shared pages apart (Linux 4.14+: PSS) and
    #: lists a process's children
    proc_details: bool
    #: Whether a child can be handed pipe descriptors by number
    #: (``pass_fds``) and those pipes waited on with ``select``: POSIX.  Not
    #: Windows, where the pool starts its workers through multiprocessing's
    #: spawn, with sockets and multiprocessing's pipes
    fd_passing: bool
    #: How many objects one ``multiprocessing.connection.wait`` can watch
    #: (None: no limit): Windows' ``WaitForMultipleObjects``, 63
    wait_limit: int | None
    #: Whether a child can ask to die with its parent (Linux's PDEATHSIG)
    die_with_parent: bool
    #: Whether a process's end can be waited on by descriptor (``pidfd_open``)
    pidfd: bool
    #: Whether a worker can share a few bytes with its pool (which task it
    #: runs: ``shared_anonymous_mapping``, ``shared_file_fd``; by name
    #: through ``slot_names`` where no descriptor can be carried)
    task_slots: bool
    #: How a worker started without descriptors (multiprocessing's spawn:
    #: Windows) is handed its slot: a ``NamedSlots``-like class, or None
    slot_names: Any = None

    @classmethod
    def detect(cls) -> Platform:
        """This machine's platform (asked once per process)."""
        return _detected()


@functools.cache
def _detected() -> Platform:
    if os.name == "nt":
        family = "windows"
    elif _LINUX:
        family = "linux"
    elif sys.platform == "darwin":
        family = "macos"
    else:
        family = "bsd"
    return Platform(
        family=family, segment_kind=shared_memory_kind(),
        proc_details=os.path.exists("/proc/self/smaps_rollup"),
        fd_passing=os.name == "posix", wait_limit=63 if os.name == "nt" else None,
        die_with_parent=_LINUX, pidfd=hasattr(os, "pidfd_open"),
        task_slots=True, slot_names=NamedSlots if os.name == "nt" else None)
