"""The worker process: start up, then run one job at a time until told to stop.

A worker's life, as the pool sees it through the messages of ``protocol``::

    start ─► tie its life to the parent's ─► initializer ─► READY
         └─► INIT_FAILED (initializer raised), exit
    loop:  RUN ─► function runs ─► RECORDS … ─► DONE | RESULT | FAILED
           STOP or end of the job pipe ─► exit

(A ``NOTE`` goes before the records it explains: a warning the caller
gives, e.g. a value that took the pipe because shared memory was full.)

A worker dies with its parent: on Linux the kernel kills it when the
thread that started it ends (``PR_SET_PDEATHSIG``); everywhere, a watchdog
thread exits the process when its *lifeline* pipe, whose write end only the
parent holds and never writes to, reaches end-of-file (the OS closes it
when the parent dies, however it dies; on Windows the lifeline is a
multiprocessing pipe connection, read as one).  A busy worker
never reads its job pipe, so that pipe alone cannot tell it.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable

from .._shm import store as _shm_store
from .._shm.oob import loads_job
from .._shm.worker_side import WorkerSide
from ..system import blas as _blas
from ..system import platform as _platform
from ..system import settings
from . import job as _job
from . import taskslot
from .protocol import Kind, decode, dump_records, dumps, encode, pack_exception

__all__ = ["main", "BOOT", "run_packed"]


# The spawn start method runs this in a fresh interpreter.  Unlike
# multiprocessing's spawn it never re-imports the user's __main__ module:
# everything a worker needs arrives pickled by value, so scripts need no
# ``if __name__ == "__main__"`` guard.  argv: the job pipe's, the reply
# pipe's and the lifeline's file descriptors, the parent's pid, and the
# task slot's descriptor (-1: none; see ``taskslot``).
BOOT = """\
import sys, pickle
from multiprocessing.connection import Connection
jobs = Connection(int(sys.argv[1]), writable=False)
out = Connection(int(sys.argv[2]), readable=False)
try:
    path, authkey, platform = pickle.loads(jobs.recv_bytes())
    init = jobs.recv_bytes()
except EOFError:  # the pool went before this worker started: nothing to say
    raise SystemExit(1)
sys.path[:] = path
import multiprocessing
multiprocessing.current_process().authkey = authkey
from localsched._pool.worker import main
main(jobs, out, int(sys.argv[3]), int(sys.argv[4]), init or None, (), int(sys.argv[5]),
     pickle.loads(platform))
"""

# Memory between a worker's jobs (glibc only; see ``_keep_freed_memory``).
# mallopt parameters, from <malloc.h>:
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
# Blocks below this come from the heap, where freed memory is reused without
# new page faults (glibc accepts at most 32 MiB on 64-bit systems) ...
KEEP_MMAP_THRESHOLD = 32 << 20
# ... the heap keeps up to this much freed at its top instead of handing it
# back to the system after each free (enough for a task's few chunks; more
# would let workers whose peaks come at different times add them up), and
# grows in steps of this much more than asked.
KEEP_TRIM_THRESHOLD = 256 << 20
KEEP_TOP_PAD = 64 << 20
# An idle worker (no job for this long) hands its free memory back.
IDLE_TRIM_AFTER = 0.05


class _ParentGone(BaseException):
    """The parent closed its end of the pipe: the worker has no one to work
    for.  A BaseException, so a task's ``except Exception`` cannot swallow it."""


def _die_with_parent(lifeline, parent_pid: int | None, platform: _platform.Platform) -> bool:
    """Arrange to end when the parent does; False if it has already gone.

    ``parent_pid`` is the pool's process, the worker's parent (None when a
    helper such as multiprocessing's fork server started it instead).
    """
    _platform.die_with_parent(platform)  # (Linux; elsewhere the watchdog below)
    # The parent may have died before prctl took effect; the worker was then
    # adopted by another process already, and no signal will come.
    if parent_pid is not None and os.getppid() != parent_pid:
        return False

    def watch() -> None:
        try:
            if isinstance(lifeline, int):
                while os.read(lifeline, 4096):
                    pass  # the parent never writes; only end-of-file matters
            else:  # a connection (on Windows its fileno is a handle, not a descriptor)
                while True:
                    lifeline.recv_bytes()
        except (OSError, EOFError):
            pass
        os._exit(1)

    threading.Thread(target=watch, name="localsched-lifeline", daemon=True).start()
    return True


