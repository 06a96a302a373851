"""Worker processes as the pool sees them: their states and how they start.

Worker states, every move checked (``Worker.move``; an illegal move raises
WorkerStateError)::

    STARTING ──READY──► IDLE ──RUN──► BUSY ──last message──► IDLE
        │                │              │
        │                └──────────────┴──stop/kill──► STOPPING ──exit──► DEAD
        └──────────────exit (start-up failure: the pool breaks)─────────► DEAD
    (any live state) ──exit──► DEAD

A worker starts by one of three methods: "spawn" runs ``worker.BOOT`` in a
fresh interpreter (``_SpawnedWorker``), given the caller's interpreter
options (``-O``, ``-W``, ``-X``: what multiprocessing passes its children)
and its pipes' descriptors by number; "fork" and "forkserver" go through
multiprocessing (``_MPWorker``).  Where descriptors cannot be passed by
number nor waited on (Windows: ``Platform.fd_passing``), "spawn" goes
through multiprocessing's spawn too, which carries pipe handles to the
child on every OS; those workers are waited on by their pipes and process
sentinels, and killed with ``Process.kill`` (TerminateProcess there).  No
worker imports the user's main module, whatever the method: everything a
job needs arrives pickled by value, so a script needs no
``if __name__ == "__main__"`` guard.  multiprocessing's forkserver children
would run it again before their target (as its spawn children do), so the
preparation data a forkserver worker is started with leaves the main module
out (``_no_main_module``).  None is a daemon process, so a task may start
processes of its own; the lifeline and PDEATHSIG tie each to the pool's
process.
"""

from __future__ import annotations

import enum
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from multiprocessing.connection import wait as wait_for
from typing import TYPE_CHECKING, Any

from ..system import platform as _platform
from ..system.forking import at_fork_in_child
from . import worker as worker_module
from .taskslot import TaskSlot

if TYPE_CHECKING:
    from .jobs import _Job

__all__ = ["WorkerState", "WorkerStateError", "Worker", "START_METHODS", "STOP_GRACE",
           "STARTING", "IDLE", "BUSY", "STOPPING", "DEAD", "describe_exit", "start_worker",
           "max_workers"]

START_METHODS = ("spawn", "fork", "forkserver")

# Seconds a worker gets to exit after STOP (or after SIGKILL) before the
# pool stops waiting for it: a worker ignoring STOP is then killed.
STOP_GRACE = 5.0


class WorkerState(enum.Enum):
    """Where a worker process is in its life (see the module docstring)."""

    STARTING = "starting"  # started; its READY has not arrived: takes no work yet
    IDLE = "idle"  # waiting for a job
    BUSY = "busy"  # running a job, until the job's last message is read
    STOPPING = "stopping"  # told to stop or killed: never given work again
    DEAD = "dead"  # exited and reaped


STARTING, IDLE, BUSY, STOPPING, DEAD = WorkerState

_MOVES: dict = {
    STARTING: {IDLE, STOPPING, DEAD},
    IDLE: {BUSY, STOPPING, DEAD},
    BUSY: {IDLE, STOPPING, DEAD},
    STOPPING: {DEAD},
    DEAD: set(),
}


class WorkerStateError(RuntimeError):
    """A worker was asked to make a move its state does not allow (a bug)."""


