"""The threaded scheduler (the default): tasks run on a pool of threads.

Good for tasks that release the GIL (NumPy, pandas, I/O).  Pools are created
on first use and reused by later calls; ``shutdown()`` stops them.

Which pool a call uses, as in dask:

- ``pool=`` given: that pool, and (unless ``num_workers=`` says otherwise)
  as many tasks at once as it has workers;
- else the shared pool of this thread and worker count.  The main thread
  shares one set of pools; every other thread gets its own (a thread a task
  started may call get while the task waits for it: sharing the busy pool
  would deadlock), dropped when the thread ends;
- a get called from inside a task runs on a fresh pool of its own, stopped
  when it returns (after Ctrl-C, without waiting for its running tasks).

The shared pools run tasks on daemon threads that the interpreter does not
wait for at exit: after Ctrl-C the program can exit at once, even while
abandoned tasks still run, and the next computation gets a fresh pool
instead of queueing behind them.

>>> from operator import mul
>>> get({'a': 3, 'b': (mul, 'a', 'a')}, 'b')
9
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any

from .run.core import get_async, in_task
from .system.forking import at_fork_in_child
from .system.options import check_options, dask_config, resolve_pool_options

if TYPE_CHECKING:
    from multiprocessing.pool import ThreadPool as MPThreadPool

__all__ = ["get", "shutdown", "default_pool", "ThreadPool"]


class ThreadPool(Executor):
    """A minimal Executor on daemon threads, started as work arrives.

    Unlike ``ThreadPoolExecutor``, the interpreter does not join its threads
    at exit, so abandoned work (after Ctrl-C) never holds a program open.

    >>> with ThreadPool(2) as pool:
    ...     pool.submit(sum, [1, 2]).result()
    3
    """

    def __init__(self, num_workers: int, name: str = "localsched-worker"):
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        self.num_workers = num_workers
        self._name = name
        self._work: SimpleQueue = SimpleQueue()
        self._threads: list = []
        # Released by a thread each time it finishes a work item: a token
        # means some thread is (about to be) waiting for work.
        self._idle = threading.Semaphore(0)
        # Guards _threads and _closed.
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to a ThreadPool after shutdown")
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self.num_workers:
                t = threading.Thread(target=self._worker, daemon=True,
                                     name=f"{self._name}-{len(self._threads)}")
                # Listed before it starts: a Ctrl-C landing inside start()
                # must not leave a thread that shutdown() knows nothing of.
                self._threads.append(t)
                t.start()
        return future

    def _worker(self) -> None:
        work = self._work
        while True:
            item = work.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            del item
            if not future.set_running_or_notify_cancel():
                self._idle.release()
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: B036 -- handed to the future
                future.set_exception(exc)
                del exc
            else:
                future.set_result(result)
                del result
            del future, fn, args, kwargs
            self._idle.release()  # free for more work (as CPython's pool counts)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._work.get(block=False)
                except Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:  # each thread ends when it reaches one of these
            self._work.put(None)
        if wait:
            for t in threads:
                if t.ident is not None:  # (never started if start() was interrupted)
                    t.join()


# Shared pools by (thread, worker count); thread is None for the main thread.
# _pools_lock guards _pools.
_pools: dict = {}
_pools_lock = threading.Lock()


@at_fork_in_child
def _reset_after_fork() -> None:
    """A forked child has none of its parent's threads: forget their pools."""
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


def default_pool(num_workers: int) -> ThreadPool:
    """The calling thread's shared pool with ``num_workers`` threads, created
    on first use (see the module docstring)."""
    me = threading.current_thread()
    owner = None if me is threading.main_thread() else me
    with _pools_lock:
        # Pools of threads that have ended are never used again.
        for key in [k for k in _pools if k[0] is not None and not k[0].is_alive()]:
            _pools.pop(key).shutdown(wait=False)
        pool = _pools.get((owner, num_workers))
        if pool is None:
            pool = _pools[(owner, num_workers)] = ThreadPool(num_workers)
        return pool


def _retire(pool: ThreadPool) -> None:
    """Stop sharing a pool whose threads still run abandoned tasks: later
    calls get a fresh one; its threads end when their tasks do."""
    with _pools_lock:
        for key, p in list(_pools.items()):
            if p is pool:
                del _pools[key]
    pool.shutdown(wait=False, cancel_futures=True)


def shutdown(wait: bool = True) -> None:
    """Stop the shared thread pools (they are re-created when needed).

    >>> _ = get({'x': 1}, 'x'); shutdown()
    """
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=wait)


