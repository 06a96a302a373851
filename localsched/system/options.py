"""Scheduler options as dask users pass them: keywords, dask's config, and
the keywords ``dask.compute`` forwards to whichever scheduler runs.

Three rules, in order:

1. A keyword given to a get function wins.
2. Else, when dask is imported, dask's config supplies it (``num_workers``,
   ``pool``, ``chunksize``, ``rerun_exceptions_locally``,
   ``multiprocessing.context``, ``multiprocessing.initializer``,
   ``func_dumps``/``func_loads``), exactly the keys dask's own schedulers read.
   dask is never imported here: a program that has not imported it cannot
   have set its config.
3. ``dask.compute(x, scheduler=get, **kwargs)`` forwards every extra
   keyword to whichever scheduler runs, so a keyword meant for another
   scheduler (``optimize_graph=`` for threads, ``workers=`` of
   distributed's get, anything a future scheduler takes) is accepted and
   ignored, as dask's own schedulers do; dask's tests pass even
   ``bogus_keyword=10`` this way.  But a keyword that is a near miss of an
   option we know is a typo, and raises TypeError naming it and the option
   meant:

>>> check_options({"num_worker": 2}, "localsched.threaded.get")  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
TypeError: ...get() got an unexpected option 'num_worker' (did you mean 'num_workers'?)
>>> check_options({"optimize_graph": False, "bogus_keyword": 10}, "localsched.threaded.get")
"""

from __future__ import annotations

import difflib
import os
import sys
from typing import Any

__all__ = ["check_options", "dask_config", "pool_size", "resolve_pool_options",
           "FORWARDED_OPTIONS"]

# Options our get functions take themselves.
OWN_OPTIONS = frozenset({
    "num_workers", "pool", "chunksize", "callbacks", "rerun_exceptions_locally",
    "cache", "context", "initializer", "initargs", "func_dumps", "func_loads",
    "memory_limit",
})

# Keywords known to some dask scheduler, that a dask user (or dask.compute
# on the user's behalf) may pass to any scheduler.  Accepted, not used:
# dask's local get_async and get functions, and dask.distributed's
# Client.get / Client.compute keywords.
FORWARDED_OPTIONS = frozenset({
    # dask.base.compute / persist / dask.local.get_async / dask.multiprocessing.get
    "optimize_graph", "traverse", "get_id", "pack_exception", "raise_exception",
    "dumps", "loads",
    # dask's first callback keywords, still accepted (and ignored) by its
    # get_async, and passed by its own tests
    "start_callback", "end_callback",
    # dask.distributed.Client.get / compute
    "workers", "allow_other_workers", "resources", "sync", "asynchronous",
    "direct", "retries", "priority", "fifo_timeout", "actors", "restrictions",
    "loose_restrictions",
})

_KNOWN = sorted(OWN_OPTIONS | FORWARDED_OPTIONS)


def check_options(options: dict, where: str) -> None:
    """Raise TypeError for a near miss of a known option (a typo); accept
    and ignore any other keyword, as dask's schedulers do (see above)."""
    for name in options:
        if name in FORWARDED_OPTIONS or name in OWN_OPTIONS:
            continue
        close = difflib.get_close_matches(name, _KNOWN, n=1, cutoff=0.8)
        if close:
            raise TypeError(f"{where}() got an unexpected option {name!r} "
                            f"(did you mean {close[0]!r}?)")


_MISSING = object()


def dask_config(name: str, default: Any = None) -> Any:
    """dask's config value ``name`` if dask is imported and it is set, else ``default``.

    >>> dask_config("num_workers", 3)   # unset (or dask not imported): the default
    3
    """
    config = sys.modules.get("dask.config")
    if config is None:
        return default
    value = config.get(name, _MISSING)
    return default if value is _MISSING or value is None else value


def pool_size(pool: Any) -> int:
    """How many tasks ``pool`` runs at once.

    A user's pool sets the worker count: running fewer tasks than the pool
    allows can deadlock tasks that wait for each other (20 tasks meeting at a
    ``threading.Barrier(20)`` on a 20-thread pool).  Each pool type keeps its
    size in its own attribute; dask reads ``_max_workers`` the same way.

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(5) as p:
    ...     pool_size(p)
    5
    """
    for attr in (
        "num_workers",  # localsched's ProcessPool and ThreadPool
        "_max_workers",  # concurrent.futures executors
        "_processes",  # multiprocessing.pool.Pool and ThreadPool
    ):
        n = getattr(pool, attr, None)
        if isinstance(n, int) and n > 0:
            return n
    raise TypeError(f"cannot tell how many workers the pool {pool!r} has; pass num_workers=")


def resolve_pool_options(num_workers, pool, rerun_exceptions_locally, chunksize):
    """``(num_workers, rerun_exceptions_locally, chunksize)`` for a pool
    scheduler: the keyword if given, else dask's config, else the default
    (the pool's size, else the CPU count; False; adaptive batching).
    ``pool`` is the pool already chosen (keyword or config), or None.

    >>> resolve_pool_options(None, None, None, None)[1:]
    (False, None)
    """
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
    return num_workers, rerun_exceptions_locally, chunksize
