"""Windows' process capabilities, simulated on Linux: ``WINDOWS``, a
``Platform`` that answers as Windows would (no pipe descriptors passed by
number nor waited on, no PDEATHSIG, no pidfd, 63 handles per wait, named
mappings for shared memory): a pool given it (``ProcessPool(n,
platform=WINDOWS)``, ``SharedPools(WINDOWS)``) takes the path it takes on
Windows (``localsched/_pool/workers.py``: ``_MPWorker``, portable) and
its segments follow Windows' rules (``SimulatedNamedMappings`` below, the
hand-over protocol of ``localsched/_shm/named_mappings.py`` on POSIX
objects).  The pool hands the value to the workers it starts.

Two ways in: the value itself, in this process (with
``windows_subprocess(monkeypatch)``, which makes ``subprocess`` refuse to
pass descriptors as it does on Windows: a guard that the pool never asks),
or ``env()`` for a subprocess, a whole simulated Windows machine (a
``sitecustomize`` calling ``install``: its detection answers ``WINDOWS``)."""

from __future__ import annotations

import errno
import mmap
import os
import subprocess
from dataclasses import replace
from typing import Any

from localsched._shm.kinds import PosixObjects
from localsched._shm.named_mappings import HandOver
from localsched.system import platform as _platform
from localsched.system.platform import LOCK_EX, LOCK_NB, LOCK_SH, LOCK_UN, flock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SITE_DIR = os.path.join(ROOT, "tests", "sim_site", "windows")


class SimulatedNamedMappings(HandOver, PosixObjects):
    """Windows' named mappings, simulated with POSIX objects on Linux:
    handles are descriptors holding a shared ``flock``.  Closing a handle
    destroys the object when no other holder is left (an exclusive lock
    can then be had), and opening an object nobody holds fails, as on
    Windows, so a worker letting go too early loses its results here too.
    What cannot be simulated is the OS freeing a killed holder's mappings:
    there the posix kind's owner lock, journal and reaper stand in."""

    prefix = "lsw"
    owner_lock = True  # (stands in for the OS freeing a killed holder's mappings)

    def __init__(self) -> None:
        HandOver.__init__(self)
        PosixObjects.__init__(self)

    def usable(self, inodes: int) -> tuple[int | None, str]:
        free, why = PosixObjects.usable(self, inodes)
        return (free, why) if free is None else HandOver.usable(self, inodes)

    def create(self, name: str, size: int) -> Any:
        fd = _platform.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR)
        flock(fd, LOCK_SH)
        self._held[name] = fd
        return name

    def write(self, name: Any, size: int, layout: tuple, buffers: list) -> None:
        PosixObjects.write(self, self._held[name], size, layout, buffers)

    def read_private(self, name: str, size: int) -> memoryview:
        fd = self._open(name)
        try:
            view = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)
        finally:
            self._close(name, fd)
        return memoryview(view)

    def _open(self, name: str) -> int:
        fd = _platform.shm_open(name, os.O_RDWR)
        try:
            flock(fd, LOCK_EX | LOCK_NB)
        except BlockingIOError:  # held: a handle of ours joins the holders
            flock(fd, LOCK_SH)
            return fd
        PosixObjects.unlink(self, name)  # held by nobody: on Windows it is gone
        os.close(fd)
        raise FileNotFoundError(errno.ENOENT, "no process holds this named mapping", name)

    def _close(self, name: str, fd: int) -> None:
        # The last holder (an exclusive lock can be had) destroys it.
        flock(fd, LOCK_UN)
        try:
            flock(fd, LOCK_EX | LOCK_NB)
        except BlockingIOError:
            pass
        else:
            PosixObjects.unlink(self, name)
        os.close(fd)

    def sweep_away(self, name: str) -> None:
        PosixObjects.unlink(self, name)


class SimulatedNamedSlots:
    """Windows' named task slots (``localsched.system.platform.NamedSlots``),
    simulated with POSIX objects: made exclusively, opened by name in the
    worker, which then removes the name (on Windows the mapping goes with
    its last handle or view; here with its last mapping)."""

    @staticmethod
    def create(name: str, size: int) -> tuple[Any, Any]:
        fd = _platform.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR)
        try:
            os.ftruncate(fd, size)
            return name, mmap.mmap(fd, size)
        except BaseException:
            _platform.shm_unlink(name)
            raise
        finally:
            os.close(fd)

    @staticmethod
    def attach(name: str, size: int) -> Any:
        fd = _platform.shm_open(name, os.O_RDWR)
        try:
            if not _platform.is_ours(os.fstat(fd)):
                raise PermissionError(errno.EPERM, "not this user's slot", name)
            view = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        _platform.shm_unlink(name)
        return view

    @staticmethod
    def release(name: str, handle: Any) -> None:
        _platform.shm_unlink(name)  # (gone already if the worker opened it)


def _posix_objects() -> bool:
    try:
        import _posixshmem  # noqa: F401
    except ImportError:
        return False
    return _platform.FILE_LOCKS


#: Windows' answers, on this machine (named mappings simulated with POSIX
#: objects where there are any, else the pipes).
WINDOWS = replace(_platform.Platform.detect(), family="windows",
                  segment_kind=SimulatedNamedMappings if _posix_objects() else None,
                  fd_passing=False, wait_limit=63, die_with_parent=False, pidfd=False,
                  task_slots=_posix_objects(),
                  slot_names=SimulatedNamedSlots if _posix_objects() else None)


def install() -> None:
    """This whole process is a simulated Windows machine (from a
    ``sitecustomize``): its platform detection answers ``WINDOWS``."""
    _platform._detected = lambda: WINDOWS


def env(base: dict | None = None) -> dict:
    """``base`` (default: this process's environment) for a subprocess that
    runs as ``WINDOWS``, and the workers it starts."""
    e = dict(os.environ if base is None else base)
    e["PYTHONPATH"] = os.pathsep.join([SITE_DIR, ROOT, *filter(None, [e.get("PYTHONPATH")])])
    return e


class _PopenWithoutPassFds(subprocess.Popen):
    def __init__(self, *args, pass_fds=(), **kwargs):
        if pass_fds:
            raise ValueError("pass_fds is not supported on Windows.")
        super().__init__(*args, **kwargs)


def windows_subprocess(monkeypatch) -> None:
    """``subprocess`` refuses to pass descriptors, as on Windows."""
    monkeypatch.setattr(subprocess, "Popen", _PopenWithoutPassFds)


def my_segments(platform: _platform.Platform | None = None) -> dict:
    """This process's localsched segments now, as the store for
    ``platform`` (None: the detected one) sees them and as /dev/shm shows
    them (none where there is no /dev/shm)."""
    from localsched._shm import transport as shm
    from tests.support.macos_sim import objects_of

    found = dict(shm.live_segments(pids=[os.getpid()], platform=platform))
    found.update(dict.fromkeys(objects_of(os.getpid()), -1))
    return found