def _submit_to_mp_thread_pool(pool: MPThreadPool):
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
    num_workers: int | None = None,
    pool: Any = None,  # an Executor or a multiprocessing.pool.ThreadPool
    callbacks: Iterable | None = None,
    rerun_exceptions_locally: bool | None = None,
    chunksize: int | None = None,
    cache: dict | None = None,
    memory_limit: Any = None,
    **options,
):
    """Compute ``keys`` of ``dsk`` on a thread pool.

    Parameters
    ----------
    num_workers : int, optional
        Tasks run at once; defaults to dask's ``num_workers`` config, else
        the pool's size with ``pool=``, else the number of CPUs.
    pool : concurrent.futures.Executor or multiprocessing.pool.ThreadPool
        Run on this pool instead of the shared one (default: dask's ``pool``
        config).  A process Executor (``ProcessPoolExecutor``, localsched's
        ``ProcessPool``) runs the graph as ``localsched.multiprocessing.get``
        does on it: each batch is sent its inputs.
    callbacks, rerun_exceptions_locally, chunksize, cache, memory_limit
        See ``localsched.run.core.get_async``; unset, dask's config supplies
        ``rerun_exceptions_locally``, ``chunksize`` and ``localsched.memory-limit``.
    **options
        Keywords other dask schedulers take (``optimize_graph=``, ...), as
        ``dask.compute`` forwards them: accepted and ignored.  Anything else
        raises TypeError.

    Tasks see the caller's contextvars.

    >>> get({'a': 1, 'b': (lambda x: x + 1, 'a')}, ['a', 'b'], num_workers=2)
    (1, 2)
    """
    if options:
        check_options(options, "localsched.threaded.get")
    if pool is None:
        pool = dask_config("pool")
    if pool is not None and not (_is_mp_thread_pool(pool) or isinstance(pool, Executor)):
        raise TypeError(
            f"pool= must be a concurrent.futures.Executor or a multiprocessing.pool."
            f"ThreadPool, got {type(pool).__name__}"
        )
    num_workers, rerun_exceptions_locally, chunksize = resolve_pool_options(
        num_workers, pool, rerun_exceptions_locally, chunksize)
    if _is_process_executor(pool):
        # Workers in other processes share no memory with the caller (and
        # cannot take its contextvars): the process scheduler's way, which
        # ships each batch its inputs, on any process Executor.
        from .multiprocessing import get as get_processes

        return get_processes(dsk, keys, num_workers=num_workers, pool=pool,
                             callbacks=callbacks, chunksize=chunksize, cache=cache,
                             rerun_exceptions_locally=rerun_exceptions_locally,
                             memory_limit=memory_limit)
    temporary = None
    shared = False
    if pool is None:
        if in_task():
            pool = temporary = ThreadPool(num_workers, name="localsched-nested")
        else:
            pool = default_pool(num_workers)
            shared = True
    submit = _submit_for(pool)

    def on_interrupt(futures: list) -> None:
        # Ctrl-C: abandon the running tasks (threads cannot be killed) and
        # drop what has not started.
        for f in futures:
            f.cancel()
        if shared:
            _retire(pool)

    interrupted = False
    try:
        return get_async(
            submit,
            num_workers,
            dsk,
            keys,
            callbacks=callbacks,
            rerun_exceptions_locally=rerun_exceptions_locally,
            chunksize=chunksize,
            cache=cache,
            on_interrupt=on_interrupt,
            memory_limit=memory_limit,
        )
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if temporary is not None:
            # (After Ctrl-C, not waiting for the tasks still running: they
            # cannot be stopped, and end on their daemon threads, as the
            # shared pools' do.)
            temporary.shutdown(wait=not interrupted, cancel_futures=interrupted)


def _submit_for(pool) -> Callable:
    """``submit(fn, *args, **kwargs) -> Future`` on a thread pool of either kind."""
    if _is_mp_thread_pool(pool):
        return _submit_to_mp_thread_pool(pool)
    if isinstance(pool, Executor):
        return pool.submit
    raise TypeError(
        f"pool= must be a concurrent.futures.Executor or a multiprocessing.pool."
        f"ThreadPool, got {type(pool).__name__}"
    )


def _is_mp_thread_pool(pool) -> bool:
    # Only a program that imported multiprocessing.pool can pass a ThreadPool,
    # so there is no need to import it (slowly) ourselves.
    mod = sys.modules.get("multiprocessing.pool")
    return mod is not None and isinstance(pool, mod.ThreadPool)


def _is_process_executor(pool) -> bool:
    """A concurrent.futures ProcessPoolExecutor or localsched's ProcessPool."""
    from concurrent.futures import ProcessPoolExecutor

    if isinstance(pool, ProcessPoolExecutor):
        return True
    ours = sys.modules.get("localsched._pool.pool")  # (loaded by whoever made one)
    # (getattr: another thread may be importing it right now, half set up)
    pool_type = getattr(ours, "ProcessPool", None)
    return pool_type is not None and isinstance(pool, pool_type)
