"""ProcessPool: a pool of worker processes with a per-job record stream.

Why our own pool, not loky
==========================
loky (joblib's reusable, crash-tolerant executor) was weighed as the
backbone, and measured (``benchmarks/bench_pool_backends.py``; figures in
``benchmarks/README.md``).  Speed does not decide it: every backend is
far faster than dask's on tiny tasks, because batching makes
the hand-offs few, and none is clearly faster.  The record stream does: a loky (or
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

Large values do not ride in these messages: a streaming job's RUN names a
shared-memory prefix, and its inputs and results travel as segments in
``/dev/shm`` with small handles in the messages (``shm``).  A job's input
segment is released when the job ends; when its worker dies, so are the
segments the worker made under the job's prefix and never reported.

A worker says which task it is running in its task slot (``taskslot``:
a few shared bytes, written per task without a system call), so the
WorkerDiedError of a worker that died carries that task's index even
when the records of the tasks before it never left the worker, and a live
view counts those tasks ended (``_JobFuture.task_at_work``).

The pool's rooms: ``workers`` (worker handles and their states),
``listener`` (the thread that talks to them), ``jobs`` (a job, its future,
the errors); this module is the Executor facade.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, Future

from .._shm import oob
from .._shm import store as segments
from ..system import platform as _platform
from ..system.forking import renew_in_child
from .jobs import BrokenProcessPool, WorkerDiedError, _Job, _JobFuture, _settle
from .listener import _Listener
from .protocol import Kind, dumps, encode
from .workers import (
    BUSY,
    DEAD,
    START_METHODS,
    Worker,
    WorkerState,
    WorkerStateError,
    _MPWorker,
    max_workers,
)

__all__ = ["ProcessPool", "WorkerDiedError", "BrokenProcessPool", "WorkerState",
           "WorkerStateError", "START_METHODS"]

# Seconds ``terminate()`` lets a running job send its last message before
# its worker is killed: a job whose function has returned is finished, not
# killed, even when its last message is still on its way.
TERMINATE_GRACE = 0.5


# Tells the pools of this process apart in shared-memory segment names.
_pool_tokens = itertools.count(1)


class ProcessPool(_Listener, Executor):
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
    worker_env : mapping of str to str, optional
        Environment variables each worker starts with, set before anything
        of the caller's runs in it (``localsched.multiprocessing`` sets the
        threads BLAS and OpenMP use: ``localsched.system.blas``).
    platform : localsched.system.platform.Platform, optional
        What the pool and its workers run as (which kind of shared memory,
        how workers start and are waited on), as multiprocessing's objects
        take a context; default: this machine's, detected once.  Its
        workers get the same, and so does the segment store it uses.

    Interrupted while it starts (Ctrl-C), the pool stops what it started
    (its listener thread, its workers) before the KeyboardInterrupt goes on.

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
        initializer: Callable | None = None,
        initargs: tuple = (),
        worker_env: Mapping[str, str] | None = None,
        platform: _platform.Platform | None = None,
    ):
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        if context not in START_METHODS:
            raise ValueError(f"context must be one of {START_METHODS}, got {context!r}")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be callable")
        #: What this pool runs as (``_platform.Platform``): its workers and
        #: its segment store get the same.
        self.platform = platform = platform or _platform.Platform.detect()
        limit = max_workers(platform)
        if limit is not None and num_workers > limit:
            raise ValueError(f"num_workers must be at most {limit} on this platform "
                             f"({sys.platform}: one wait watches at most {limit} workers), "
                             f"got {num_workers}")
        self.num_workers = num_workers
        self._method = context
        self._ctx = multiprocessing.get_context(context)
        self._init_payload = dumps((initializer, tuple(initargs))) if initializer else None
        self._worker_env = dict(worker_env) if worker_env else None
        self._owner = os.getpid()
        self._ids = itertools.count(1)
        # Names this pool's shared-memory segments (see ``segments``).
        self._token = next(_pool_tokens)
        # _lock guards _pending, _workers, _closed, _broken, _woken and every
        # worker's state and job.
        self._lock = threading.Lock()
        self._pending: deque = deque()
        self._workers: list[Worker] = []
        self._closed = False  # shutdown() was called: no new submits
        self._kill_at: float | None = None  # terminate(): kill running work then
        self._broken: BrokenProcessPool | None = None
        # Wakes the listener from its wait (new work, shutdown, kill): a
        # byte on a non-blocking pipe, written once until the listener runs.
        # Where pipe descriptors cannot be waited on (Windows), a socket
        # pair instead (``_wake_socks``: sockets can be waited on everywhere).
        self._portable = not platform.fd_passing
        self._wake_socks: tuple[socket.socket, socket.socket] | None = None
        if self._portable:
            self._wake_socks = socket.socketpair()
            self._wake_socks[1].setblocking(False)
            self._wake_r, self._wake_w = (s.fileno() for s in self._wake_socks)
        else:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_w, False)
        self._woken = False
        self._handles: dict | None = None  # wait handle -> worker, rebuilt on change
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        # The listener thread starts every worker: on Linux a worker dies
        # when the thread that started it ends (PR_SET_PDEATHSIG), and the
        # listener lives as long as the workers, unlike the caller's thread.
        self._listener = threading.Thread(target=self._listen, name="localsched-process-pool",
                                          daemon=True)
        self._live = True  # (until its listener stops: a forked child then lets go)
        renew_in_child(self)  # before the first fork: fork workers let go of its pipes
        try:
            self._listener.start()
            self._started.wait()
        except BaseException:
            # Interrupted (Ctrl-C): nobody will ever hold this pool, so
            # nobody could stop it; stop what it started.
            self._abandon_start()
            raise
        if self._start_error is not None:
            self._listener.join()
            raise self._start_error

    # -- the caller's side ---------------------------------------------------

    @property
    def broken(self) -> BrokenProcessPool | None:
        """Why the pool cannot run work any more, or None while it can."""
        return self._broken

    @property
    def pids(self) -> list[int]:
        """The ids of the worker processes that are alive."""
        with self._lock:
            return [w.pid for w in self._workers if w.state is not DEAD]

    def submit(  # type: ignore[override]  # (emit=: a keyword Executor lacks)
            self, fn, /, *args, emit: Callable | None = None, **kwargs) -> Future:
        self._check_owner()
        job_id = next(self._ids)  # (atomic: itertools.count is a C iterator)
        # Streaming jobs (the scheduler's batches) exchange large values
        # through shared memory when there is room; plain jobs use the pipe.
        prefix = store = lent = shm = None
        if emit is not None:
            # (None: the pipes, after one warning)
            store = segments.usable_store(self.platform)
        if store is not None:
            shm = store.for_workers(self._token, job_id)
            prefix = shm[0]
            lent = store.lend()
        try:  # may raise: not sendable
            body, inputs = oob.dumps_job((fn, args, kwargs, emit is not None, shm, lent),
                                         prefix, dumps, store)
        except BaseException:
            if lent and store is not None:
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

    def _abandon_start(self) -> None:
        """Start-up was interrupted: the listener spawns no more workers,
        stops those it spawned (a worker still starting is killed, see
        ``_stop_workers``) and ends; wait for that."""
        with self._lock:
            self._closed = True
            self._wake()
        try:
            self._listener.join()
        except RuntimeError:
            pass  # its thread had not started yet: when it does, it stops at once

    def _check_owner(self) -> None:
        # Checked before taking _lock: a forked child's copy of the lock may
        # have been held by a thread that does not exist in the child.
        if os.getpid() != self._owner:
            raise RuntimeError(
                f"this ProcessPool belongs to process {self._owner}; a forked child "
                "cannot use it (a get in the child starts pools of its own)")

    def _stopped(self) -> None:
        self._live = False

    # -- a forked child ------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        """In a child forked from the owner (``forking.renew_in_child``):
        close the inherited pipe ends (held open here, they would keep
        workers from seeing their parent exit) without touching the
        parent's workers.  Nothing for a pool whose listener had stopped."""
        if not self._live or self._owner == os.getpid():
            return
        self._live = False
        # Only what is still open: a closed descriptor's number may belong
        # to something else by now.  (Worker.close is idempotent.)
        for w in self._workers:
            w.close()
            if isinstance(w, _MPWorker):
                w.forget()
        self._close_wake()

    def _close_wake(self) -> None:
        """Close the wake pipe (or sockets); -1 marks them closed."""
        if self._wake_socks is not None:
            for sock in self._wake_socks:
                sock.close()
        else:
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    os.close(fd)
        self._wake_r = self._wake_w = -1

