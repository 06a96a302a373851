"""A job as the pool tracks it, its future, and how it can fail.

A ``_Job`` is one ``submit``: its RUN frame until sent, where its records
go, and the shared-memory segments it uses (its name prefix, its inputs'
segment, the free segments it was lent).  ``_JobFuture`` lets
``ProcessPool.kill`` find a future's job.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures.process import BrokenProcessPool as _CPythonBrokenProcessPool
from typing import Any

from .._shm import store as segments
from .._shm.handles import SharedValue
from ..utils import name_tasks
from .taskslot import NO_TASK

#: ``_JobFuture.task_at_work`` of a job that waits for a worker.
QUEUED = -2

__all__ = ["WorkerDiedError", "BrokenProcessPool"]


class WorkerDiedError(RuntimeError):
    """A worker process died (or was killed) while running a job.

    >>> str(WorkerDiedError("worker process 7 died (exit code 3)", 7, 3).for_task(["x"]))
    "worker process 7 died (exit code 3) while running task 'x'"
    """

    def __init__(self, message: str, pid: int = 0, exitcode: int | None = None,
                 task_index: int | None = None):
        super().__init__(message)
        self.pid = pid
        self.exitcode = exitcode
        #: The index of the task the job's batch runner had started last
        #: (its worker's task slot, see ``taskslot``), or None: unknown.
        self.task_index = task_index

    def for_task(self, keys: list) -> WorkerDiedError:
        """The same error, naming the task the worker was running (or the
        tasks it may have been running, when it cannot be told)."""
        return WorkerDiedError(f"{self.args[0]} while running {name_tasks(keys)}",
                               self.pid, self.exitcode, self.task_index)


class BrokenProcessPool(_CPythonBrokenProcessPool):
    """The pool cannot run work any more: its workers could not start (they
    exited at start-up, or the initializer failed).  Pending work fails with
    it and new submits raise it.  A RuntimeError, and CPython's
    ``concurrent.futures.process.BrokenProcessPool``, so code written for
    ProcessPoolExecutor catches it.

    >>> issubclass(BrokenProcessPool, RuntimeError)
    True
    """


def _settle(future: Future, value: Any = None, exc: BaseException | None = None) -> None:
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
                 "lent", "last_task")

    def __init__(self, job_id: int, future: Future, frame: bytes, emit: Callable | None,
                 shm_prefix: str | None = None, inputs: SharedValue | None = None,
                 store: segments.SegmentStore | None = None, lent: list | None = None):
        self.id = job_id
        self.future = future
        self.frame: bytes | None = frame
        self.emit = emit
        # the workers.Worker running it, None while pending (typed Any:
        # workers imports this module, and no import goes back up)
        self.worker: Any = None
        self.shm_prefix = shm_prefix
        self.inputs = inputs
        self.store = store
        self.lent = lent
        # What ``_JobFuture.task_at_work`` says once no worker runs it:
        # QUEUED until it starts, then (set as its worker lets it go) the
        # task its batch started last, or None (its worker could not say).
        self.last_task: int | None = QUEUED

    def ended(self, worker_died: bool = False, used=None) -> None:
        """The job will say no more: its inputs' segment goes (the worker
        mapped it when the job started), the free segments it was lent and
        did not use (``used``, from its DONE) return to the free list; if
        its worker died, so do the segments it made but never reported."""
        if self.inputs is not None:
            self.inputs.release()
            self.inputs = None
        if self.lent and self.store is not None:
            lent, self.lent = self.lent, None
            self.store.give_back(lent, used or (), lost=used is None)
        if worker_died and self.shm_prefix is not None and self.store is not None:
            self.store.sweep(self.shm_prefix)


class _JobFuture(Future):
    """A Future that knows its job, so that ``ProcessPool.kill`` can find it."""

    def __init__(self, pool: Any):
        super().__init__()
        self._pool = pool
        self._job: _Job | None = None

    def task_index(self) -> int | None:
        """While a worker runs this job: the index of the task its batch
        started last (the worker's task slot, see ``taskslot``), else None."""
        job = self._job
        worker = job.worker if job is not None else None
        if job is None or worker is None:
            return None
        try:
            return worker.slot.task_of(job.id)
        except (ValueError, AttributeError):  # (the worker ended meanwhile: slot closed)
            return None

    def task_at_work(self) -> int | None:
        """For a live view (``RunState.at_work``, read from another thread,
        only when one asks): the index of the task this job's batch runs
        now (the task its batch started last: those before it have ended);
        ``NO_TASK`` (-1) on a worker that has not started a task of it yet;
        ``QUEUED`` (-2) while it waits for a worker; None if it cannot be
        told (a worker without a task slot).  Once the job has ended, the
        task it started last (its worker's slot, read as the job ended)."""
        job = self._job
        if job is None:
            return None
        worker = job.worker
        if worker is None:
            return job.last_task
        slot = worker.slot
        try:
            i = slot.task_of(job.id)
        except (ValueError, AttributeError):  # (the worker ended meanwhile: slot closed)
            return None
        if i is not None:
            return i
        if job.worker is not worker:  # (it ended meanwhile: what its worker said last)
            return job.last_task
        return NO_TASK if slot.view is not None else None

    def cancel(self) -> bool:
        """Cancel the job if it has not started; its inputs' segment goes
        at once (not when the pool reaches the job in its queue)."""
        if not super().cancel():
            return False
        if self._job is not None:
            self._job.ended()
        return True
