"""The worker side: running a batch of tasks, measuring them, sampling them.

Everything here runs where tasks run: in a pool's thread, in a worker
process, or (``run_batch`` aside) in the caller's thread for the sync
scheduler.  It imports nothing of the scheduler's loops or of the
diagnostics; ``localsched.diagnostics.collectors.sampler`` imports it (never the
reverse).

- ``run_batch``: runs a batch in order and hands records over in lists
  (``emit``), at most every ``FLUSH_INTERVAL`` or ``FLUSH_RESULTS``
  results (numbers aside), and with ``announce`` each batch's start and, before each next
  task, what finished (every ``ANNOUNCE_INTERVAL``).
- Measuring (only while a callback needs ``measure``): the thread's CPU
  clock once per hand-off, sent as one note for the tasks since the
  previous reading (the records split it by wall time when read), the
  task's ``localsched.metrics`` entries,
  and in a worker process each hand-off's own cost (``MeasuredEmit``).
- Sampling (only while a callback needs ``sample``): each thread publishes
  the task it runs in ``running_tasks``; a sampler thread reads it with
  ``take_samples``.  A worker process runs its own (``worker_sampler()``)
  and its samples travel back as records.

In a worker process, the pool's ``localsched._pool.job`` says which
process this is and when its job arrived, and holds the worker's task
slot, where the batch runner writes the index of each task it starts (a
plain memory store: the pool reads it if the worker dies, and a live
view when it asks, since the records it has are up to a hand-off
behind); it is read through
``sys.modules`` (loaded there by the worker), so importing the runtime
never imports the pool.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable

from .. import callbacks as _callbacks
from .. import metrics as _metrics
from ..plan.graph import execute
from ..system.forking import at_fork_in_child
from .records_wire import (
    NO_MARKS,
    REC_INDEX,
    REC_OK,
    REC_VALUE,
    announcement,
    cpu_note,
    handoff_note,
    samples_note,
)
from .records_wire import probe as make_probe

__all__ = ["run_batch", "run_batch_collect", "running_tasks", "take_samples",
           "sample_every", "worker_sampler", "trim_traceback", "trim_stack"]

# A worker hands finished records over at least this often (seconds): many
# short tasks share one hand-off, and the scheduler still learns within about
# a millisecond when a task ends (a long task's record goes out at once).
FLUSH_INTERVAL = 1e-3
# ... and as soon as this many records carrying results wait, so that the
# results in flight between worker and scheduler stay few (memory).  Numbers
# do not count: they put no memory at stake (``metrics.NUMBERS``).
FLUSH_RESULTS = 8
# When someone listens for task starts, finished records go out before the
# next task starts if this long has passed since the last hand-off: a
# pretask fires at most this late, and microsecond tasks do not pay one
# hand-off each (dask's ProgressBar listens for starts).
ANNOUNCE_INTERVAL = 1e-4

thread_time = time.thread_time


# thread ident -> key of the task it runs, while a sampler listens (read by
# the sampler thread: plain dict operations are atomic).
running_tasks: dict = {}

_JOB_MODULE = "localsched._pool.job"

# Non-empty once this worker process has run a batch: its first batch's
# wait for inputs includes the process's start-up (fine metrics).
_warm: list = []


def _job():
    """The pool's per-job globals in a worker process, else None."""
    job = sys.modules.get(_JOB_MODULE)
    # (getattr: another thread may be importing it right now, half set up)
    return job if getattr(job, "worker_pid", 0) else None


def _task_slot(job) -> list:
    """Where this batch writes the index of each task it starts (at
    ``[1]``, ``localsched._pool.taskslot.TASK``): the worker's task slot,
    taken so that no batch nested in a task writes it too, or a list
    nobody reads."""
    slot = getattr(job, "task_slot", None)
    if slot is None:
        return [0, 0]
    job.task_slot = None
    return slot


