"""The synchronous scheduler: every task runs in the caller's thread.

Useful for debugging (pdb and print work as usual) and for graphs of tiny
tasks where any hand-off to another thread costs more than the task.

>>> from operator import add
>>> get_sync({'a': 1, 'b': (add, 'a', 10)}, 'b')
11
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from .core import get_async

__all__ = ["get_sync", "get"]


def get_sync(
    dsk: Any,
    keys: Any,
    *,
    callbacks: Optional[Iterable] = None,
    rerun_exceptions_locally: bool = False,
    num_workers: Optional[int] = None,
):
    """Compute ``keys`` of ``dsk`` in this thread, in the scheduler's priority order.

    A failing task raises its own exception, with its own frames in the
    traceback.  ``rerun_exceptions_locally`` and ``num_workers`` are accepted
    for compatibility with the other schedulers and change nothing here.

    >>> get_sync({'x': (sum, [1, 2, 3])}, ['x', ['x']])
    (6, (6,))
    """
    return get_async(None, 1, dsk, keys, callbacks=callbacks)


get = get_sync
