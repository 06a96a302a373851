"""ProcessPool: a pool of worker processes with a per-job record stream.

Why our own pool, not loky
==========================
loky (joblib's reusable, crash-tolerant executor) was weighed as the
backbone, and measured (``benchmarks/bench_pool_backends.py``, loky 3.7,
the overhead benchmark's 114k-task tree on 2 workers, best of 3; the range
of two runs on a noisy 2-core machine):

    dask.multiprocessing.get                    140-160 µs/task
    localsched on this pool (records streamed)   11-12  µs/task   12.5-13x dask
    localsched on loky's executor (no stream)    10-14  µs/task   11.5-14x dask
    localsched on ProcessPoolExecutor (same)     10-12  µs/task   14x dask

Speed does not decide it: every backend clears the 3x bar by far, because
batching makes the hand-offs few, and none is clearly faster.  The record stream does: a loky (or
CPython) future carries only its final result, while the scheduler needs
each task's record *while its batch runs*, so ``pretask``/``posttask``
fire as tasks start and end and dependents are released early.  Streaming
through loky would need a side channel per worker next to its queues, which
is the pipes and listener of this module over again, plus a dependency;
and loky's workers re-import the main module, as multiprocessing's spawn
does, which this pool's spawn avoids.  What this pool takes from loky and
CPython instead is their discipline: a worker is busy until its job's last
message is read, a pool whose workers cannot start is broken loudly, never
respawned in a loop, and workers die with their parent.

How a job travels::

    caller thread            listener thread (one per pool)          worker process
    ─────────────            ──────────────────────────────          ──────────────
    submit(fn, …, emit) ─► pending ─► IDLE worker? ─ RUN(id) ──────► run fn
                                                                      │ RECORDS(id)…
    emit(records) ◄──────── unpickle, route by id ◄──────────────────┘ DONE(id)
    future done ◄────────── the job's last message: worker IDLE again
                            (or its exit: WorkerDiedError, a replacement starts)

Large values do not ride in these messages: a streaming job's RUN names a
shared-memory prefix, and its inputs and results travel as segments in
``/dev/shm`` with small handles in the messages (``shm``).  A job's input
segment is released when the job ends; when its worker dies, so are the
segments the worker made under the job's prefix and never reported.

Worker states, every move checked (``Worker.move``; an illegal move raises
WorkerStateError)::

    STARTING ──READY──► IDLE ──RUN──► BUSY ──last message──► IDLE
        │                │              │
        │                └──────────────┴──stop/kill──► STOPPING ──exit──► DEAD
        └──────────────exit (start-up failure: the pool breaks)─────────► DEAD
    (any live state) ──exit──► DEAD

Only the listener thread reads or writes the workers' pipes, spawns and
reaps; ``kill()`` and ``terminate()`` may run in other threads and only
move a BUSY worker to STOPPING and signal it, under ``_lock``.  A STOPPING
worker is never given work and its messages are dropped.
"""

from __future__ import annotations

import enum
import itertools
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from concurrent.futures import Executor, Future, InvalidStateError
from concurrent.futures.process import BrokenProcessPool as _CPythonBrokenProcessPool
from multiprocessing.connection import wait as wait_for
from typing import Any, Callable, Iterable, Optional

from ..utils import name_tasks
from . import oob, segments
from . import worker as worker_module
from .handles import SharedValue
from .protocol import LAST_OF_JOB, Kind, decode, dumps, encode, unpack_exception

__all__ = ["ProcessPool", "WorkerDiedError", "BrokenProcessPool", "WorkerState",
           "WorkerStateError", "START_METHODS"]

START_METHODS = ("spawn", "fork", "forkserver")

# Seconds a worker gets to exit after STOP (or after SIGKILL) before the
# pool stops waiting for it: a worker ignoring STOP is then killed.
STOP_GRACE = 5.0
# Seconds ``terminate()`` lets a running job send its last message before
# its worker is killed: a job whose function has returned is finished, not
# killed, even when its last message is still on its way.
TERMINATE_GRACE = 0.5


