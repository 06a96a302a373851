"""The synchronous scheduler: every task runs in the caller's thread.

Useful for debugging (pdb and print work as usual) and for graphs of tiny
tasks where any hand-off to another thread costs more than the task.

>>> from operator import add
>>> get_sync({'a': 1, 'b': (add, 'a', 10)}, 'b')
11
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .run.core import get_async
from .system.options import check_options

__all__ = ["get_sync", "get"]


def get_sync(
    dsk: Any,
    keys: Any,
    *,
    callbacks: Iterable | None = None,
    cache: dict | None = None,
    memory_limit: Any = None,
    **options,
):
    """Compute ``keys`` of ``dsk`` in this thread, in the scheduler's priority order.

    A failing task raises its own exception, with its own frames in the
    traceback.  ``cache``: results known already (see
    ``localsched.run.core.get_async``).  The other schedulers' options
    (``num_workers=``, ``rerun_exceptions_locally=``, ``optimize_graph=``,
    ...) are accepted and change nothing here; an option no dask scheduler
    knows raises TypeError.

    >>> get_sync({'x': (sum, [1, 2, 3])}, ['x', ['x']])
    (6, (6,))
    """
    if options:
        check_options(options, "localsched.local.get_sync")
    return get_async(None, 1, dsk, keys, callbacks=callbacks, cache=cache,
                     memory_limit=memory_limit)


get = get_sync