def run_batch(batch: list, data: dict, cancelled=None, announce: bool = False, *,
              emit: Callable, where: list | None = None, measure: bool = False,
              sample: float = 0.0, sizes: bool = False, slot: list | None = None):
    """Run a batch of tasks in order, on a worker; emit lists of records.

    ``batch`` holds ``BatchItem`` tuples ``(i, key, spec, store, drop,
    send)`` (see ``localsched.run.batching``); dependency results are read from
    ``data`` (the shared cache, an overlay of it, or the inputs shipped to a
    process).  A record is a plain tuple laid out as
    ``records_wire.Record``: ``(i, ok, value, start, end, worker_id,
    probe)``; the batch stops at the first failure.  With ``announce``, a
    first record (``records_wire.announcement``) says at once that the
    batch has started.  ``where`` (a list
    shared with the scheduler, threads only) receives ``(worker_id,
    start)`` once, so a batch stopped before it reports can be placed.

    ``measure``: each list opens with a ``CPU_NOTE``, the thread CPU time
    of the tasks after it, and a task's ``probe`` (``records_wire.Probe``)
    holds what only it has (what it metered; the first task the batch's
    start); in a worker process each hand-off's cost is reported in the
    next one as a ``HANDOFF_NOTE``.  ``sample``: the thread's running task
    is published in ``running_tasks``; in a worker process the worker's
    sampler runs and its samples travel back as a ``SAMPLES_NOTE``.
    ``sizes``: each record's probe holds the result's size
    (``localsched.metrics.sizeof``: its contents included).  ``slot`` (threads): a list whose
    ``[1]`` the batch sets to the index of each task it starts, as a worker
    process's task slot (the scheduler reads it: a record may be a
    hand-off behind).

    ``emit(records)`` is where each list goes: on threads the loop's event
    queue (``PoolLoop.events.put``); in a worker process the job's own
    (``_pool.worker._run_job``'s ``emit``: a ``RECORDS`` message to the
    pool, whose listener hands it to ``PoolLoop.emit``); for a pool that
    only returns results, a list's ``extend`` (``run_batch_collect``).
    """
    if measure or sample or sizes:
        return _run_batch_measured(batch, data, cancelled, announce, emit, where, measure,
                                   sample, sizes, slot)
    # Inside tasks, Callback.active is a registry of their own (empty).
    token = _callbacks.enter_computation()
    job = _job()
    if job is not None and not _warm:
        _warm.append(True)  # this process has run a batch (no start-up next time)
    wid = job.worker_pid if job is not None else threading.get_ident()
    slot = _task_slot(job) if slot is None else slot
    now = time.time
    buf: list = []
    carried = 0
    numbers = _metrics.NUMBERS
    try:
        last = now()
        if where is not None:  # (threads) who runs the batch, from when
            where.append((wid, last))
        if announce:
            emit([announcement(batch[0][0], last, wid)])
        for i, key, spec, store, drop, send in batch:
            if cancelled:
                break
            if announce and buf and now() - last >= ANNOUNCE_INTERVAL:
                emit(buf)
                buf = []
                carried = 0
                last = now()
            slot[1] = i
            t0 = now()
            try:
                value = execute(spec, data)
            except BaseException as exc:  # noqa: B036 -- reported, not swallowed
                buf.append((i, False, exc, t0, now(), wid, None))
                break
            t1 = now()
            if store:
                data[key] = value
            for k in drop:
                del data[k]
            if send:
                buf.append((i, True, value, t0, t1, wid, None))
                if type(value) not in numbers:
                    carried += 1
            else:
                buf.append((i, True, None, t0, t1, wid, None))
            value = None
            if t1 - last >= FLUSH_INTERVAL or carried >= FLUSH_RESULTS:
                emit(buf)
                buf = []
                carried = 0
                last = t1
    finally:
        _callbacks._local_active.reset(token)
        if buf:
            emit(buf)


