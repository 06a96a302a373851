"""What a test needs from the platform it runs on, in one room.

The suite runs on Linux, macOS and Windows (``.github/workflows/ci.yml``).
A test that needs something only some platforms have says so with one of
the skip markers below, whose reason names what the platform lacks; no
test asks ``sys.platform`` itself.  Each marker asks for the capability
(``hasattr(os, "fork")``), not for a platform's name, so a simulated
platform (a ``sitecustomize`` that removes those calls) skips the same
tests the real one would.  On Linux every marker lets its tests run.

Each marker, what the test uses, and where it skips:

- ``needs_fork``: the ``fork`` start method, ``os.fork`` (Windows).
- ``needs_forkserver``: the ``forkserver`` start method (Windows).
- ``needs_posix_signals``: SIGKILL and SIGSEGV by number,
  ``signal.pthread_kill`` (a Ctrl-C sent to the main thread), signals to a
  process group (Windows).
- ``needs_false_command``: ``FALSE_COMMAND``, an executable that exits 1
  at once (Windows).
- ``needs_read_only_dirs``: a directory made read-only (chmod) that
  refuses new files (Windows; root writes anywhere).
- ``needs_schedstat``: a thread's wait for a CPU, from Linux's
  ``/proc/thread-self/schedstat`` (macOS, Windows).
- ``needs_glibc``: glibc's malloc, which a worker tunes (macOS, Windows, musl).
- ``needs_waitid``: ``os.waitid``, whose WNOWAIT leaves a zombie (Windows).
- ``needs_undecodable_file_names``: a file name that is not UTF-8
  (macOS's APFS refuses it, Windows cannot say it).
- ``needs_control_characters_in_file_names``: a file name holding ESC
  (Windows).
- ``needs_browser_driver``: ``tests/support/browser.py``'s headless-browser driver,
  whose supervisor is Linux's child subreaper (macOS, Windows).  The one
  platform name asked here (``BROWSER_DRIVER``): prctl cannot be asked for
  without calling it.  ``tests/support/browser.py``'s ``require_chromium`` asks it too.

``START_METHODS`` parametrizes a test over the three start methods, each
marked as above; ``present_start_methods`` says which a script that runs
them all meets here.  ``kill_session`` is the last-resort cleanup of a process
a test started with ``start_new_session=True`` (which Windows ignores):
the whole process group where there are groups, else the process and its
descendants (psutil).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import psutil
import pytest

__all__ = ["needs_fork", "needs_forkserver", "needs_posix_signals",
           "needs_false_command", "FALSE_COMMAND", "START_METHODS", "start_method",
           "present_start_methods", "needs_read_only_dirs", "needs_schedstat", "needs_glibc",
           "needs_waitid", "needs_undecodable_file_names",
           "needs_control_characters_in_file_names", "needs_browser_driver", "BROWSER_DRIVER",
           "kill_session", "session_alive"]


def _has_start_method(name: str) -> bool:
    try:
        multiprocessing.get_context(name)
    except ValueError:  # ("cannot find context for 'fork'": Windows)
        return False
    return True


_METHODS = {name for name in ("spawn", "fork", "forkserver") if _has_start_method(name)}

needs_fork = pytest.mark.skipif(
    "fork" not in _METHODS or not hasattr(os, "fork"),
    reason="the fork start method (os.fork) is POSIX only")

needs_forkserver = pytest.mark.skipif(
    "forkserver" not in _METHODS, reason="the forkserver start method is POSIX only")

needs_posix_signals = pytest.mark.skipif(
    not all(hasattr(signal, name) for name in ("SIGKILL", "pthread_kill"))
    or not hasattr(os, "killpg"),
    reason="POSIX signals (SIGKILL, SIGSEGV by number, signal.pthread_kill for a Ctrl-C "
           "sent to the main thread, signals to a process group) are not on this platform")

#: An executable that exits with code 1 at once (POSIX's ``false``), or None.
FALSE_COMMAND = shutil.which("false")

needs_false_command = pytest.mark.skipif(
    FALSE_COMMAND is None, reason="no `false` command (an executable that exits 1) here")

needs_read_only_dirs = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="a read-only directory (chmod 0o500) refuses new files only on POSIX, and not to root")

needs_schedstat = pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat"),
    reason="a thread's wait for a CPU is read from Linux's /proc/thread-self/schedstat")



def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (AttributeError, ValueError, OSError):  # no confstr, or no such name (macOS, musl)
        return False


needs_glibc = pytest.mark.skipif(not _glibc(), reason="tuning a worker's malloc needs glibc")

needs_waitid = pytest.mark.skipif(
    not hasattr(os, "waitid"), reason="needs os.waitid (WNOWAIT) to leave a zombie")



def _file_name_allowed(name: bytes) -> bool:
    """Whether a file named ``name`` can be made here (tried in a temporary
    directory: APFS refuses names that are not UTF-8, Windows control
    characters, and its bytes paths must be UTF-8)."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            open(os.path.join(os.fsencode(folder), name), "wb").close()
        except (OSError, UnicodeError, ValueError):
            return False
    return True


needs_undecodable_file_names = pytest.mark.skipif(
    not _file_name_allowed(b"name\xff"),
    reason="file names that are not UTF-8 (b'\\xff') are refused here (APFS, Windows)")

needs_control_characters_in_file_names = pytest.mark.skipif(
    not _file_name_allowed(b"name\x1b"),
    reason="file names holding control characters (ESC) are refused here (Windows)")

#: Whether tests/support/browser.py's driver runs here (its supervisor makes itself
#: the child subreaper with Linux's prctl, and passes pipes by number).
BROWSER_DRIVER = sys.platform.startswith("linux")

needs_browser_driver = pytest.mark.skipif(
    not BROWSER_DRIVER,
    reason="the headless-browser driver (tests/support/browser.py) runs on Linux only")

_MARKS = {"spawn": (), "fork": (needs_fork,), "forkserver": (needs_forkserver,)}


def start_method(name: str):
    """``name`` as a ``pytest.param``, marked to skip where the start method is missing."""
    return pytest.param(name, marks=_MARKS[name])


#: The three start methods, for ``pytest.mark.parametrize("context", START_METHODS)``.
START_METHODS = [start_method(name) for name in ("spawn", "fork", "forkserver")]


def present_start_methods(names: tuple) -> tuple:
    """Those of the start methods ``names`` this platform has, in that order
    (what a script looping over ``multiprocessing.get_all_start_methods()`` runs)."""
    return tuple(name for name in names if name in _METHODS)


def kill_session(proc: subprocess.Popen) -> None:
    """Kill ``proc`` (started with ``start_new_session=True``) and whatever it
    started: its process group where there are groups, else the process and
    the descendants psutil finds.  Nothing to kill is fine."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.kill()


def session_alive(proc: subprocess.Popen) -> bool:
    """Whether ``proc`` or anything of its process group is still there (where
    there are no groups: whether ``proc`` itself is)."""
    if not hasattr(os, "killpg"):
        return proc.poll() is None
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True
