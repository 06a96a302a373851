"""What a memory budget asks of a pool's worker process: the memory its
tasks freed, handed back as each job ends.

A worker keeps the memory its tasks free while it is busy and hands it back
only once idle (``localsched._pool.worker``, ``_keep_freed_memory``): fast
when memory is plenty, but under a budget that memory is resident, and the
budget counts every worker's resident memory (``localsched.run.budget``).
Workers that are never idle -- an armed budget keeps them busy with one
job after another -- would hold on to it for the whole run: a budget would
see memory it can neither spill nor free, and the machine would hold it.
So once a budget arms, the pool loop sends batches through
``run_batch_trimmed``, which asks the worker loop to trim
(``malloc_trim``) as soon as the job's reply is sent: after the job's
inputs and results are gone, off the caller's path.
"""

from __future__ import annotations

from .runtime import _job, run_batch

__all__ = ["run_batch_trimmed"]


def run_batch_trimmed(*args, **kwargs):
    """``runtime.run_batch``, then the worker's freed memory back (in a
    pool's worker process; elsewhere just ``run_batch``)."""
    job = _job()
    if job is not None:
        job.trim_after = True  # (read and reset by the worker loop after the reply)
    return run_batch(*args, **kwargs)