def _run_batch_measured(batch, data, cancelled, announce, emit, where, measure, sample,
                        sizes=False, slot=None):
    """``run_batch`` while a callback measures or samples (the rare path).

    Measuring, the thread's CPU clock (a system call) is read once per
    hand-off, not per task, and nothing is built per task for it: each
    hand-off's list opens with one ``CPU_NOTE`` record, the CPU seconds of
    the tasks after it in the list (their count and wall seconds too),
    which the records split among them by wall time when read
    (``localsched.run.task_records``).  A hand-off follows every task of
    ``FLUSH_INTERVAL`` or more, so a long task's CPU is its own but for
    what the few tasks just before it spent.  A task's own probe holds what
    only it has: metered blocks, the batch's start marks, its result's size."""
    token = _callbacks.enter_computation()
    job = _job()
    tid = threading.get_ident()
    wid = job.worker_pid if job is not None else tid
    task_slot = _task_slot(job) if slot is None else slot
    now = time.time
    running = running_tasks
    outer_task = running.get(tid) if sample else None
    local = _metrics._local
    outer_sink = getattr(local, "sink", None)
    # One list for the batch's user metrics, emptied after each task.
    sink = local.sink = [] if measure else outer_sink
    size_of = _metrics.sizeof
    arrival, fresh, emit = _enter_worker(job, wid, emit, sample)
    stretch = _Stretch(wid) if measure else None
    slot = 1 if measure else 0  # buf[0]: the CPU note of the tasks after it (measuring)
    buf: list = [None] * slot
    count = carried = 0  # tasks since the CPU clock's last reading; results carried
    busy = 0.0  # those tasks' wall seconds
    marks = None
    try:
        last = now()
        if measure:  # the batch's start, for the worker's timeline (its first task's probe)
            marks = (arrival, last, bool(fresh))
        if where is not None:
            where.append((wid, last))
        if announce:
            emit([announcement(batch[0][0], last, wid)])
        for i, key, spec, store, drop, send in batch:
            if cancelled:
                break
            if announce and len(buf) > slot and now() - last >= ANNOUNCE_INTERVAL:
                emit(stretch.seal(buf, count, busy) if stretch else buf)
                buf = [None] * slot
                count, carried, busy = 0, 0, 0.0
                last = now()
            if sample:
                running[tid] = key
            task_slot[1] = i
            t0 = now()
            try:
                value = execute(spec, data)
            except BaseException as exc:  # noqa: B036 -- reported, not swallowed
                buf.append((i, False, exc, t0, now(), wid, None))
                break
            t1 = now()
            if sample:
                running[tid] = None  # between tasks: the worker's own work
            probe = None
            # (the result's size, measured here: only the number travels)
            size = size_of(value) if sizes else None
            if measure:
                count += 1
                busy += t1 - t0
                if sink or marks is not None:  # (CPU None: the note's share)
                    probe = make_probe(None, sink[:] or None, marks or NO_MARKS, size)
                    sink.clear()
                    marks = None
            if sizes and probe is None:
                probe = make_probe(None, None, NO_MARKS, size)
            buf.append((i, True, value if send else None, t0, t1, wid, probe))
            if store:
                data[key] = value
            for k in drop:
                del data[k]
            if send and type(value) not in _metrics.NUMBERS:
                carried += 1
            value = None
            if t1 - last >= FLUSH_INTERVAL or carried >= FLUSH_RESULTS:
                emit(stretch.seal(buf, count, busy) if stretch else buf)
                buf = [None] * slot
                count, carried, busy = 0, 0, 0.0
                last = t1
    finally:
        _callbacks._local_active.reset(token)
        local.sink = outer_sink
        if sample:
            if outer_task is None:
                running.pop(tid, None)
            else:  # a computation nested in a task (sync): its task again
                running[tid] = outer_task
        if stretch is not None:
            buf = stretch.seal(buf, count, busy)
        if buf:
            emit(buf)
        if job is not None:
            emit.close()