class WorkerDiedError(RuntimeError):
    """A worker process died (or was killed) while running a job.

    >>> str(WorkerDiedError("worker process 7 died (exit code 3)", 7, 3).for_task(["x"]))
    "worker process 7 died (exit code 3) while running task 'x'"
    """

    def __init__(self, message: str, pid: int = 0, exitcode: Optional[int] = None):
        super().__init__(message)
        self.pid = pid
        self.exitcode = exitcode

    def for_task(self, keys: list) -> "WorkerDiedError":
        """The same error, naming the task the worker was running (or the
        tasks it may have been running, when it died with records unsent)."""
        return WorkerDiedError(f"{self.args[0]} while running {name_tasks(keys)}",
                               self.pid, self.exitcode)


class BrokenProcessPool(_CPythonBrokenProcessPool):
    """The pool cannot run work any more: its workers could not start (they
    exited at start-up, or the initializer failed).  Pending work fails with
    it and new submits raise it.  A RuntimeError, and CPython's
    ``concurrent.futures.process.BrokenProcessPool``, so code written for
    ProcessPoolExecutor catches it.

    >>> issubclass(BrokenProcessPool, RuntimeError)
    True
    """


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


def _describe_exit(exitcode: Optional[int]) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


def _settle(future: Future, value: Any = None, exc: Optional[BaseException] = None) -> None:
    """Complete ``future`` unless it is complete already (killed, or failed
    on an unreadable message, while its job went on)."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass


class _Job:
    """One submit: its future, the RUN frame until sent, where records go,
    and the shared-memory segments it uses (see ``shm``): its name prefix,
    and the segment holding its inputs, owned here until the job ends."""

    __slots__ = ("id", "future", "frame", "emit", "worker", "shm_prefix", "inputs", "store",
                 "lent")

    def __init__(self, job_id: int, future: Future, frame: bytes, emit: Optional[Callable],
                 shm_prefix: Optional[str] = None, inputs: Optional[SharedValue] = None,
                 store: Optional[segments.SegmentStore] = None, lent: Optional[list] = None):
        self.id = job_id
        self.future = future
        self.frame: Optional[bytes] = frame
        self.emit = emit
        self.worker: Optional[Worker] = None
        self.shm_prefix = shm_prefix
        self.inputs = inputs
        self.store = store
        self.lent = lent

    def ended(self, worker_died: bool = False, used=None) -> None:
        """The job will say no more: its inputs' segment goes (the worker
        mapped it when the job started), the free segments it was lent and
        did not use (``used``, from its DONE) return to the free list; if
        its worker died, so do the segments it made but never reported."""
        if self.inputs is not None:
            self.inputs.release()
            self.inputs = None
        if self.lent:
            lent, self.lent = self.lent, None
            self.store.give_back(lent, used or (), lost=used is None)
        if worker_died and self.shm_prefix is not None:
            segments.sweep(self.shm_prefix)


class _JobFuture(Future):
    """A Future that knows its job, so that ``ProcessPool.kill`` can find it."""

    def __init__(self, pool: "ProcessPool"):
        super().__init__()
        self._pool = pool
        self._job: Optional[_Job] = None

    def cancel(self) -> bool:
        """Cancel the job if it has not started; its inputs' segment goes
        at once (not when the pool reaches the job in its queue)."""
        if not super().cancel():
            return False
        if self._job is not None:
            self._job.ended()
        return True


# -- worker processes, as the pool sees them -----------------------------------


class Worker:
    """A worker process: its pid, its state and job, the pipes to it, and a
    handle that becomes ready when it exits."""

    pid: int
    conn: Any  # replies come in here
    out: Any  # RUN and STOP go out here
    lifeline: Any  # the write end of the worker's lifeline: never written to

    def __init__(self) -> None:
        self.state = STARTING
        self.job: Optional[_Job] = None
        self.jobs_started = 0
        self.init_failed = False  # it reported INIT_FAILED (the pool broke then)
        self.conn_open = True
        self.exit_handle: Any = None

    def move(self, new: WorkerState) -> None:
        """Change state; a move the state diagram does not have raises."""
        if new not in _MOVES[self.state]:
            raise WorkerStateError(
                f"worker process {self.pid} cannot go from {self.state.value} to {new.value}")
        self.state = new

    def _open_pidfd(self) -> None:
        # Readable when the process ends, even if a grandchild it forked
        # still holds its pipes open (Linux; elsewhere see subclasses).
        try:
            self.pidfd: Optional[int] = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def join(self, timeout: Optional[float]) -> Optional[int]:
        """Wait up to ``timeout`` seconds for the process to end; its exit
        code, or None if it still runs."""
        if self.pidfd is not None and not wait_for([self.pidfd], timeout):
            return None
        return self._wait(None if self.pidfd is not None else timeout)

    def _wait(self, timeout: Optional[float]) -> Optional[int]:
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


class _SpawnedWorker(Worker):
    """A fresh interpreter running ``worker.BOOT`` (the "spawn" method)."""

    def __init__(self, init_payload: Optional[bytes]):
        from multiprocessing.connection import Connection

        super().__init__()
        to_parent_r, to_parent_w = os.pipe()
        to_child_r, to_child_w = os.pipe()
        life_r, life_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", worker_module.BOOT,
                 str(to_child_r), str(to_parent_w), str(life_r), str(os.getpid())],
                pass_fds=(to_child_r, to_parent_w, life_r),
                stdin=subprocess.DEVNULL,
                # Its own session: Ctrl-C at a terminal goes to the parent only,
                # which decides.
                start_new_session=True,
            )
        except BaseException:
            for fd in (to_parent_r, to_child_w, life_w):
                os.close(fd)
            raise
        finally:
            for fd in (to_child_r, to_parent_w, life_r):
                os.close(fd)
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
            self.out.send_bytes(pickle.dumps(
                (sys.path, bytes(multiprocessing.current_process().authkey))))
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
    """Started by multiprocessing (the "fork" and "forkserver" methods)."""

    def __init__(self, ctx, init_payload: Optional[bytes]):
        super().__init__()
        parent, child = ctx.Pipe(duplex=True)
        life_r, life_w = ctx.Pipe(duplex=False)
        forked = ctx.get_start_method() == "fork"
        self.proc = ctx.Process(
            target=worker_module.main,
            # A forked worker inherits the parent's ends and closes them; the
            # fork server's children never have them.  The fork server, not
            # this process, is a forkserver worker's parent.
            args=(child, child, life_r, os.getpid() if forked else None, init_payload,
                  (parent, life_w) if forked else ()),
            name="localsched-worker",
            # Not a daemon: a task may start processes of its own (a nested
            # get).  The lifeline and PDEATHSIG tie it to this process, and
            # ``forget`` keeps multiprocessing from joining it at exit.
            daemon=False,
        )
        try:
            self.proc.start()
        finally:
            child.close()
            life_r.close()
        self.pid = self.proc.pid
        self._untrack()
        self.conn = self.out = parent
        self.lifeline = life_w
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


# -- the pool ------------------------------------------------------------------

# Tells the pools of this process apart in shared-memory segment names.
_pool_tokens = itertools.count(1)

# Every pool alive in this process, so that a forked child can let go of them.
_live_pools: "weakref.WeakSet[ProcessPool]" = weakref.WeakSet()


class ProcessPool(Executor):
    """A pool of worker processes with a per-job record stream.

    ``submit(fn, *args, emit=None, **kwargs)`` runs ``fn(*args, **kwargs)`` in
    a worker.  With ``emit``, the worker's function receives an ``emit`` of
    its own, taking lists of records, and every list it emits arrives at
    ``emit`` here, in order, before the future completes.

    The concurrent.futures contract holds: ``shutdown(wait=True)`` lets
    pending and running work finish (``cancel_futures=True`` cancels what has
    not started), and ``cancel()`` cannot stop a running job.  To stop
    running work use ``kill(futures)`` (their workers are killed and
    replaced) or ``terminate()``.

    Parameters
    ----------
    num_workers : int
    context : {"spawn", "fork", "forkserver"}
        The start method (default "spawn": safe with threads, and unlike
        multiprocessing's it does not re-import the main module).
    initializer, initargs
        Run once in each worker process when it starts.  If it raises, or a
        worker exits at start-up, the pool is broken (BrokenProcessPool).

    >>> with ProcessPool(1) as pool:
    ...     future = pool.submit(pow, 2, 10)
    >>> future.result()
    1024
    """

    def __init__(
        self,
        num_workers: int,
        *,
        context: str = "spawn",
        initializer: Optional[Callable] = None,
        initargs: tuple = (),
    ):
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        if context not in START_METHODS:
            raise ValueError(f"context must be one of {START_METHODS}, got {context!r}")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be callable")
        self.num_workers = num_workers
        self._method = context
        self._ctx = multiprocessing.get_context(context)
        self._init_payload = dumps((initializer, tuple(initargs))) if initializer else None
        self._owner = os.getpid()
        self._ids = itertools.count(1)
        # Names this pool's shared-memory segments (see ``segments``).
        self._token = next(_pool_tokens)
        if segments.settings()[0]:
            segments.store()  # (this process owns segments from now on)
        # _lock guards _pending, _workers, _closed, _broken, _woken and every
        # worker's state and job.
        self._lock = threading.Lock()
        self._pending: deque = deque()
        self._workers: list[Worker] = []
        self._closed = False  # shutdown() was called: no new submits
        self._kill_at: Optional[float] = None  # terminate(): kill running work then
        self._broken: Optional[BrokenProcessPool] = None
        # Wakes the listener from its wait (new work, shutdown, kill): a
        # byte on a non-blocking pipe, written once until the listener runs.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._woken = False
        self._handles: Optional[dict] = None  # wait handle -> worker, rebuilt on change
        self._started = threading.Event()
        self._start_error: Optional[BaseException] = None
        # The listener thread starts every worker: on Linux a worker dies
        # when the thread that started it ends (PR_SET_PDEATHSIG), and the
        # listener lives as long as the workers, unlike the caller's thread.
        self._listener = threading.Thread(target=self._listen, name="localsched-process-pool",
                                          daemon=True)
        _live_pools.add(self)  # before the first fork: fork workers let go of its pipes
        self._listener.start()
        self._started.wait()
        if self._start_error is not None:
            self._listener.join()
            raise self._start_error

    # -- the caller's side ---------------------------------------------------

    @property
    def broken(self) -> Optional[BrokenProcessPool]:
        """Why the pool cannot run work any more, or None while it can."""
        return self._broken

    @property
    def pids(self) -> list[int]:
        """The ids of the worker processes that are alive."""
        with self._lock:
            return [w.pid for w in self._workers if w.state is not DEAD]

    def submit(self, fn, /, *args, emit: Optional[Callable] = None, **kwargs) -> Future:
        self._check_owner()
        job_id = next(self._ids)  # (atomic: itertools.count is a C iterator)
        # Streaming jobs (the scheduler's batches) exchange large values
        # through shared memory when there is room; plain jobs use the pipe.
        prefix = store = lent = None
        if emit is not None and segments.available():
            store = segments.store()
            prefix = store.job_prefix(self._token, job_id)
            lent = store.lend()
        try:  # may raise: not sendable
            body, inputs = oob.dumps_job((fn, args, kwargs, emit is not None, prefix, lent),
                                         prefix, dumps, store)
        except BaseException:
            if lent:
                store.give_back(lent)
            raise
        future = _JobFuture(self)
        job = future._job = _Job(job_id, future, encode(Kind.RUN, job_id, body), emit,
                                 prefix, inputs, store, lent)
        del body
        with self._lock:
            refused = self._broken or self._closed
            if not refused:
                self._pending.append(job)
                self._wake()
        if refused:
            job.ended()
            if self._broken is not None:
                raise BrokenProcessPool(str(self._broken)) from self._broken
            raise RuntimeError("cannot submit to a ProcessPool after shutdown")
        return future

    def kill(self, futures: Iterable[Future]) -> None:
        """Stop these futures' work now: cancel what has not started, kill the
        workers running the rest (their futures fail with WorkerDiedError;
        replacements start).  The scheduler calls this on Ctrl-C.

        A killed worker is never given work again, even if its job was just
        finishing: the next job waits for a live worker.
        """
        self._check_owner()
        for fut in futures:
            job = getattr(fut, "_job", None)
            if job is None or getattr(fut, "_pool", None) is not self:
                continue
            if fut.cancel():
                job.ended()
                continue
            with self._lock:
                w = job.worker
                if w is None or w.job is not job or w.state is not BUSY:
                    continue  # already over
                self._kill(w)
                pid = w.pid
                self._wake()
            _settle(fut, exc=WorkerDiedError(
                f"worker process {pid} was killed by ProcessPool.kill()", pid))

    def _kill(self, w: Worker) -> None:
        """(under _lock) Stop a worker at once: it takes no more work."""
        w.move(STOPPING)
        w.kill()  # still unreaped (it is not DEAD): its pid cannot be reused yet

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new work; pending and running work still completes (unless
        ``cancel_futures``: pending work is cancelled), then the workers stop.
        ``wait``: return only when all of that is done."""
        if os.getpid() != self._owner:
            return  # a forked child's copy: the parent stops its pool
        with self._lock:
            self._closed = True
            cancelled = list(self._pending) if cancel_futures else []
            if cancel_futures:
                self._pending.clear()
            self._wake()
        for job in cancelled:
            job.future.cancel()
            job.ended()
        if wait and threading.current_thread() is not self._listener:
            self._listener.join()

    def terminate(self) -> None:
        """Stop now: cancel pending work, kill the work still running after
        ``TERMINATE_GRACE`` seconds (its futures fail with WorkerDiedError;
        a job that only had its last message to send finishes), stop the
        idle workers (they exit cleanly) and wait for them all."""
        if os.getpid() != self._owner:
            return
        with self._lock:
            self._closed = True
            cancelled = list(self._pending)
            self._pending.clear()
            if self._kill_at is None:
                self._kill_at = time.monotonic() + TERMINATE_GRACE
            self._wake()
        for job in cancelled:
            job.future.cancel()
            job.ended()
        if threading.current_thread() is not self._listener:
            self._listener.join()

    def _check_owner(self) -> None:
        # Checked before taking _lock: a forked child's copy of the lock may
        # have been held by a thread that does not exist in the child.
        if os.getpid() != self._owner:
            raise RuntimeError(
                f"this ProcessPool belongs to process {self._owner}; a forked child "
                "cannot use it (a get in the child starts pools of its own)")

    def _wake(self) -> None:
        """(under _lock) Make the listener look at pending work and states."""
        if not self._woken and self._wake_w >= 0:
            self._woken = True
            try:
                os.write(self._wake_w, b"\0")
            except BlockingIOError:
                pass  # the pipe is full of wake-ups already

    # -- the listener thread -------------------------------------------------

    def _listen(self) -> None:
        try:
            for _ in range(self.num_workers):
                self._spawn()
        except BaseException as exc:  # noqa: B036 -- re-raised in __init__
            self._start_error = exc
            self._started.set()
            self._stop_workers()
            return
        self._started.set()
        try:
            self._serve()
        except BaseException as exc:  # noqa: B036 -- nothing may hang on a dead listener
            self._break(BrokenProcessPool(
                f"the process pool's listener thread failed: {exc!r}"), running_too=True)
            raise
        finally:
            self._stop_workers()

    def _serve(self) -> None:
        """Route messages, reap exits, hand out work, until closed and idle."""
        wake_r = self._wake_r
        while True:
            with self._lock:
                self._woken = False
                if self._closed and not self._pending and not any(
                        w.state is BUSY for w in self._workers):
                    return
                kill_at = self._kill_at
            timeout = None
            if kill_at is not None:
                timeout = kill_at - time.monotonic()
                if timeout <= 0:
                    self._kill_running("the pool was terminated")
                    continue
            self._assign()
            handles = self._handles
            if handles is None:
                handles = self._handles = self._watch_list()
            dead = []
            for obj in wait_for([wake_r, *handles], timeout):
                if obj is wake_r:
                    os.read(wake_r, 4096)
                    continue
                w = handles[obj]
                if obj is w.conn:
                    if not self._read(w):  # the pipe closed: the process is ending
                        w.conn_open = False
                        self._handles = None
                        if w.exit_handle is None:
                            dead.append(w)
                elif w not in dead:
                    dead.append(w)
            for w in dead:
                self._reap(w)
            store = segments.current()
            if store is not None and store.events:
                store.drain()  # (handles dropped in this thread, or after their run)

    def _kill_running(self, why: str) -> None:
        """Kill the workers still running a job; their futures fail."""
        with self._lock:
            killed = [(w.pid, w.job) for w in self._workers if w.state is BUSY]
            for w in self._workers:
                if w.state is BUSY:
                    self._kill(w)
        for pid, job in killed:
            _settle(job.future, exc=WorkerDiedError(
                f"worker process {pid} was killed: {why}", pid))

    def _watch_list(self) -> dict:
        handles: dict = {}
        with self._lock:
            workers = list(self._workers)
        for w in workers:
            if w.conn_open:
                handles[w.conn] = w
            if w.exit_handle is not None:
                handles[w.exit_handle] = w
        return handles

    def _spawn(self) -> None:
        if self._method == "spawn":
            w: Worker = _SpawnedWorker(self._init_payload)
        else:
            w = _MPWorker(self._ctx, self._init_payload)
        with self._lock:
            self._workers.append(w)
        self._handles = None

    def _assign(self) -> None:
        """Hand pending jobs to IDLE workers."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                w = next((w for w in self._workers if w.state is IDLE), None)
                if w is None:
                    return
                job = self._pending.popleft()
                if not job.future.set_running_or_notify_cancel():
                    job.ended()
                    continue  # cancelled while pending
                w.move(BUSY)
                w.job = job
                w.jobs_started += 1
                job.worker = w
                frame, job.frame = job.frame, None
            try:
                w.out.send_bytes(frame)
            except (OSError, ValueError):
                pass  # it died: its exit fails the job

    def _read(self, w: Worker) -> bool:
        """Handle one message from ``w``; False if its pipe has closed."""
        try:
            frame = w.conn.recv_bytes()
        except (EOFError, OSError):
            return False
        try:
            kind, job_id, body = decode(frame)
        except ValueError as exc:  # not our framing: the stream cannot be trusted
            with self._lock:
                if w.state in (STARTING, IDLE, BUSY):
                    job = w.job
                    self._kill(w)
                else:
                    job = None
            if job is not None:
                _settle(job.future, exc=self._unreadable(w, exc))
            return True
        with self._lock:
            state, job = w.state, w.job
        if state is STOPPING:
            return True  # killed: whatever it still says is dropped
        if kind is Kind.READY:
            with self._lock:
                if w.state is STARTING:
                    w.move(IDLE)
            return True
        if kind is Kind.INIT_FAILED:
            w.init_failed = True
            try:
                cause = unpack_exception(pickle.loads(body))
            except Exception as exc:
                cause = exc
            err = BrokenProcessPool(f"the process pool's initializer failed: {cause!r}")
            err.__cause__ = cause
            self._break(err)
            return True
        if job is None or job.id != job_id:
            # A message of a job this worker no longer runs.  Workers stay
            # BUSY until their job's last message, so this cannot happen;
            # if it did, the message must not reach another job.
            return True
        if kind is Kind.RECORDS:
            if job.emit is not None and not job.future.done():
                try:
                    job.emit(oob.loads_records(body, job.store) if job.store is not None
                             else pickle.loads(body))
                except Exception as exc:  # the job fails; it still runs to its end
                    _settle(job.future, exc=self._unreadable(w, exc))
            return True
        if kind not in LAST_OF_JOB:
            return True
        value = error = used = None
        try:
            if kind is Kind.DONE:
                used = pickle.loads(body) if len(body) else ()
            elif kind is Kind.RESULT:
                value = pickle.loads(body)
            elif kind is Kind.FAILED:
                error = unpack_exception(pickle.loads(body))
        except Exception as exc:
            error = self._unreadable(w, exc)
        with self._lock:
            if w.state is not BUSY or w.job is not job:
                return True  # killed meanwhile: kill() settled the future
            w.job = None
            job.worker = None
            w.move(IDLE)
        job.ended(used=used)
        _settle(job.future, value, error)
        return True

    @staticmethod
    def _unreadable(w: Worker, exc: BaseException) -> RuntimeError:
        err = RuntimeError(f"could not read a message from worker process {w.pid}: {exc!r}")
        err.__cause__ = exc
        return err

    def _reap(self, w: Worker) -> None:
        """A worker process ended (or closed its pipe): fail its job, start a
        replacement, or break the pool if it never got going."""
        # What it said before it died still counts (records, its job's end).
        while w.conn_open:
            try:
                if not w.conn.poll():
                    break
            except (EOFError, OSError):
                break
            if not self._read(w):
                break
        with self._lock:
            before = w.state
            job, w.job = w.job, None
            w.move(DEAD)  # from here on kill() leaves it alone: safe to reap
        code = w.join(STOP_GRACE)
        if code is None:  # closed its pipe but lives on: make sure it is gone
            w.kill()
            code = w.join(STOP_GRACE)
        w.close()
        with self._lock:
            self._workers.remove(w)
        self._handles = None
        if job is not None:
            job.ended(worker_died=True)
        if before is BUSY and job is not None:
            _settle(job.future, exc=WorkerDiedError(
                f"worker process {w.pid} died ({_describe_exit(code)})", w.pid, code))
        elif (before is STARTING or (before is IDLE and not w.jobs_started)) \
                and not w.init_failed:
            # It never ran anything: so would its replacement.  Respawning
            # would loop forever; break the pool instead, as CPython does.
            self._break(BrokenProcessPool(
                f"a worker process exited at start-up ({_describe_exit(code)}); the pool "
                f"cannot run work"))
        with self._lock:
            needed = self._broken is None and (not self._closed or bool(self._pending))
        if needed:
            try:
                self._spawn()
            except Exception as exc:
                self._break(BrokenProcessPool(f"could not start a worker process: {exc!r}"))

    def _break(self, error: BrokenProcessPool, running_too: bool = False) -> None:
        """The pool cannot run new work: fail what waits (and, if the
        listener itself failed, what runs) with ``error``; refuse submits.
        Work already running on live workers finishes."""
        with self._lock:
            if self._broken is None:
                self._broken = error
            self._closed = True
            jobs = list(self._pending)
            self._pending.clear()
            if running_too:
                jobs += [w.job for w in self._workers if w.job is not None]
        for job in jobs:
            _settle(job.future, exc=error)
            if job.worker is None:  # never sent (a running job ends with its worker)
                job.ended()

    def _stop_workers(self) -> None:
        """Stop every worker (the listener's last act) and release the pipes."""
        with self._lock:
            workers = list(self._workers)
            self._workers.clear()
            for w in workers:
                if w.state is BUSY:  # only if the listener failed
                    self._kill(w)
                elif w.state in (STARTING, IDLE):
                    w.move(STOPPING)
        for w in workers:
            if w.state is STOPPING:
                try:
                    w.out.send_bytes(encode(Kind.STOP))
                except (OSError, ValueError):
                    pass
        for w in workers:
            if w.state is not DEAD:
                if w.join(STOP_GRACE) is None:
                    w.kill()
                    w.join(STOP_GRACE)
                w.move(DEAD)
                w.close()
                if w.job is not None:
                    w.job.ended(worker_died=True)
        with self._lock:  # (a closed descriptor's number may be reused at once)
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_r = self._wake_w = -1
        _live_pools.discard(self)

    # -- a forked child ------------------------------------------------------

    def _let_go_in_child(self) -> None:
        """In a child forked from the owner: close the inherited pipe ends
        (held open here, they would keep workers from seeing their parent
        exit) without touching the parent's workers."""
        # Only what is still open: a closed descriptor's number may belong
        # to something else by now.  (Worker.close is idempotent.)
        for w in self._workers:
            w.close()
            if isinstance(w, _MPWorker):
                w.forget()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1


def _let_go_of_pools_in_child() -> None:
    for pool in list(_live_pools):
        if pool._owner != os.getpid():
            pool._let_go_in_child()
    _live_pools.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_let_go_of_pools_in_child)