def main(jobs, out, lifeline, parent_pid: int | None, init_payload: bytes | None,
         close_first: tuple = (), task_slot=None, platform=None, env=None) -> None:
    """Entry point of a worker process: run jobs until told to stop.

    Reads ``RUN`` messages from ``jobs`` and writes replies to ``out`` (one
    duplex connection for the fork and forkserver start methods).
    ``lifeline``: a file descriptor or connection whose end-of-file means the
    parent is gone.  ``close_first``: the parent's ends of the pipes, which a
    forked worker inherits and must drop, or the pipes would never close.
    ``task_slot``: where this worker says which job and task it runs
    (``taskslot.attach`` takes it; None: nowhere).  ``platform``: its
    pool's (``_platform.Platform``; None: the detected one), which this
    worker's side of shared memory and its tie to the parent follow.
    ``env``: variables to set before anything of the caller's runs (the
    pool's ``worker_env``: BLAS threads, ``localsched.system.blas``); a
    spawned worker has them from its start.
    """
    platform = platform or _platform.Platform.detect()
    # Ctrl-C in a terminal reaches the whole process group (a forked worker
    # is in its parent's): the parent decides what to do, workers carry on
    # until told.  First thing, so that a Ctrl-C during start-up cannot make
    # the worker look like one that fails to start.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for c in close_first:
        c.close()
    _blas.apply_in_worker(env or {})
    if not _die_with_parent(lifeline, parent_pid, platform):
        return
    from ..callbacks import forget_registered

    _job.worker_pid = os.getpid()
    _shm_store.notes_to = _job.notes  # (shared memory's warnings: to the caller)
    slot = taskslot.attach(task_slot)
    side = WorkerSide(platform)  # (its segments: the pool's platform's kind)
    forget_registered()  # a forked worker must not fire the parent's callbacks
    send = out.send_bytes
    trim = _keep_freed_memory()
    if init_payload is not None:
        try:
            init, initargs = pickle.loads(init_payload)
            init(*initargs)
        except BaseException as exc:  # noqa: B036 -- reported; the pool breaks
            _send_quietly(send, encode(Kind.INIT_FAILED, 0, pack_exception(exc)))
            return
    if not _send_quietly(send, encode(Kind.READY)):
        return
    dirty = False  # ran a job since the last trim
    while True:
        try:
            # (at once when the job asked: a memory budget counts it)
            if dirty and trim is not None and (_job.trim_after or not jobs.poll(IDLE_TRIM_AFTER)):
                trim()
                dirty = _job.trim_after = False
            frame = jobs.recv_bytes()
        except (EOFError, OSError):
            return  # the pool is gone
        kind, job_id, body = decode(frame)
        del frame
        if kind is Kind.LET_GO or kind is Kind.STOP:  # (its last job was read to its end)
            side.let_go_of_last_job()
            if kind is Kind.STOP:
                return
            continue
        try:
            reply = _run_job(job_id, body, send, slot, side)
        except _ParentGone:
            return
        if not _send_quietly(send, reply):
            return
        dirty = trim is not None


def _keep_freed_memory() -> Callable[[], None] | None:
    """Let this worker reuse the memory its tasks free while it is busy;
    return the function that hands it back (None where that is not glibc's
    malloc, or ``LOCALSCHED_WORKER_MALLOC=0``).

    glibc's defaults suit a process that frees little: a block of 8 MB (a
    NumPy chunk) is freed straight back to the system, so the next task's
    array is page-faulted in anew, about 1 ms per 8 MB, as much as computing
    it.  A threaded run reuses such memory within one process; a worker does
    now too (bench_shm: 0.25 against 0.21 s).  The freed memory is at most
    what the job held at its peak, and the main loop trims it (``malloc_trim``)
    once the worker has had no job for ``IDLE_TRIM_AFTER`` seconds, so an
    idle pool holds no more than before.
    """
    if not settings.flag("LOCALSCHED_WORKER_MALLOC"):
        return None
    glibc = _platform.glibc_malloc()
    if glibc is None:
        return None
    mallopt, malloc_trim = glibc
    # mallopt returns 0 for a value it refuses; then the default stays.
    mallopt(M_MMAP_THRESHOLD, KEEP_MMAP_THRESHOLD)
    mallopt(M_TRIM_THRESHOLD, KEEP_TRIM_THRESHOLD)
    mallopt(M_TOP_PAD, KEEP_TOP_PAD)
    return lambda: malloc_trim(0)


