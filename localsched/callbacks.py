"""The Callback protocol: five hooks that fire on every scheduler.

A computation fires, in the scheduler's own thread and never concurrently
with another callback:

``start(dsk)``
    once, before the graph is validated or ordered;
``start_state(dsk, state)``
    once, after the scheduler state is built;
``pretask(key, dsk, state)``
    when the task starts executing on its worker;
``posttask(key, result, dsk, state, worker_id)``
    when the task has finished executing (``state.timing`` holds the
    worker-measured ``(start, end)`` epoch seconds of that task, and
    ``state.freed`` the keys whose results its end released from the cache);
``finish(dsk, state, errored)``
    once, for every callback whose ``start`` ran -- on success, on error and
    on ``KeyboardInterrupt`` (``errored`` is True for the latter two).

Callbacks come from three places: those registered globally (``register()``,
or a ``with`` block), and those passed per call as ``callbacks=``.  A get
called from inside a running task only fires the callbacks passed to it
explicitly, never the outer computation's.

Subclass and override either the plain names or dask's underscored names
(``_start``, ``_pretask``, ...), or pass plain functions:

>>> from localsched.local import get_sync
>>> seen = []
>>> cb = Callback(pretask=lambda key, dsk, state: seen.append(key))
>>> with cb:
...     get_sync({'a': 1, 'b': (abs, -2), 'c': (max, 'a', 'b')}, 'c')
2
>>> seen
['b', 'c']

See Also
--------
localsched.diagnostics : ProgressBar, Profiler, ResourceProfiler, CacheProfiler
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, ClassVar, Iterable, Optional

__all__ = [
    "Callback",
    "add_callbacks",
    "active_callbacks",
    "unpack_callbacks",
    "normalize_callback",
]

HOOKS = ("start", "start_state", "pretask", "posttask", "finish")

# Guards Callback.active against concurrent register/unregister.
_registry_lock = threading.Lock()


class Callback:
    """Base class for scheduler callbacks.

    Parameters
    ----------
    start, start_state, pretask, posttask, finish : callable, optional
        Hook functions, with the signatures in the module docstring.  A hook
        given here wins over a method of the same name.

    Examples
    --------
    >>> class PrintKeys(Callback):
    ...     def _pretask(self, key, dsk, state):
    ...         print("starting", key)
    >>> from localsched.local import get_sync
    >>> with PrintKeys():
    ...     get_sync({'x': (len, [1, 2, 3])}, 'x')
    starting x
    3
    """

    #: The globally registered callbacks, as 5-tuples of hooks (or None).
    #: Public for compatibility with dask; prefer ``register()``.
    active: ClassVar[set] = set()

    def __init__(
        self,
        start: Optional[Callable] = None,
        start_state: Optional[Callable] = None,
        pretask: Optional[Callable] = None,
        posttask: Optional[Callable] = None,
        finish: Optional[Callable] = None,
    ):
        given = {
            "start": start,
            "start_state": start_state,
            "pretask": pretask,
            "posttask": posttask,
            "finish": finish,
        }
        for name, fn in given.items():
            if fn is not None and not callable(fn):
                raise TypeError(f"Callback {name}= must be callable, got {fn!r}")
            if fn is not None:
                setattr(self, "_" + name, fn)

    @property
    def _callback(self) -> tuple:
        """The 5-tuple of this object's hooks (None where not overridden)."""
        hooks = []
        for name in HOOKS:
            fn = _own_hook(self, name)
            hooks.append(fn)
        return tuple(hooks)

    def __enter__(self):
        self._cm = add_callbacks(self)
        self._cm.__enter__()
        return self

    def __exit__(self, *args):
        self._cm.__exit__(*args)
        del self._cm

    def register(self) -> None:
        """Fire this callback for every computation until ``unregister()``."""
        with _registry_lock:
            Callback.active.add(self._callback)

    def unregister(self) -> None:
        """Stop firing this callback globally."""
        with _registry_lock:
            Callback.active.discard(self._callback)


def _own_hook(obj: Callback, name: str) -> Optional[Callable]:
    """The hook ``name`` of ``obj``: an override of ``_name`` or of ``name``."""
    # Instance attribute set from the constructor.
    fn = obj.__dict__.get("_" + name)
    if fn is not None:
        return fn
    cls = type(obj)
    for attr in ("_" + name, name):
        impl = getattr(cls, attr, None)
        base = getattr(Callback, attr, None)
        if impl is not None and impl is not base and callable(impl):
            return getattr(obj, attr)
    return None


def normalize_callback(cb: Any) -> tuple:
    """A 5-tuple of hooks from a Callback or a raw tuple.

    >>> normalize_callback((None, None, print, None, None))[2] is print
    True
    """
    if isinstance(cb, Callback):
        return cb._callback
    if not isinstance(cb, tuple) and isinstance(getattr(cb, "_callback", None), tuple):
        return normalize_callback(cb._callback)  # a dask.callbacks.Callback
    if isinstance(cb, tuple):
        if len(cb) != 5:
            raise TypeError(
                f"a raw callback must be a 5-tuple (start, start_state, pretask, "
                f"posttask, finish), got a {len(cb)}-tuple"
            )
        for fn in cb:
            if fn is not None and not callable(fn):
                raise TypeError(f"callback hook {fn!r} is not callable")
        return cb
    raise TypeError(f"expected a Callback or a 5-tuple of hooks, got {cb!r}")


def active_callbacks() -> list:
    """The globally registered hooks: localsched's, and dask's when dask's
    callbacks module is loaded (so ``with dask.diagnostics.ProgressBar():``
    works around a localsched computation too)."""
    with _registry_lock:
        cbs = list(Callback.active)
    dask_callbacks = sys.modules.get("dask.callbacks")
    if dask_callbacks is not None:
        for cb in list(getattr(dask_callbacks.Callback, "active", ())):
            if cb not in cbs:
                cbs.append(cb)
    return cbs


def unpack_callbacks(cbs: Iterable[tuple]) -> tuple[list, list, list, list, list]:
    """Five lists of hook functions, one per hook, skipping missing ones."""
    out: tuple[list, list, list, list, list] = ([], [], [], [], [])
    for cb in cbs:
        for i, fn in enumerate(cb):
            if fn is not None:
                out[i].append(fn)
    return out


@contextmanager
def add_callbacks(*callbacks):
    """Register callbacks globally for the duration of a ``with`` block.

    >>> from localsched.local import get_sync
    >>> with add_callbacks(Callback(finish=lambda dsk, state, errored: print(errored))):
    ...     get_sync({'x': 1}, 'x')
    False
    1
    """
    tuples = [normalize_callback(cb) for cb in callbacks]
    with _registry_lock:
        new = [t for t in tuples if t not in Callback.active]
        Callback.active.update(new)
    try:
        yield
    finally:
        with _registry_lock:
            for t in new:
                Callback.active.discard(t)
