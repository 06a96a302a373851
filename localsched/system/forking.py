"""What a forked child starts with: fresh locks, none of its parent's threads.

``os.fork()`` copies one thread, the one that forks, and every lock as it
was at that instant.  A lock another thread of the parent held then is held
forever in the child, by a thread that does not exist there: the child's
first get, registration or sample that takes it hangs.  The same copy hands
the child objects whose threads are gone (a sampler, a pool's listener, a
dashboard's server) and descriptors that are not its own (a dashboard's
listening socket: a child holding it keeps the port busy after the parent
closed it).

So each room of localsched that owns a module-level lock, pool, thread or
socket resets it in the child, from a handler registered here:

``at_fork_in_child(fn)``
    module-level state: ``fn`` runs in every forked child, first thing
    (rebinds the module's locks, forgets its pools and threads);
``renew_in_child(obj)``
    an object with locks or threads of its own (a ResourceProfiler, a
    progress bar, a dashboard): ``obj._after_fork_in_child()`` runs in
    every child forked while ``obj`` is alive.

The parent is never touched, and neither is anything of the child's
parent but the child's own copies.  Where ``os.register_at_fork`` does not
exist (Windows), nothing forks.  Children started by ``fork`` include the
process pool's "fork" workers, multiprocessing's fork children and a
user's own ``os.fork()``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable

__all__ = ["at_fork_in_child", "renew_in_child"]

_objects: weakref.WeakSet = weakref.WeakSet()


def at_fork_in_child(fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn()`` in every child this process forks from now on (usable
    as a decorator)."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=fn)
    return fn


def renew_in_child(obj: object) -> None:
    """Call ``obj._after_fork_in_child()`` in each child forked while ``obj``
    lives (held weakly)."""
    _objects.add(obj)


@at_fork_in_child
def _renew_objects() -> None:
    for obj in list(_objects):
        try:
            obj._after_fork_in_child()
        except Exception:  # noqa: BLE001, S110 -- a child must start whatever one object does
            pass
