"""macOS's shared memory, simulated on Linux: POSIX shared-memory objects
(``shm_open``) work, but there is no ``/dev/shm`` to list, stat or open,
and an object obeys macOS's rules (``MACOS_LIKE``: a name of 31
characters at most, sized once, never written with ``pwrite``, mapped only
``MAP_SHARED``).  ``MACOS``, a ``Platform``, answers as macOS would (POSIX objects, no
``/proc`` details): a test passes it to the pools and store it makes
(``SharedPools(MACOS)``, ``store(MACOS)``), and a pool hands it to its
workers.

Two ways in: the value itself, in this process (the answers only, for the
shared-memory test suite: ``tests/support/shm_kinds.py``), or ``MACOS_LIKE`` as a
``sitecustomize`` for a subprocess and its spawned workers: macOS's rules
enforced, and the whole process a simulated macOS machine, whose
detection answers ``MACOS`` (``install``; for scripts that do not know
they are simulated, as another user's would not).
``objects_of(pid)`` is the ground truth, read from Linux's ``/dev/shm``,
where the simulated objects really live.
"""

from __future__ import annotations

import os
from dataclasses import replace

from localsched.system import platform as _platform


def _posix_objects() -> bool:
    try:
        import _posixshmem  # noqa: F401
    except ImportError:
        return False
    return _platform.FILE_LOCKS


#: macOS's answers, on this machine.
MACOS = replace(_platform.Platform.detect(), family="macos",
                segment_kind="posix" if _posix_objects() else None, proc_details=False)

MACOS_LIKE = r'''
import builtins, errno, mmap, os, _posixshmem

def _hidden(path):
    if isinstance(path, int):
        return False
    try:
        p = os.fsdecode(path)
    except TypeError:
        return False
    return p == "/dev/shm" or p.startswith("/dev/shm/")

def _guard(fn):
    def guarded(path=".", *args, **kwargs):
        if _hidden(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory (macOS)", path)
        return fn(path, *args, **kwargs)
    return guarded

for _name in ("listdir", "scandir", "statvfs", "open", "stat", "lstat", "unlink",
              "rename", "replace", "mkdir", "access"):
    setattr(os, _name, _guard(getattr(os, _name)))
builtins.open = _guard(builtins.open)

_objects = {}   # descriptor -> object name
_sized = set()  # names of objects sized already
_shm_open, _close, _ftruncate, _pwrite = _posixshmem.shm_open, os.close, os.ftruncate, os.pwrite

def shm_open(path, flags, mode=0o777):
    if len(path) > 31:
        raise OSError(errno.ENAMETOOLONG, "File name too long", path)
    fd = _shm_open(path, flags, mode)
    _objects[fd] = path
    if flags & os.O_CREAT:
        _sized.discard(path)
    return fd

def close(fd):
    _objects.pop(fd, None)
    return _close(fd)

def ftruncate(fd, length):
    name = _objects.get(fd)
    if name is not None:
        if name in _sized:
            raise OSError(errno.EINVAL, "Invalid argument (macOS sizes an object once)")
        _sized.add(name)
    return _ftruncate(fd, length)

def pwrite(fd, data, offset):
    if fd in _objects:
        raise OSError(errno.ENXIO, "Device not configured (no pwrite on macOS objects)")
    return _pwrite(fd, data, offset)

_posixshmem.shm_open = shm_open
os.close, os.ftruncate, os.pwrite = close, ftruncate, pwrite

class _MappedMacOSWay(mmap.mmap):
    def __new__(cls, fileno, length, *args, **kwargs):
        if fileno in _objects:
            flags = kwargs.get("flags", args[0] if args else mmap.MAP_SHARED)
            access = kwargs.get("access", args[2] if len(args) > 2 else mmap.ACCESS_DEFAULT)
            if access == mmap.ACCESS_COPY or not flags & mmap.MAP_SHARED:
                raise OSError(errno.EINVAL, "Invalid argument (MAP_SHARED only on macOS)")
        return super().__new__(cls, fileno, length, *args, **kwargs)

mmap.mmap = _MappedMacOSWay

from tests.support.macos_sim import install
install()
'''


def install() -> None:
    """This whole process is a simulated macOS machine (from a
    ``sitecustomize``: ``MACOS_LIKE``, ``tests/sim_site/macos``): its
    platform detection answers ``MACOS``, and everything localsched makes
    without being given a platform follows from that value (a pool's
    workers get it from their pool)."""
    _platform._detected = lambda: MACOS


def objects_of(pid: int) -> list:
    """The POSIX shared-memory objects process ``pid`` owns, as Linux's
    /dev/shm shows them (the code under test never looks there): macOS's,
    and the simulated Windows named mappings (tests/support/windows_sim.py)."""
    from localsched._shm.kinds import PosixObjects, base36
    from tests.support.windows_sim import SimulatedNamedMappings

    labels = tuple(f"{kind.prefix}{base36(pid)}_"
                   for kind in (PosixObjects, SimulatedNamedMappings))
    try:
        return [n for n in os.listdir("/dev/shm") if n.startswith(labels)]
    except OSError:
        return []
