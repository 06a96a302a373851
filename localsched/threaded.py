"""The threaded scheduler (the default): tasks run on a pool of threads.

Good for tasks that release the GIL (NumPy, pandas, I/O).  Pools are created
on first use and reused by later calls; ``shutdown()`` stops them.

>>> from operator import mul
>>> get({'a': 3, 'b': (mul, 'a', 'a')}, 'b')
9
"""

from __future__ import annotations

import os
import threading
import sys
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Iterable, Optional

from .core import get_async, in_task

if TYPE_CHECKING:
    from multiprocessing.pool import ThreadPool

__all__ = ["get", "shutdown", "default_pool"]

# Default pools by worker count, for computations started outside a task.
# _pools_lock guards _pools.
_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _reset_after_fork() -> None:
    """A forked child has none of its parent's threads: forget their pools."""
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def default_pool(num_workers: int) -> ThreadPoolExecutor:
    """The shared pool with ``num_workers`` threads, created on first use."""
    with _pools_lock:
        pool = _pools.get(num_workers)
        if pool is None:
            pool = _pools[num_workers] = ThreadPoolExecutor(
                num_workers, thread_name_prefix="localsched-worker"
            )
        return pool


def shutdown(wait: bool = True) -> None:
    """Stop the shared thread pools (they are re-created when needed).

    >>> _ = get({'x': 1}, 'x'); shutdown()
    """
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=wait)


def _submit_to_thread_pool(pool: "ThreadPool"):
    """An Executor-style submit for a ``multiprocessing.pool.ThreadPool``."""

    def submit(fn, *args, **kwargs) -> Future:
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        pool.apply_async(fn, args, kwargs, callback=fut.set_result,
                         error_callback=fut.set_exception)
        return fut

    return submit


def get(
    dsk: Any,
    keys: Any,
    *,
    num_workers: Optional[int] = None,
    pool: "Optional[Executor | ThreadPool]" = None,
    callbacks: Optional[Iterable] = None,
    rerun_exceptions_locally: bool = False,
    chunksize: Optional[int] = None,
):
    """Compute ``keys`` of ``dsk`` on a thread pool.

    Parameters
    ----------
    num_workers : int, optional
        Threads to use; defaults to the number of CPUs (or, with ``pool=``,
        the number of tasks run at once on that pool).
    pool : concurrent.futures.Executor or multiprocessing.pool.ThreadPool
        Run on this pool instead of the shared one.
    callbacks, rerun_exceptions_locally, chunksize
        See ``localsched.core.get_async``.

    A get called from inside a task runs on a fresh pool of its own (so it
    cannot deadlock waiting for the busy outer pool) that is stopped when it
    returns.  Tasks see the caller's contextvars.

    >>> get({'a': 1, 'b': (lambda x: x + 1, 'a')}, ['a', 'b'], num_workers=2)
    (1, 2)
    """
    if num_workers is None:
        num_workers = os.cpu_count() or 1
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
    temporary = None
    if pool is None:
        if in_task():
            pool = temporary = ThreadPoolExecutor(
                num_workers, thread_name_prefix="localsched-nested"
            )
        else:
            pool = default_pool(num_workers)
    if _is_thread_pool(pool):
        submit = _submit_to_thread_pool(pool)
    elif isinstance(pool, Executor):
        submit = pool.submit
    else:
        raise TypeError(
            f"pool= must be a concurrent.futures.Executor or a multiprocessing.pool."
            f"ThreadPool, got {type(pool).__name__}"
        )
    try:
        return get_async(
            submit,
            num_workers,
            dsk,
            keys,
            callbacks=callbacks,
            rerun_exceptions_locally=rerun_exceptions_locally,
            chunksize=chunksize,
            # A process-based Executor cannot take our in-process record stream.
            stream=not _is_process_executor(pool),
            pack_data=_is_process_executor(pool),
        )
    finally:
        if temporary is not None:
            temporary.shutdown(wait=True)


def _is_thread_pool(pool) -> bool:
    # Only a program that imported multiprocessing.pool can pass a ThreadPool,
    # so there is no need to import it (slowly) ourselves.
    mod = sys.modules.get("multiprocessing.pool")
    return mod is not None and isinstance(pool, mod.ThreadPool)


def _is_process_executor(pool) -> bool:
    from concurrent.futures import ProcessPoolExecutor

    return isinstance(pool, ProcessPoolExecutor)