def _enter_worker(job, wid, emit: Callable, sample: float) -> tuple:
    """A measured or sampled batch's start in a worker process (``job``;
    None elsewhere): ``(when its job arrived, whether this is the process's
    first batch, the emit to use)``; the worker's sampler is enabled and
    each hand-off's own cost reported (``MeasuredEmit``)."""
    if job is None:
        return None, None, emit
    sampler = None
    if sample:
        sampler = worker_sampler()
        sampler.enable(sample)
    arrival, job.arrival = job.arrival, None
    fresh = not _warm  # the first batch this process runs: it was starting up
    if fresh:
        _warm.append(True)
    return arrival, fresh, MeasuredEmit(emit, wid, sampler, job)


class _Stretch:
    """The tasks a measuring worker ran since it last read its thread's CPU
    clock: ``seal`` reads it and puts their ``CPU_NOTE`` in the list's
    first slot (or drops the slot when no task ran)."""

    __slots__ = ("wid", "cpu_before")

    def __init__(self, wid) -> None:
        self.wid = wid
        self.cpu_before = thread_time()

    def seal(self, buf: list, count: int, busy: float) -> list:
        if not count:
            del buf[0]
            return buf
        c = thread_time()
        spent = c - self.cpu_before if c > self.cpu_before else 0.0
        self.cpu_before = c
        buf[0] = cpu_note(spent, count, busy, self.wid)
        return buf


class MeasuredEmit:
    """``emit`` in a worker process while measuring: times each hand-off
    and reports it (and the worker's stack samples) at the head of the next
    one, or in a last list of its own when the batch ends."""

    __slots__ = ("emit", "wid", "sampler", "pending", "job")

    def __init__(self, emit: Callable, wid: int, sampler, job):
        self.emit = emit
        self.wid = wid
        self.sampler = sampler
        self.job = job
        self.pending: list = []

    def __call__(self, records: list) -> None:
        if self.pending:
            records = self.pending + records
        job = self.job
        job.dump_seconds = 0.0
        start = time.time()
        self.emit(records)
        stop = time.time()
        # (indices of the tasks whose results went, hand-off start, pickling
        # seconds, hand-off end)
        sent = tuple(r[REC_INDEX] for r in records if r[REC_OK] and r[REC_VALUE] is not None)
        self.pending = [handoff_note(sent, start, job.dump_seconds, stop, self.wid)]
        self._add_samples()

    def _add_samples(self) -> None:
        if self.sampler is not None:
            samples = self.sampler.drain()
            if samples:
                self.pending.append(samples_note(samples, self.wid))

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.disable()
            self._add_samples()
        pending, self.pending = self.pending, []
        if pending:
            self.emit(pending)


def run_batch_collect(items: list, data: dict) -> list:
    """run_batch for executors without a record stream: return the records."""
    out: list = []
    run_batch(items, data, emit=out.extend)
    return out


# -- tracebacks and stacks: the package's own frames are cut off ----------------

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The scheduler's own directories (not the diagnostics' nor shared memory's):
# frames there are the scheduler's.
_SCHEDULER_DIRS = frozenset([_PACKAGE_DIR] + [
    os.path.join(_PACKAGE_DIR, folder)
    for folder in ("_pool", "plan", "run", "worker", "system", "command")])


def trim_traceback(tb):
    """A worker-side traceback without its leading localsched frames (the
    batch runner and spec executor), so the user's frames come first."""
    prefix = _PACKAGE_DIR + os.sep
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(prefix):
        tb = tb.tb_next
    return tb


def _is_scheduler_file(filename: str, cache: dict = {}) -> bool:  # noqa: B006 -- a memo
    known = cache.get(filename)
    if known is None:
        known = cache[filename] = os.path.dirname(filename) in _SCHEDULER_DIRS
    return known


def trim_stack(stack: list) -> tuple:
    """Drop the frames above the task: everything up to the end of the first
    run of scheduler frames (thread start-up, the worker loop, the batch
    runner, the task executor, and a sync computation's caller)."""
    n = len(stack)
    p = 0
    while p < n and not _is_scheduler_file(stack[p][0]):
        p += 1
    if p == n:  # no scheduler frame: keep all
        return tuple(stack)
    while p < n and _is_scheduler_file(stack[p][0]):
        p += 1
    return tuple(stack[p:])


