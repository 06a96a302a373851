"""The process scheduler: tasks run in a pool of worker processes.

For pure-Python tasks that hold the GIL.  Functions and data travel with
cloudpickle, so lambdas and closures work.  Pools are created on first use
(per worker count, start method and initializer), at most ``KEEP_POOLS``
kept for reuse, by a ``SharedPools`` of one platform (``get`` uses one on
this machine's, detected once; ``shutdown()`` stops its pools).  The pool
itself lives in ``localsched._pool`` (its design note is in
``localsched/_pool/__init__.py``); this module only picks the pool and hands
it to the scheduling loop, with the shared-memory transport of the pool's
platform.  Each worker runs BLAS and OpenMP on its share of the cores (one
thread per call with a worker per core), unless the user's environment
says otherwise (``localsched.system.blas``).

On localsched's own pool, results and inputs holding large buffers (NumPy
arrays, pandas columns, anything pickle protocol 5 hands out of band) travel
through shared memory: a worker writes them once into a segment (a file
in ``/dev/shm`` on Linux, a POSIX object on macOS and the BSDs, a named
mapping on Windows), the scheduler keeps a handle, and the next worker
maps them (``localsched/_shm/``).  Small objects keep the pipe.  The
scheduler's outputs map their segments without keeping a file descriptor,
and a reaper process removes the segments if this process is killed.
Where shared memory does not work (a ``/dev/shm`` that is missing,
read-only or full, a failed self-test: ``localsched.system.platform``)
everything takes the pipes, with one warning.

A worker that dies (``os._exit``, a segfault, the OOM killer) fails its
batch at once with WorkerDiedError naming the task it was running; the pool
starts a replacement and the next computation works.  Workers die with
their parent process.

>>> from operator import add
>>> get({'a': 1, 'b': (add, 'a', 1)}, 'b', num_workers=1)
2
>>> shutdown()
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any

from ._pool import (
    START_METHODS,
    BrokenProcessPool,
    ProcessPool,
    RemoteError,
    RemoteTraceback,
    WorkerDiedError,
    dumps,
    submitter_for,
    unpack_exception,
)
from ._pool.workers import max_workers
from ._shm import transport as shm
from .run.core import get_async
from .system import blas as _blas
from .system import platform as _platform
from .system.forking import renew_in_child
from .system.options import check_options, dask_config, resolve_pool_options

__all__ = ["get", "ProcessPool", "WorkerDiedError", "BrokenProcessPool", "RemoteTraceback",
           "RemoteError", "dumps", "default_pool", "shutdown", "START_METHODS", "SharedPools"]


class SharedPools:
    """The shared process pools of one platform (``_platform.Platform``,
    default: this machine's, detected once), each made on first use by
    ``get`` and kept for the next, by (num_workers, start method,
    initializer, initargs).  The module's ``get``, ``default_pool`` and
    ``shutdown`` use one of these; the tests make others for simulated
    platforms (``SharedPools(MACOS).get(...)``).

    At most ``KEEP_POOLS`` are kept, the most recently used last: a script
    sweeping ``num_workers``, or making an initializer per call, must not
    pile up idle workers (dask's own ``multiprocessing.get`` keeps no pool
    at all; keeping the last two spares the start-up of a pool that is used
    again, alternating included).  A pool in use is never retired.  A
    forked child (a "fork" worker, or a user's ``os.fork``) does not own
    its parent's pools: it forgets them, so a get there starts pools of its
    own instead of waiting on a listener thread that does not exist there.
    """

    def __init__(self, platform: _platform.Platform | None = None):
        self.platform = platform or _platform.Platform.detect()
        # _lock guards _pools and _in_use (how many ``get`` calls run on
        # each key's pool now).
        self._pools: dict = {}
        self._in_use: dict = {}
        self._lock = threading.Lock()
        renew_in_child(self)
        # (stopped at exit, or when these pools are dropped)
        weakref.finalize(self, _terminate_all, self._pools)

    def _after_fork_in_child(self) -> None:
        self._pools.clear()  # (the parent's; its finalizer holds this dict)
        self._in_use.clear()
        self._lock = threading.Lock()

    def pool(self, num_workers: int, context: str = "spawn", initializer=None,
             initargs: tuple = ()) -> ProcessPool:
        """The shared pool for these settings, created on first use (and
        created afresh if the last one broke, e.g. its initializer failed);
        the least recently used of the others not in use stop once more
        than ``KEEP_POOLS`` are kept."""
        return self._take(_pool_key(num_workers, context, initializer, initargs),
                          num_workers, context, initializer, initargs)

    def _take(self, key: tuple, num_workers: int, context: str, initializer,
              initargs: tuple, use: int = 0) -> ProcessPool:
        retired = []
        with self._lock:
            pools, in_use = self._pools, self._in_use
            pool = pools.pop(key, None)
            if pool is not None and pool.broken is not None:
                pool.shutdown(wait=False)
                pool = None
            if pool is None:
                pool = ProcessPool(num_workers, context=context, initializer=initializer,
                                   initargs=initargs, platform=self.platform,
                                   worker_env=_blas.worker_environment(num_workers,
                                                                       os.cpu_count()))
            pools[key] = pool  # (the most recently used, last)
            in_use[key] = in_use.get(key, 0) + use
            for old in list(pools):
                if len(pools) <= KEEP_POOLS:
                    break
                if old != key and not in_use.get(old):
                    retired.append(pools.pop(old))
                    in_use.pop(old, None)
        for old_pool in retired:
            old_pool.shutdown(wait=False)  # (idle: its workers stop as told)
        return pool

    def _done_with(self, key: tuple) -> None:
        with self._lock:
            n = self._in_use.get(key, 0) - 1
            if n > 0:
                self._in_use[key] = n
            else:
                self._in_use.pop(key, None)

    def shutdown(self) -> None:
        """Stop these pools now (they are re-created when needed): see the
        module's ``shutdown``."""
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.terminate()

    def get(self, dsk: Any, keys: Any, **kwargs):
        """``get`` on these pools."""
        return get(dsk, keys, shared=self, **kwargs)


#: Shared pools kept at most, per ``SharedPools``.
KEEP_POOLS = 2


def _terminate_all(pools: dict) -> None:
    for pool in list(pools.values()):
        pool.terminate()  # (a forked child's copy: nothing, see ProcessPool)
    pools.clear()


def _pool_key(num_workers: int, context: str, initializer, initargs: tuple) -> tuple:
    # By value: a new lambda with the same code is the same initializer, and
    # unhashable initargs are fine.
    init_key = dumps((initializer, tuple(initargs))) if initializer is not None else None
    return (num_workers, context, init_key)


#: This process's shared pools, on the detected platform.
_shared = SharedPools()


def default_pool(num_workers: int, context: str = "spawn", initializer=None,
                 initargs: tuple = ()) -> ProcessPool:
    """The shared pool for these settings (``SharedPools.pool``)."""
    return _shared.pool(num_workers, context, initializer, initargs)


def shutdown() -> None:
    """Stop the shared process pools now (they are re-created when needed).

    Idle workers exit cleanly (their exit-time code runs), and so does a
    worker whose job has only its last message left to send; a worker
    still starting is killed, not waited for (nothing has run in it yet;
    with an ``initializer`` it finishes starting).  Work still
    running after ``ProcessPool.terminate``'s short grace belongs to
    computations that have ended (after an error or Ctrl-C): it is killed,
    not waited for.
    """
    _shared.shutdown()


atexit.register(shutdown)


def get(
    dsk: Any,
    keys: Any,
    *,
    num_workers: int | None = None,
    pool: Executor | None = None,
    callbacks: Iterable | None = None,
    rerun_exceptions_locally: bool | None = None,
    chunksize: int | None = None,
    context: str | None = None,
    initializer: Callable | None = None,
    initargs: tuple = (),
    cache: dict | None = None,
    func_dumps: Callable | None = None,
    func_loads: Callable | None = None,
    memory_limit: Any = None,
    shared: SharedPools | None = None,
    **options,
):
    """Compute ``keys`` of ``dsk`` on worker processes.

    Parameters
    ----------
    num_workers : int, optional
        Worker processes (default: dask's ``num_workers`` config, else the
        pool's size with ``pool=``, else the number of CPUs).
    pool : Executor or multiprocessing.Pool, optional
        A ``ProcessPool``, any ``concurrent.futures`` executor or a
        ``multiprocessing.Pool`` to run on instead of the shared pool
        (default: dask's ``pool`` config).
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
    callbacks, rerun_exceptions_locally, cache, memory_limit
        See ``localsched.run.core.get_async``.
    shared : SharedPools, optional
        Where the shared pool comes from (default: this module's, on this
        machine's platform).
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
        runner = submitter_for(pool)  # TypeError for what is not a pool
    num_workers, rerun_exceptions_locally, chunksize = resolve_pool_options(
        num_workers, pool, rerun_exceptions_locally, chunksize)
    if pool is None:
        context = context or dask_config("multiprocessing.context", "spawn")
        if initializer is None:
            initializer = dask_config("multiprocessing.initializer")
        # Where one wait watches a limited number of workers (Windows), the
        # shared pools stop there: 62 workers on a 64-core machine.
        shared = shared or _shared
        limit = max_workers(shared.platform)
        if limit is not None:
            num_workers = min(num_workers, limit)
        key = _pool_key(num_workers, context, initializer, initargs)
        taken = shared._take(key, num_workers, context, initializer, initargs, use=1)
        try:
            return _get(submitter_for(taken), num_workers, dsk, keys, callbacks,
                        rerun_exceptions_locally, chunksize, cache, taken, memory_limit)
        finally:
            shared._done_with(key)
    return _get(runner, num_workers, dsk, keys, callbacks, rerun_exceptions_locally, chunksize,
                cache, pool, memory_limit)


def _get(runner, num_workers, dsk, keys, callbacks, rerun_exceptions_locally, chunksize, cache,
         pool, memory_limit):
    return get_async(
        runner.submit,
        num_workers,
        dsk,
        keys,
        callbacks=callbacks,
        rerun_exceptions_locally=rerun_exceptions_locally,
        chunksize=chunksize,
        cache=cache,
        pack_data=True,
        stream=runner.stream,
        unpack_exception=unpack_exception,
        on_interrupt=runner.on_interrupt,
        # localsched's own pool sends large results through shared memory,
        # of the pool's platform.
        transport=shm.Transport(pool.platform) if isinstance(pool, ProcessPool) else None,
        memory_limit=memory_limit,
    )