def _run_job(job_id: int, body, send: Callable[[bytes], None], slot,
             side: WorkerSide) -> bytes:
    """Run one job; its last message, to send.

    A streaming job's function gets an ``emit`` that sends each list of
    records at once, tagged with the job's id; large results travel in
    shared-memory segments named after the job's prefix when the pool gave
    one (``shm``: the prefix and where the owner's lock is), of the kind
    of this worker's ``side`` (its pool's platform's).
    The task slot (``slot``) names the job, and a streaming job's batch
    runner finds it in ``job.task_slot`` to name each task it starts.
    """
    writer = None
    if slot is not None:
        slot[taskslot.JOB] = job_id
        slot[taskslot.TASK] = taskslot.NO_TASK

    def emit(records: list) -> None:
        t = time.perf_counter()
        body = dump_records(records, writer)
        _job.dump_seconds = time.perf_counter() - t  # (read by fine metrics)
        if _job.notes:  # (a value took the pipe: the caller warns before it has it)
            _send_notes(job_id, send)
        frame = encode(Kind.RECORDS, job_id, body)
        try:
            send(frame)
        except OSError as exc:
            raise _ParentGone from exc

    # The pool sends a job only once it has read this worker's last one to
    # its end: its owner holds every segment written for it by now.
    side.let_go_of_last_job()
    try:
        received = time.time()
        modules = len(sys.modules)
        fn, args, kwargs, streams, shm, lent = loads_job(body, side.kind)
        del body
        # (read by fine metrics; modules imported while decoding: start-up)
        _job.arrival = (received, time.time(), len(sys.modules) > modules)
        # (an owner already gone gets its values through the pipe: its
        # reaper may have run, and would never remove what this job wrote)
        if shm is not None and side.hold_owner_lock(*shm):
            writer = side.writer(shm[0], lent)
        if streams:
            _job.task_slot = slot
            try:
                fn(*args, emit=emit, **kwargs)
            finally:
                _job.task_slot = None
                _send_notes(job_id, send)
            # (which lent segments it rewrote: the others go back to the free list)
            return encode(Kind.DONE, job_id, dumps(writer.used) if writer and writer.used else b"")
        result = fn(*args, **kwargs)
    except _ParentGone:
        raise
    except BaseException as exc:  # noqa: B036 -- the task's own, even EOFError: sent back
        return encode(Kind.FAILED, job_id, pack_exception(exc))
    try:
        return encode(Kind.RESULT, job_id, dumps(result))
    except Exception as exc:
        return encode(Kind.FAILED, job_id, pack_exception(exc))


def _send_notes(job_id: int, send: Callable[[bytes], None]) -> None:
    """The warnings of this job the caller should give (``job.notes``)."""
    while _job.notes:
        _send_quietly(send, encode(Kind.NOTE, job_id, _job.notes.pop(0).encode()))


def _send_quietly(send: Callable[[bytes], None], frame: bytes) -> bool:
    """Send to the parent; False if it has gone away (then the worker exits)."""
    try:
        send(frame)
        return True
    except OSError:
        return False


def run_packed(payload: bytes) -> bytes:
    """Run a batch call pickled by ``dumps`` in a foreign pool's worker.

    For pools that pickle with the standard pickler and carry only a final
    result (``multiprocessing.Pool``, ``ProcessPoolExecutor``): the call
    travels as cloudpickled bytes, so lambdas work; the records it returns
    travel back packed, each task's exception with its traceback text.
    """
    import multiprocessing

    if multiprocessing.parent_process() is not None:  # (not a thread pool of the caller's)
        _job.worker_pid = os.getpid()
    fn, args, kwargs = pickle.loads(payload)
    return dump_records(fn(*args, **kwargs))