def describe_exit(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


# -- worker processes, as the pool sees them -----------------------------------


class Worker:
    """A worker process: its pid, its state and job, the pipes to it, and a
    handle that becomes ready when it exits."""

    pid: int
    conn: Any  # replies come in here
    out: Any  # RUN and STOP go out here
    lifeline: Any  # the write end of the worker's lifeline: never written to
    slot: TaskSlot  # which task it runs (read when it dies: ``taskslot``)

    def __init__(self, platform: _platform.Platform) -> None:
        self.platform = platform  # its pool's, which it runs as
        self.state = STARTING
        self.job: _Job | None = None
        self.jobs_started = 0
        self.init_failed = False  # it reported INIT_FAILED (the pool broke then)
        self.conn_open = True
        self.exit_handle: Any = None
        # The shared-memory prefix of the last job it was told to let go of
        # (``LET_GO``): swept if it dies before it has.
        self.let_go_prefix: str | None = None

    def move(self, new: WorkerState) -> None:
        """Change state; a move the state diagram does not have raises."""
        if new not in _MOVES[self.state]:
            raise WorkerStateError(
                f"worker process {self.pid} cannot go from {self.state.value} to {new.value}")
        self.state = new

    def _open_pidfd(self) -> None:
        # Readable when the process ends, even if a grandchild it forked
        # still holds its pipes open (Linux; elsewhere see subclasses).
        self.pidfd: int | None = _platform.pidfd(self.pid, self.platform)

    def join(self, timeout: float | None) -> int | None:
        """Wait up to ``timeout`` seconds for the process to end; its exit
        code, or None if it still runs."""
        if self.pidfd is not None and not wait_for([self.pidfd], timeout):
            return None
        return self._wait(None if self.pidfd is not None else timeout)

    def _wait(self, timeout: float | None) -> int | None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Close the parent's ends of everything (the process is gone, or
        this is a forked child that must not hold them)."""
        for c in {id(self.conn): self.conn, id(self.out): self.out}.values():
            c.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if self.lifeline is not None:
            self.lifeline.close()
            self.lifeline = None
        self.slot.close()


class _SpawnedWorker(Worker):
    """A fresh interpreter running ``worker.BOOT`` (the "spawn" method)."""

    def __init__(self, init_payload: bytes | None, platform: _platform.Platform,
                 env: dict | None = None):
        from multiprocessing.connection import Connection

        super().__init__(platform)
        self.slot = slot = TaskSlot("spawn" if platform.task_slots else "none")
        slot_fd = slot.for_child("spawn")
        to_parent_r, to_parent_w = os.pipe()
        to_child_r, to_child_w = os.pipe()
        life_r, life_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, *_interpreter_options(), "-c", worker_module.BOOT,
                 str(to_child_r), str(to_parent_w), str(life_r), str(os.getpid()),
                 str(-1 if slot_fd is None else slot_fd)],
                pass_fds=(to_child_r, to_parent_w, life_r,
                          *(() if slot_fd is None else (slot_fd,))),
                stdin=subprocess.DEVNULL,
                # (set before the interpreter starts: see ``system.blas``)
                env={**os.environ, **env} if env else None,
                # Its own session: Ctrl-C at a terminal goes to the parent only,
                # which decides.
                start_new_session=True,
            )
        except BaseException:
            for fd in (to_parent_r, to_child_w, life_w):
                os.close(fd)
            slot.close()
            raise
        finally:
            for fd in (to_child_r, to_parent_w, life_r):
                os.close(fd)
            slot.started()
        self.pid = self.proc.pid
        self.conn = Connection(to_parent_r, writable=False)
        self.out = Connection(to_child_w, readable=False)
        self.lifeline = Connection(life_w, readable=False)
        self._open_pidfd()
        self.exit_handle = self.pidfd  # without one, the pipe's end tells
        try:
            # The parent's authkey too: a multiprocessing Manager's proxies
            # (a Manager().Lock() passed to a task) authenticate with it, as
            # they do in multiprocessing's own spawned children.
            # Its platform pickled apart: loaded once ``sys.path`` is set
            # (a simulated kind is a class of the tests').
            self.out.send_bytes(pickle.dumps(
                (sys.path, bytes(multiprocessing.current_process().authkey),
                 pickle.dumps(platform))))
            self.out.send_bytes(init_payload or b"")
        except OSError:
            pass  # it died at once: its exit is a start-up failure

    def _wait(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        self.proc.kill()


class _MPWorker(Worker):
    """Started by multiprocessing: the "fork" and "forkserver" methods, and
    "spawn" where descriptors cannot be passed (``portable``: Windows).

    The portable worker uses only what multiprocessing carries to a child on
    every OS (its pipes' handles) and waits on what can be waited on
    everywhere (those pipes, the process's sentinel): no pidfd, and its
    lifeline is read as a connection (end-of-file when the parent is gone).
    """

    def __init__(self, ctx, init_payload: bytes | None, platform: _platform.Platform,
                 env: dict | None = None):
        super().__init__(platform)
        portable = not platform.fd_passing
        parent, child = ctx.Pipe(duplex=True)
        life_r, life_w = ctx.Pipe(duplex=False)
        method = ctx.get_start_method()
        forked = method == "fork"
        # (multiprocessing's spawn -- the portable path, Windows -- cannot
        # carry a descriptor by number: the slot goes by name there)
        if not platform.task_slots:
            method_of_slot = "none"
        elif method == "spawn":
            method_of_slot = "named"
        else:
            method_of_slot = method
        self.slot = slot = TaskSlot(method_of_slot, platform.slot_names)
        self.proc = ctx.Process(
            target=worker_module.main,
            # A forked worker inherits the parent's ends and closes them; the
            # fork server's children never have them.  The fork server, not
            # this process, is a forkserver worker's parent.
            args=(child, child, life_r, None if method == "forkserver" else os.getpid(),
                  init_payload, (parent, life_w) if forked else (), slot.for_child(method_of_slot),
                  platform, env),
            name="localsched-worker",
            # Not a daemon: a task may start processes of its own (a nested
            # get).  The lifeline and PDEATHSIG tie it to this process, and
            # ``forget`` keeps multiprocessing from joining it at exit.
            daemon=False,
        )
        try:
            with _no_main_module(not forked):
                self.proc.start()
        except BaseException:
            slot.close()
            raise
        finally:
            child.close()
            life_r.close()
            slot.started()
        self.pid = self.proc.pid
        self._untrack()
        self.conn = self.out = parent
        self.lifeline = life_w
        if portable:
            # No pidfd there, and the sentinel is not waited on either: the
            # end of its pipe tells (no other process holds it: handles are
            # not inherited), so a wait watches one handle per worker, not
            # two (Windows waits on at most 63: ``Platform.wait_limit``).
            self.pidfd = None
            self.exit_handle = None
        else:
            self._open_pidfd()
            self.exit_handle = self.pidfd if self.pidfd is not None else self.proc.sentinel

    def _wait(self, timeout):
        self.proc.join(timeout)
        return self.proc.exitcode

    def kill(self) -> None:
        self.proc.kill()

    def _untrack(self) -> None:
        # multiprocessing joins the non-daemon children it knows of at exit;
        # the pool stops and reaps its workers itself.
        children = getattr(multiprocessing.process, "_children", None)
        if children is not None:
            children.discard(self.proc)

    def forget(self) -> None:
        """In a forked child: this process is not ours to stop at exit."""
        self._untrack()
        try:
            self.proc._popen.close()  # its exit sentinel
        except Exception:
            pass


def _interpreter_options() -> list:
    """The options this interpreter was started with that a child should
    share (``-O``, ``-W ...``, ``-X ...``, ``-B``, ...), as multiprocessing
    passes them to its own children."""
    return subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]


# ``_no_main_module``: set in the thread starting a forkserver worker.
_starting_without_main = threading.local()
_filter_lock = threading.Lock()


@at_fork_in_child
def _renew_filter_lock() -> None:
    global _filter_lock
    _filter_lock = threading.Lock()


@contextmanager
def _no_main_module(active: bool = True):
    """While a forkserver worker starts in this thread, multiprocessing's
    preparation data (``spawn.get_preparation_data``, read by the child
    before its target runs, and by the fork server when it starts) names no
    main module to import.  Other threads' processes are untouched."""
    if not active:
        yield
        return
    _filter_preparation_data()
    _starting_without_main.on = True
    try:
        yield
    finally:
        _starting_without_main.on = False


def _filter_preparation_data() -> None:
    from multiprocessing import spawn

    with _filter_lock:
        real = spawn.get_preparation_data
        if getattr(real, "localsched_filter", False):
            return

        def get_preparation_data(name):
            data = real(name)
            if getattr(_starting_without_main, "on", False):
                data.pop("init_main_from_path", None)
                data.pop("init_main_from_name", None)
            return data

        get_preparation_data.localsched_filter = True  # type: ignore[attr-defined]
        spawn.get_preparation_data = get_preparation_data


def max_workers(platform: _platform.Platform) -> int | None:
    """How many workers a pool can wait on at once (None: no limit): the
    platform's wait limit (``Platform.wait_limit``) less the listener's
    wake-up socket, where each worker is one pipe (no descriptor passing)."""
    limit = platform.wait_limit
    return limit - 1 if limit is not None and not platform.fd_passing else None


def start_worker(method: str, ctx: Any, init_payload: bytes | None,
                 platform: _platform.Platform, env: dict | None = None) -> Worker:
    """Start a worker process by ``method`` (one of ``START_METHODS``) that
    runs as ``platform`` (its pool's), with ``env`` set in its environment
    before anything of the caller's runs; where pipe descriptors cannot be
    passed to a child or waited on (``Platform.fd_passing`` false:
    Windows), through multiprocessing, whatever the method."""
    if method == "spawn" and platform.fd_passing:
        return _SpawnedWorker(init_payload, platform, env)
    return _MPWorker(ctx, init_payload, platform, env)
