"""The process scheduler: tasks run in a pool of worker processes.

For pure-Python tasks that hold the GIL.  Functions and data travel with
cloudpickle, so lambdas and closures work.  Pools are created on first use
(per worker count, start method and initializer) and reused; ``shutdown()``
stops them.

How a batch travels::

    scheduler thread        listener thread (one per pool)      worker process
    ────────────────        ──────────────────────────────      ──────────────
    submit(run_batch, …) ─► pending ─► idle worker? send ─────► recv, run tasks
                                                                 │ records, sent every
    emit(records) ◄─────────── unpickle records ◄───────────────┘ millisecond or so
    future done ◄───────────── "end" message / worker died (sentinel)

The listener watches every worker's pipe *and* its process sentinel, so a
worker that dies (``os._exit``, a segfault, the OOM killer) fails its batch
at once with WorkerDiedError naming the task it was running; the pool starts
a replacement and the next computation works.

>>> from operator import add
>>> get({'a': 1, 'b': (add, 'a', 1)}, 'b', num_workers=1)
2
>>> shutdown()
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Executor, Future
from multiprocessing.connection import wait as wait_for
from typing import Any, Callable, Iterable, Optional

import cloudpickle

from . import core
from .callbacks import Callback
from .core import get_async
from .options import check_options, dask_config, pool_size

__all__ = ["get", "ProcessPool", "WorkerDiedError", "RemoteTraceback", "shutdown"]

START_METHODS = ("spawn", "fork", "forkserver")

class WorkerDiedError(RuntimeError):
    """A worker process died while running a task."""

    def __init__(self, message: str, pid: int = 0, exitcode: Optional[int] = None):
        super().__init__(message)
        self.pid = pid
        self.exitcode = exitcode

    def for_task(self, keys: list) -> "WorkerDiedError":
        """The same error, naming the task the worker was running (or the
        tasks it may have been running, when it died with records unsent)."""
        return WorkerDiedError(
            f"{self.args[0]} while running {core._name_tasks(keys)}", self.pid, self.exitcode
        )


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process, as text."""

    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return "\n\n" + self.tb


class RemoteError(Exception):
    """Stands in for a worker exception that could not be pickled."""


def _describe_exit(exitcode: Optional[int]) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


# -- the worker process ------------------------------------------------------


# The spawn start method runs this in a fresh interpreter.  Unlike
# multiprocessing's spawn it never re-imports the user's __main__ module:
# everything a worker needs arrives pickled by value, so scripts need no
# ``if __name__ == "__main__"`` guard.  argv: the fds to read and write.
_BOOT = """\
import sys, pickle
from multiprocessing.connection import Connection
r = Connection(int(sys.argv[1]), writable=False)
w = Connection(int(sys.argv[2]), readable=False)
sys.path[:] = pickle.loads(r.recv_bytes())
from localsched.multiprocessing import _worker_main
init = r.recv_bytes()
_worker_main(r, w, init or None)
"""


def _worker_main(conn, out, initializer_payload: Optional[bytes]) -> None:
    """Entry point of a worker process: run batches until told to stop.

    Reads batches from ``conn`` and writes records to ``out`` (the same
    duplex connection for the fork and forkserver start methods).
    """
    # Ctrl-C in a terminal reaches the whole process group: the parent
    # decides what to do, workers carry on until told.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    core._process_worker_id = os.getpid()
    Callback.active.clear()  # a forked worker must not fire the parent's callbacks
    send = out.send_bytes
    if initializer_payload is not None:
        try:
            init, initargs = pickle.loads(initializer_payload)
            init(*initargs)
        except BaseException as exc:  # noqa: B036 -- reported, then the worker ends
            _send_quietly(send, b"i" + _dump_exception(exc))
            return
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not payload:
            return  # the pool is shutting down
        def emit(records):  # run_batch already groups records by time
            send(_dump_records(records, b"r"))

        try:
            fn, args, kwargs, streams = pickle.loads(payload)
            if streams:
                fn(*args, emit=emit, **kwargs)
            else:
                result = fn(*args, **kwargs)
        except (BrokenPipeError, EOFError):
            return  # the pool is gone
        except BaseException as exc:  # noqa: B036 -- sent to the parent
            if not _send_quietly(send, b"x" + _dump_exception(exc)):
                return
            continue
        if streams:
            message = b"e"
        else:
            try:
                message = b"v" + dumps(result)
            except Exception as exc:
                message = b"x" + _dump_exception(exc)
        if not _send_quietly(send, message):
            return