def take_samples(running: dict, append: Callable, codes: dict, now: Callable,
                 seconds: float | None = None) -> float | None:
    """Append ``(time, thread ident, key, stack, seconds)`` for every thread
    in ``running`` (thread ident -> the key of its task); ``seconds`` is the
    time each sample stands for (since the sampler's previous look).
    ``codes`` interns frames per code object, so equal frames are one tuple
    (and pickle once).  Returns the samples' time (None: nothing running)."""
    if not running:
        return None
    frames = sys._current_frames()
    t = now()
    for tid, key in list(running.items()):  # (a snapshot: other threads write it)
        f = frames.get(tid)
        if f is None:
            continue
        stack = []
        while f is not None:
            code = f.f_code
            frame = codes.get(code)
            if frame is None:
                frame = codes[code] = (code.co_filename, code.co_firstlineno, code.co_name)
            stack.append(frame)
            f = f.f_back
        stack.reverse()
        append((t, tid, key, trim_stack(stack), seconds))
    del frames
    return t


def sample_every(interval: float, stop, running: dict, append: Callable, codes: dict,
                 now: Callable, looks: Callable | None = None) -> None:
    """Take samples every ``interval`` until ``stop`` (an Event) is set,
    each weighted by the time since the previous look (a monotonic clock):
    a sampler that waited for the GIL gets its real period, not ``interval``.

    ``looks(time, gil_seconds)``, if given, hears of every look that found
    tasks running how long the sampler waited for the GIL before it (where
    the system says so: Linux): its lateness less the time this thread
    waited for a CPU (``/proc/thread-self/schedstat``), so a machine busy
    with other processes does not count, Python code holding the GIL does."""
    from ..system import platform as _platform

    clock = time.perf_counter
    reader = _platform.thread_cpu_wait_reader() if looks is not None else None
    waited = reader[0] if reader is not None else None
    last = clock()
    cpu_wait = waited() if waited is not None else 0.0
    try:
        while not stop.wait(interval):
            t = clock()
            w = waited() if waited is not None else 0.0
            stamped = take_samples(running, append, codes, now, t - last)
            if looks is not None and waited is not None and stamped is not None:
                looks(stamped, max(0.0, t - last - interval - (w - cpu_wait)))
            cpu_wait = w
            last = t
    finally:
        if reader is not None:
            reader[1]()


class WorkerSampler:
    """The sampler of a worker process: one daemon thread, started on first
    use and enabled per job (``enable``/``disable``); it samples the
    worker's running task into a deque that the job drains as it reports."""

    def __init__(self):
        self.interval = 0.01
        self._on = threading.Event()
        self._off = threading.Event()
        self._out: deque = deque()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        codes: dict = {}
        out = self._out

        def append(sample):
            # (time, key, stack, seconds): the pid is added on arrival
            out.append((sample[0], sample[2], sample[3], sample[4]))

        while True:
            self._on.wait()
            sample_every(self.interval, self._off, running_tasks, append, codes, time.time)

    def enable(self, interval: float) -> None:
        self.interval = interval
        self._off.clear()
        self._on.set()
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="localsched-sampler",
                                            daemon=True)
            self._thread.start()

    def disable(self) -> None:
        self._on.clear()
        self._off.set()

    def drain(self) -> list:
        out, popleft = [], self._out.popleft
        try:
            while True:
                out.append(popleft())
        except IndexError:
            return out


_worker_sampler: WorkerSampler | None = None


@at_fork_in_child
def _forget_sampler() -> None:
    # (its thread is the parent's: a forked worker starts one of its own)
    global _worker_sampler
    _worker_sampler = None


def worker_sampler() -> WorkerSampler:
    """The sampler of this worker process (created on first use)."""
    global _worker_sampler
    if _worker_sampler is None:
        _worker_sampler = WorkerSampler()
    return _worker_sampler
