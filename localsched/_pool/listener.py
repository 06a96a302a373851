"""The listener thread: the one thread that talks to a pool's workers.

Only the listener thread reads or writes the workers' pipes, spawns and
reaps; ``kill()`` and ``terminate()`` may run in other threads and only
move a BUSY worker to STOPPING and signal it, under ``_lock``.  A STOPPING
worker is never given work and its messages are dropped.

``_Listener`` is the listener's half of ``ProcessPool`` (its base class:
both halves share the pool's state, guarded by ``_lock``).  Its ``_serve``
loop reads as its steps: stop when closed and idle, kill what outlived
``terminate``'s grace, hand out pending jobs, wait, read messages, reap
exits, apply shared-memory releases.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections import deque
from multiprocessing.connection import wait as wait_for
from typing import Any

from .._shm import oob
from .._shm import store as segments
from ..system import platform as _platform
from .jobs import BrokenProcessPool, WorkerDiedError, _settle
from .protocol import LAST_OF_JOB, Kind, decode, encode, unpack_exception
from .workers import (
    BUSY,
    DEAD,
    IDLE,
    STARTING,
    STOP_GRACE,
    STOPPING,
    Worker,
    describe_exit,
    start_worker,
)

__all__ = ["_Listener"]


class _Listener:
    """The listener thread's methods (see the module docstring)."""

    num_workers: int
    _lock: threading.Lock
    _pending: deque
    _workers: list
    _closed: bool
    _broken: BrokenProcessPool | None
    _kill_at: float | None
    _woken: bool
    _wake_r: int
    _wake_w: int
    _wake_socks: tuple | None
    _portable: bool
    platform: _platform.Platform
    _handles: dict | None
    _started: threading.Event
    _start_error: BaseException | None
    _method: str
    _ctx: Any
    _init_payload: bytes | None
    _worker_env: dict | None

    def _stopped(self) -> None:
        """The listener has stopped every worker (the pool's hook)."""

    def _close_wake(self) -> None:
        """Close the wake pipe (the pool's)."""

    def _kill(self, w: Worker) -> None:
        """(under _lock) Stop a worker at once: it takes no more work."""
        w.move(STOPPING)
        w.kill()  # still unreaped (it is not DEAD): its pid cannot be reused yet

    def _wake(self) -> None:
        """(under _lock) Make the listener look at pending work and states."""
        if not self._woken and self._wake_w >= 0:
            self._woken = True
            try:
                if self._wake_socks is None:
                    os.write(self._wake_w, b"\0")
                else:
                    self._wake_socks[1].send(b"\0")
            except BlockingIOError:
                pass  # the pipe is full of wake-ups already


    def _listen(self) -> None:
        try:
            for _ in range(self.num_workers):
                if self._closed:  # (start-up interrupted: ``ProcessPool._abandon_start``)
                    break
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
        # (the wake pipe's descriptor, or where those cannot be waited on, its socket)
        wake_r: Any = self._wake_r if self._wake_socks is None else self._wake_socks[0]
        read_wake: Any = (os.read if self._wake_socks is None
                          else lambda sock, n: sock.recv(n))
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
                    read_wake(wake_r, 4096)
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
            store = segments.current(self.platform)
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
        w = start_worker(self._method, self._ctx, self._init_payload, self.platform,
                         self._worker_env)
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
            if job.emit is not None and not job.future.done():  # (emit: PoolLoop.emit)
                try:
                    job.emit(oob.loads_records(body, job.store) if job.store is not None
                             else pickle.loads(body))
                except Exception as exc:  # the job fails; it still runs to its end
                    _settle(job.future, exc=self._unreadable(w, exc))
            return True
        if kind is Kind.NOTE:
            try:
                segments.warn_once(bytes(body).decode(errors="replace"))
            except Exception as exc:  # warnings made errors (-W error): the job's, not ours
                _settle(job.future, exc=exc)
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
            # (what a live view reads of the ended job: its worker's slot
            # moves on with the next job; a few memory loads per job)
            job.last_task = w.slot.task_of(job.id)
            job.worker = None
            w.move(IDLE)
        job.ended(used=used)
        _settle(job.future, value, error)
        if job.store is not None and job.store.kind.writer_holds:
            # Every record of the job was read (and its segments adopted)
            # before this, its last message: the worker may let go.
            w.let_go_prefix = job.shm_prefix
            try:
                w.out.send_bytes(encode(Kind.LET_GO, job.id))
            except (OSError, ValueError):
                pass  # (it died: the OS lets go for it)
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
        # (Its task slot outlives it: which task it had started, if it says.)
        task_index = w.slot.task_of(job.id) if job is not None else None
        w.close()
        with self._lock:
            self._workers.remove(w)
        self._handles = None
        if job is not None:
            job.ended(worker_died=True)
        if w.let_go_prefix is not None:
            # Killed before it let go (Ctrl-C, shutdown): Windows frees what
            # it held; where segments outlive their holders (the simulation
            # of Windows), the sweep does.
            store = segments.current(self.platform)
            if store is not None:
                store.sweep(w.let_go_prefix)
        if before is BUSY and job is not None:
            _settle(job.future, exc=WorkerDiedError(
                f"worker process {w.pid} died ({describe_exit(code)})", w.pid, code,
                task_index))
        elif (before is STARTING or (before is IDLE and not w.jobs_started)) \
                and not w.init_failed:
            # It never ran anything: so would its replacement.  Respawning
            # would loop forever; break the pool instead, as CPython does.
            self._break(BrokenProcessPool(
                f"a worker process exited at start-up ({describe_exit(code)}); the pool "
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
                # (A worker still starting has run nothing of the caller's
                # unless there is an initializer: it is not waited for,
                # which under load takes a second or more, e.g. at exit
                # after a Ctrl-C in a computation's first moments.)
                if w.state is BUSY or (w.state is STARTING and self._init_payload is None):
                    self._kill(w)  # (BUSY: only if the listener failed)
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
            self._close_wake()
        self._stopped()