def _send_quietly(send, message: bytes) -> bool:
    """Send to the parent; False if it has gone away (then the worker exits)."""
    try:
        send(message)
        return True
    except (BrokenPipeError, OSError):
        return False


def dumps(obj: Any) -> bytes:
    """Pickle for another process: the fast C pickler where it works, else
    cloudpickle (lambdas, closures, anything defined in ``__main__``, which a
    worker process does not have).

    >>> import pickle
    >>> pickle.loads(dumps(lambda x: x + 1))(1)
    2
    """
    try:
        data = pickle.dumps(obj, protocol=5)
    except Exception:
        return cloudpickle.dumps(obj, protocol=5)
    if b"__main__" in data:
        return cloudpickle.dumps(obj, protocol=5)
    return data


def _dump_records(records: list, tag: bytes) -> bytes:
    """Pickle records; a result or exception that cannot be pickled becomes
    a failure of its task, explained."""
    try:
        return tag + dumps([_pack_record(r) for r in records])
    except Exception:
        pass
    safe = []
    for r in records:
        r = _pack_record(r)
        try:
            dumps(r[2])
        except Exception as exc:
            what = "result" if r[1] else "exception"
            err = TypeError(f"could not pickle the {what} of this task to send it "
                            f"back from the worker process: {exc}")
            r = (r[0], False, (err, traceback.format_exc()), r[3], r[4], r[5])
        safe.append(r)
    return tag + dumps(safe)


def _pack_record(r: tuple) -> tuple:
    if r[1] is not False or type(r[2]) is tuple:
        return r
    exc = r[2]
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (r[0], False, (_picklable_exception(exc), tb), r[3], r[4], r[5])


def _picklable_exception(exc: BaseException) -> BaseException:
    try:
        pickle.loads(dumps(exc))
        return exc
    except Exception:
        return RemoteError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")


def _dump_exception(exc: BaseException) -> bytes:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return dumps((_picklable_exception(exc), tb))


def unpack_exception(packed) -> BaseException:
    """A worker's exception, re-raised here with its remote traceback as cause."""
    if isinstance(packed, BaseException):  # from a foreign process executor
        return packed
    exc, tb = packed
    exc.__cause__ = RemoteTraceback(tb)
    return exc


# -- the pool, in the parent ---------------------------------------------------


class _Job:
    __slots__ = ("future", "payload", "emit", "worker")

    def __init__(self, future, payload, emit):
        self.future = future
        self.payload = payload
        self.emit = emit
        self.worker = None


class _Worker:
    """A worker process as the pool sees it: a pid, a connection to send
    batches on, one to read records from, and handles that become ready
    when it dies."""

    pid: int
    conn: Any  # records come in here
    out: Any  # batches go out here
    job: Optional[_Job] = None

    @property
    def handles(self) -> list:
        return [self.conn]

    def kill(self) -> None:
        raise NotImplementedError

    def join(self, timeout: Optional[float] = None) -> Optional[int]:
        """Wait for the process to end; its exit code (None if still running)."""
        raise NotImplementedError

    def close(self) -> None:
        for c in {id(self.conn): self.conn, id(self.out): self.out}.values():
            c.close()


class _SubprocessWorker(_Worker):
    """Started as a fresh interpreter (the "spawn" method)."""

    def __init__(self, init_payload: Optional[bytes]):
        from multiprocessing.connection import Connection

        to_parent_r, to_parent_w = os.pipe()
        to_child_r, to_child_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(to_child_r), str(to_parent_w)],
            pass_fds=(to_child_r, to_parent_w),
            stdin=subprocess.DEVNULL,
            # Its own session: Ctrl-C at a terminal goes to the parent only,
            # which decides (a worker still exits when its pipe closes).
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(to_parent_w)
        self.pid = self.proc.pid
        self.conn = Connection(to_parent_r, writable=False)
        self.out = Connection(to_child_w, readable=False)
        # Readable when the process ends, even if a grandchild it forked
        # still holds its pipe open (Linux; elsewhere the pipe must close).
        try:
            self._exit_fd: Optional[int] = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._exit_fd = None
        self.out.send_bytes(pickle.dumps(sys.path))
        self.out.send_bytes(init_payload or b"")

    @property
    def handles(self) -> list:
        return [self.conn] if self._exit_fd is None else [self.conn, self._exit_fd]

    def kill(self) -> None:
        self.proc.kill()

    def join(self, timeout=None):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        super().close()
        if self._exit_fd is not None:
            os.close(self._exit_fd)
            self._exit_fd = None


class _MPWorker(_Worker):
    """Started by multiprocessing (the "fork" and "forkserver" methods)."""

    def __init__(self, ctx, init_payload: Optional[bytes]):
        parent, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(
            target=_worker_main,
            args=(child, child, init_payload),
            name="localsched-worker",
            daemon=True,
        )
        self.proc.start()
        child.close()
        self.pid = self.proc.pid
        self.conn = self.out = parent

    @property
    def handles(self) -> list:
        return [self.conn, self.proc.sentinel]

    def kill(self) -> None:
        self.proc.kill()

    def join(self, timeout=None):
        self.proc.join(timeout)
        return self.proc.exitcode


class ProcessPool(Executor):
    """A pool of worker processes with a per-task record stream.

    ``submit(fn, *args, emit=None, **kwargs)`` runs ``fn(*args, **kwargs)`` in a
    worker; if ``emit`` is given, the worker's function receives an ``emit``
    of its own, taking lists of records, and every list it emits arrives at
    ``emit`` here, in order,
    before the future completes.  Cancelling a running future kills its
    worker (a replacement starts).

    Parameters
    ----------
    num_workers : int
    context : {"spawn", "fork", "forkserver"}
        The multiprocessing start method (default "spawn": safe with threads).
    initializer, initargs
        Run once in each worker process when it starts.

    >>> with ProcessPool(1) as pool:
    ...     pool.submit(pow, 2, 10).result()
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
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        if context not in START_METHODS:
            raise ValueError(f"context must be one of {START_METHODS}, got {context!r}")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be callable")
        self.num_workers = num_workers
        self._method = context
        self._ctx = multiprocessing.get_context(context)
        self._init_payload = (
            dumps((initializer, tuple(initargs))) if initializer else None
        )
        # _lock guards _pending, _closed and each worker's .job.
        self._lock = threading.Lock()
        self._pending: deque = deque()
        self._closed = False
        # The initializer's exception, once a worker reported one.
        self._broken: Optional[BaseException] = None
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._workers: list[_Worker] = [self._start_worker() for _ in range(num_workers)]
        self._listener = threading.Thread(
            target=self._listen, name="localsched-process-pool", daemon=True
        )
        self._listener.start()

    def _start_worker(self) -> _Worker:
        if self._method == "spawn":
            return _SubprocessWorker(self._init_payload)
        return _MPWorker(self._ctx, self._init_payload)

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids."""
        return [w.pid for w in self._workers]

    def submit(self, fn, /, *args, emit=None, **kwargs) -> Future:
        future: Future = _PoolFuture(self)
        payload = dumps((fn, args, kwargs, emit is not None))
        job = future._job = _Job(future, payload, emit)
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to a ProcessPool after shutdown")
            if self._broken is not None:
                raise RuntimeError(f"the process pool's initializer failed: {self._broken!r}")
            self._pending.append(job)
        self._wake_w.send_bytes(b"")
        return future

    def _kill_job(self, job: _Job) -> bool:
        """Stop a job: drop it if pending, kill its worker if running."""
        with self._lock:
            if job in self._pending:
                self._pending.remove(job)
                return True
            worker = job.worker
            # Under the lock: the worker cannot have moved on to another job.
            if worker is not None and worker.job is job:
                worker.kill()
                return True
        return False

    def kill(self, futures: Iterable[Future]) -> None:
        """Abandon these futures' work now (used on KeyboardInterrupt)."""
        for fut in futures:
            job = getattr(fut, "_job", None)
            if job is not None:
                self._kill_job(job)

    def _assign(self) -> None:
        """Hand pending jobs to idle workers (listener thread only)."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                worker = next((w for w in self._workers if w.job is None), None)
                if worker is None:
                    return
                job = self._pending.popleft()
                if not job.future.set_running_or_notify_cancel():
                    continue  # cancelled while pending
                worker.job = job
                job.worker = worker
            try:
                worker.out.send_bytes(job.payload)
            except (OSError, ValueError):
                pass  # the worker died; its sentinel reports it

    def _listen(self) -> None:
        try:
            self._listen_loop()
        except BaseException as exc:  # noqa: B036 -- nothing may hang on a dead listener
            self._broken = RuntimeError(f"the process pool's listener thread failed: {exc!r}")
            self._break(self._broken)
            raise
        finally:
            # Whatever still runs or waits can never complete now.
            self._break(RuntimeError("the process pool was shut down"))

    def _break(self, exc: BaseException) -> None:
        """Fail every pending and running job with ``exc``."""
        with self._lock:
            jobs = list(self._pending) + [w.job for w in self._workers if w.job is not None]
            self._pending.clear()
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(exc)

    def _listen_loop(self) -> None:
        while True:
            owner = {}
            for w in self._workers:
                for h in w.handles:
                    owner[h] = w
            ready = wait_for([self._wake_r, *owner])
            dead = []
            for obj in ready:
                if obj is self._wake_r:
                    try:
                        self._wake_r.recv_bytes()
                    except EOFError:
                        return
                    if self._closed:
                        return
                    continue
                w = owner[obj]
                if obj is w.conn:
                    if not self._receive(w) and w not in dead:
                        dead.append(w)
                elif w not in dead:  # a process sentinel
                    dead.append(w)
            for w in dead:
                self._reap(w)
            if self._closed:
                return
            self._assign()

    def _receive(self, worker: _Worker) -> bool:
        """Handle one message from a worker; False if its pipe is closed."""
        try:
            msg = worker.conn.recv_bytes()
        except (EOFError, OSError):
            return False
        job = worker.job
        tag, body = msg[:1], msg[1:]
        try:
            return self._handle(worker, job, tag, body)
        except Exception as exc:  # e.g. a result that cannot be unpickled here
            err = RuntimeError(f"could not read a message from worker process {worker.pid}: "
                               f"{exc!r}")
            err.__cause__ = exc
            self._finish(worker, job, err)
            return True

    def _handle(self, worker: _Worker, job, tag: bytes, body: bytes) -> bool:
        if tag == b"i":  # the initializer failed: every worker would fail alike
            exc = unpack_exception(pickle.loads(body))
            self._broken = exc
            self._break(RuntimeError(f"the process pool's initializer failed: {exc!r}"))
            return True
        if tag == b"x":
            exc = unpack_exception(pickle.loads(body))
            self._finish(worker, job, exc)
            return True
        if tag == b"v":  # the return value of a plain submit
            self._finish(worker, job, None, pickle.loads(body))
            return True
        if tag == b"r" and job is not None and job.emit is not None:
            job.emit(pickle.loads(body))
        if tag == b"e":
            self._finish(worker, job, None, None)
        return True

    def _finish(self, worker, job, exc, result=None) -> None:
        with self._lock:
            worker.job = None
        if job is None or job.future.done():
            return
        if exc is not None:
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)

    def _reap(self, worker: _Worker) -> None:
        """A worker process ended: fail its job, start a replacement."""
        # Records it sent before dying still count.
        while True:
            try:
                if not worker.conn.poll():
                    break
            except (EOFError, OSError):
                break
            if not self._receive(worker):
                break
        code = worker.join(5)
        if code is None:  # closed its pipe but lives on: make sure it is gone
            worker.kill()
            code = worker.join()
        pid = worker.pid
        job = worker.job
        worker.close()
        if job is not None and not job.future.done():
            if self._broken is not None:
                err: BaseException = RuntimeError(
                    f"the process pool's initializer failed: {self._broken!r}")
            else:
                err = WorkerDiedError(
                    f"worker process {pid} died ({_describe_exit(code)})", pid, code)
            job.future.set_exception(err)
        if not self._closed and self._broken is None:
            fresh = self._start_worker()
            with self._lock:
                self._workers[self._workers.index(worker)] = fresh
        elif self._broken is not None:
            with self._lock:
                self._workers.remove(worker)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = list(self._pending)
            self._pending.clear()
        for job in pending:
            job.future.cancel()
        self._wake_w.send_bytes(b"")
        self._listener.join()
        for w in self._workers:
            try:
                w.out.send_bytes(b"")
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + (5.0 if wait else 0.0)
        for w in self._workers:
            if w.join(max(0.0, deadline - time.monotonic())) is None:
                w.kill()
                w.join()
            w.close()
        self._wake_r.close()
        self._wake_w.close()


class _PoolFuture(Future):
    """A Future whose cancel() also stops running work (by killing the worker)."""

    def __init__(self, pool: ProcessPool):
        super().__init__()
        self._pool = pool
        self._job = None

    def cancel(self) -> bool:
        if super().cancel():
            return True
        job = self._job
        return job is not None and self._pool._kill_job(job)


# -- default pools and get -------------------------------------------------------

# Shared pools by (num_workers, start method, initializer, initargs);
# _pools_lock guards _pools.
_pools: dict = {}
_pools_lock = threading.Lock()


def default_pool(num_workers: int, context: str = "spawn", initializer=None,
                 initargs: tuple = ()) -> ProcessPool:
    """The shared pool for these settings, created on first use."""
    # By value: a new lambda with the same code is the same initializer, and
    # unhashable initargs are fine.
    init_key = dumps((initializer, tuple(initargs))) if initializer is not None else None
    key = (num_workers, context, init_key)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is not None and pool._broken is not None:
            pool.shutdown(wait=False)  # e.g. its initializer failed: try afresh
            pool = None
        if pool is None:
            pool = _pools[key] = ProcessPool(
                num_workers, context=context, initializer=initializer, initargs=initargs
            )
        return pool


def shutdown() -> None:
    """Stop the shared process pools (they are re-created when needed)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown()


atexit.register(shutdown)


def get(
    dsk: Any,
    keys: Any,
    *,
    num_workers: Optional[int] = None,
    pool: Optional[Executor] = None,
    callbacks: Optional[Iterable] = None,
    rerun_exceptions_locally: Optional[bool] = None,
    chunksize: Optional[int] = None,
    context: Optional[str] = None,
    initializer: Optional[Callable] = None,
    initargs: tuple = (),
    cache: Optional[dict] = None,
    func_dumps: Optional[Callable] = None,
    func_loads: Optional[Callable] = None,
    **options,
):
    """Compute ``keys`` of ``dsk`` on worker processes.

    Parameters
    ----------
    num_workers : int, optional
        Worker processes (default: dask's ``num_workers`` config, else the
        pool's size with ``pool=``, else the number of CPUs).
    pool : Executor, optional
        A ``ProcessPool`` or any ``concurrent.futures`` process executor to
        run on instead of the shared pool (default: dask's ``pool`` config).
    context : {"spawn", "fork", "forkserver"}, optional
        Start method of the shared pool's workers (default: dask's
        ``multiprocessing.context`` config, else "spawn").
    initializer, initargs
        Run in each worker process when it starts (default: dask's
        ``multiprocessing.initializer`` config).
    chunksize : int, optional
        At most this many tasks per message to a worker (default: dask's
        ``chunksize`` config, else adaptive, about 2 ms of work per message).
    func_dumps, func_loads
        Accepted for dask compatibility (dask's config keys too); localsched
        always ships tasks with pickle, falling back to cloudpickle.
    callbacks, rerun_exceptions_locally, cache
        See ``localsched.core.get_async``.
    **options
        Keywords other dask schedulers take (``optimize_graph=``, ...), as
        ``dask.compute`` forwards them: accepted and ignored.  Anything else
        raises TypeError.

    A task's exception is re-raised here as the same type, with the worker's
    traceback text attached as its ``__cause__``.

    >>> get({'x': (sum, [1, 2])}, 'x', num_workers=1)
    3
    """
    if options:
        check_options(options, "localsched.multiprocessing.get")
    if pool is None:
        pool = dask_config("pool")
    if pool is not None:
        if context is not None or initializer is not None:
            raise TypeError("context= and initializer= configure the shared pool; "
                            "they cannot be combined with pool=")
        if not isinstance(pool, Executor):
            raise TypeError(f"pool= must be a concurrent.futures.Executor, got "
                            f"{type(pool).__name__}")
    if num_workers is None:
        num_workers = dask_config("num_workers")
    if num_workers is None:
        num_workers = pool_size(pool) if pool is not None else (os.cpu_count() or 1)
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
    if rerun_exceptions_locally is None:
        rerun_exceptions_locally = bool(dask_config("rerun_exceptions_locally", False))
    if chunksize is None:
        chunksize = dask_config("chunksize")
    if pool is None:
        context = context or dask_config("multiprocessing.context", "spawn")
        if initializer is None:
            initializer = dask_config("multiprocessing.initializer")
        pool = default_pool(num_workers, context, initializer, initargs)
    ours = isinstance(pool, ProcessPool)
    return get_async(
        pool.submit,
        num_workers,
        dsk,
        keys,
        callbacks=callbacks,
        rerun_exceptions_locally=rerun_exceptions_locally,
        chunksize=chunksize,
        cache=cache,
        pack_data=True,
        stream=ours,
        unpack_exception=unpack_exception,
        on_interrupt=pool.kill if ours else None,
    )
