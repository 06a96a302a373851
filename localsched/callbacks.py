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
    when the task has finished executing (``state.task``, a
    ``localsched.view.TaskRecord``, holds the worker-measured ``start`` and
    ``end`` epoch seconds of that task and ``freed``, the keys whose results
    its end released from the cache);
``finish(dsk, state, errored)``
    once, for every callback whose ``start`` ran -- on success, on error,
    on ``KeyboardInterrupt`` and when the graph is refused (``errored`` is
    True but for success); ``state.outcome`` says which tasks failed or were
    still running.

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

What a callback needs.  Measuring costs, so a computation asks its
callbacks once what they need (:class:`Needs`: results, exact starts, fine
metrics, samples, sizes, or only the run's task records); a plain tuple
of hooks needs everything, as dask gives it.

See Also
--------
localsched.diagnostics : ProgressBar, Profiler, ResourceProfiler, CacheProfiler
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any, NamedTuple

from .system.forking import at_fork_in_child

__all__ = [
    "Callback",
    "Needs",
    "Hooks",
    "needs_of",
    "merge_needs",
    "add_callbacks",
    "active_callbacks",
    "forget_registered",
    "unpack_callbacks",
    "normalize_callback",
    "callback_list",
]

HOOKS = ("start", "start_state", "pretask", "posttask", "finish")

class Needs(NamedTuple):
    """What a callback needs from a computation.

    ``results``: posttask hooks get every task's result (False: they may
    get None); ``exact_start``: pretask fires when the task starts on its
    worker (False: just before its posttask); ``measure``: per-task thread
    CPU time and ``localsched.metrics`` entries (``state.task.probe``), the
    travel of process inputs and results, idle and scheduler time;
    ``sample``: stack samples of running tasks every that many seconds
    (0: none); ``sizes``: each result's size in bytes, measured where the
    result lives (``state.task.nbytes``; ``localsched.metrics.sizeof``);
    ``records``: the run keeps every finished task's ``TaskRecord`` in
    ``state.outcome.records`` (a sequence that grows as tasks end, complete at
    ``finish``), so a callback that only reads what happened needs no
    posttask hook: nothing of its own runs per task.

    Measuring costs, so a computation asks its
    callbacks once what they need, as a :class:`Needs`: every result in
    ``posttask`` (``results``; a Profiler does not, and results that stay inside
    a worker's batch then never travel back), each ``pretask`` at the task's
    true start (``exact_start``; else just before its posttask, which saves a
    hand-off per batch), fine metrics (``measure``) and stack samples
    (``sample``, an interval in seconds), or only the run's task records, read
    when it likes instead of a call per task (``records``).  A ``Callback``
    declares it as its
    ``needs`` attribute; plain functions travel in a :class:`Hooks` 5-tuple that
    carries one.  A plain tuple needs everything, as dask gives it.

    >>> class Timer(Callback):
    ...     needs = Needs(results=False)
    ...     def _posttask(self, key, result, dsk, state, worker_id):
    ...         pass
    >>> needs_of(Timer()._callback).results
    False
    >>> hooks = Hooks(posttask=lambda *a: None, needs=Needs(results=False))
    >>> len(hooks), needs_of(hooks) == Needs(results=False)
    (5, True)
    """

    results: bool = True
    exact_start: bool = True
    measure: bool = False
    sample: float = 0.0
    sizes: bool = False
    records: bool = False


_NEEDS_ALL = Needs()


class Hooks(tuple):
    """A callback as the registry holds it: the 5-tuple ``(start,
    start_state, pretask, posttask, finish)`` (None where absent), carrying
    what it needs (``needs``).  Compares and hashes as the plain tuple, so
    dask's registry and schedulers take it as one.
    """

    needs: Needs

    def __new__(cls, start=None, start_state=None, pretask=None, posttask=None, finish=None,
                *, needs: Needs = _NEEDS_ALL):
        self = super().__new__(cls, (start, start_state, pretask, posttask, finish))
        self.needs = needs
        return self

    def __repr__(self) -> str:
        return f"Hooks{tuple(self)!r}"


def needs_of(hooks: tuple) -> Needs:
    """What the callback ``hooks`` needs: a :class:`Hooks`' ``needs``; a plain
    tuple needs everything, except that dask's own ProgressBar (whose
    pretask only keeps the state for its timer thread) needs no exact
    starts."""
    needs = getattr(hooks, "needs", None)
    if needs is not None:
        return needs
    pretask = hooks[2]
    if pretask is not None:
        dask_bar = getattr(sys.modules.get("dask.diagnostics.progress"), "ProgressBar", None)
        if dask_bar is not None and type(getattr(pretask, "__self__", None)) is dask_bar:
            return Needs(exact_start=False)
    return _NEEDS_ALL


def merge_needs(cbs: Iterable[tuple]) -> Needs:
    """What a computation with these callbacks must provide: results and
    exact starts only count for callbacks with a posttask / pretask, sizes
    for those that read tasks (a posttask, or the records); the shortest
    sampling interval wins.

    >>> merge_needs([])
    Needs(results=False, exact_start=False, measure=False, sample=0.0, sizes=False, records=False)
    """
    results = exact = measure = sizes = records = False
    sample = 0.0
    for cb in cbs:
        n = needs_of(cb)
        results = results or (cb[3] is not None and n.results)
        exact = exact or (cb[2] is not None and n.exact_start)
        measure = measure or n.measure
        sizes = sizes or ((cb[3] is not None or n.records) and n.sizes)
        records = records or n.records
        if n.sample > 0:
            sample = n.sample if not sample else min(sample, n.sample)
    return Needs(results, exact, measure, sample, sizes, records)


# The registry.  At top level, ``Callback.active`` is the process-wide set
# below.  While a computation runs (its tasks, and its own callbacks) the
# context variable holds a registry of that context's own, empty at first:
# inside a task ``Callback.active`` is empty, as in dask, and a get the task
# calls fires only what the task registered itself, never the outer
# computation's callbacks.  Context variables follow threads started with a
# copied context, so this needs no swapping of global state.
_global_active: set = set()
_local_active: contextvars.ContextVar[set | None] = contextvars.ContextVar(
    "localsched_callbacks", default=None
)
# How many with-blocks / register() calls hold each hooks tuple: a callback
# entered twice (nested, or from two threads) stays until the last exit.
_holds: dict = {}
# Guards _global_active and _holds against concurrent (un)registration.
# Never held while a hook runs.
_registry_lock = threading.Lock()


@at_fork_in_child
def _renew_registry_lock() -> None:
    # (a copy held by a thread of the parent would be held forever)
    global _registry_lock
    _registry_lock = threading.Lock()


def forget_registered() -> None:
    """Forget every callback registered in this process: what a pool
    worker does first (a forked worker's registry is a copy of its
    parent's, whose callbacks it must never fire)."""
    with _registry_lock:
        _global_active.clear()
        _holds.clear()


def in_computation() -> bool:
    """Whether the calling code runs inside a computation (a task, or a
    callback of a running computation)."""
    return _local_active.get() is not None


def enter_computation() -> contextvars.Token:
    """Give the current context a fresh, empty callback registry (see above);
    undo with ``_local_active.reset(token)``."""
    return _local_active.set(set())


def _current_registry() -> set:
    local = _local_active.get()
    return _global_active if local is None else local


class _CallbackType(type):
    """Makes ``Callback.active`` the registry of the current context."""

    @property
    def active(cls) -> set:
        """The registered callbacks, as 5-tuples of hooks (or None).

        Public for compatibility with dask; prefer ``register()`` or ``with``.
        Empty inside a running task.
        """
        return _current_registry()

    @active.setter
    def active(cls, value: set) -> None:
        global _global_active
        if _local_active.get() is not None:
            _local_active.set(set(value))
        else:
            with _registry_lock:
                _global_active = value if isinstance(value, set) else set(value)


# The hooks tuples localsched's callbacks put in dask's registry (dask's
# schedulers then fire them), by our hooks tuple; active_callbacks() skips
# them, so a localsched computation never fires a callback twice.
_dask_mirrors: dict = {}


def _dask_registry() -> set | None:
    """dask's ``Callback.active`` when dask's callbacks module is loaded."""
    mod = sys.modules.get("dask.callbacks")
    return getattr(mod.Callback, "active", None) if mod is not None else None


def _hold(hooks: tuple, dask_hooks: tuple | None = None) -> None:
    registry = _current_registry()
    with _registry_lock:
        key = (id(registry), hooks)
        _holds[key] = _holds.get(key, 0) + 1
        registry.add(hooks)
        # At top level, also in dask's registry: a graph that dask's own
        # scheduler runs fires this callback too (dask's diagnostics work
        # the same way around localsched computations).
        if dask_hooks is not None and registry is _global_active:
            theirs = _dask_registry()
            if theirs is not None and hooks not in _dask_mirrors:
                _dask_mirrors[hooks] = dask_hooks
                theirs.add(dask_hooks)
    _tell_listeners()


def _release(hooks: tuple, everything: bool = False) -> None:
    registry = _current_registry()
    with _registry_lock:
        key = (id(registry), hooks)
        left = 0 if everything else _holds.get(key, 1) - 1
        if left > 0:
            _holds[key] = left
        else:
            _holds.pop(key, None)
            registry.discard(hooks)
            mirror = _dask_mirrors.pop(hooks, None) if registry is _global_active else None
            if mirror is not None:
                theirs = _dask_registry()
                if theirs is not None:
                    theirs.discard(mirror)
    _tell_listeners()


# Functions told ``anything_registered`` (bool) after every registration
# change at top level: companion modes subscribe here (localsched.distributed
# hooks dask's scheduler names in while a callback is registered); the
# registry itself knows nothing of them.
_registration_listeners: list = []


def on_registration(listener: Callable[[bool], None]) -> None:
    """Call ``listener(anything_registered)`` after every change of the
    top-level registry (and once now).  Idempotent."""
    if listener not in _registration_listeners:
        _registration_listeners.append(listener)
    listener(bool(_global_active))


def _tell_listeners() -> None:
    if _registration_listeners:
        registered = bool(_global_active)
        for listener in list(_registration_listeners):
            listener(registered)


class Callback(metaclass=_CallbackType):
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

    #: What this callback needs from a computation (see :class:`Needs`);
    #: set it on a subclass, or on an instance before registering it.
    needs: Needs = _NEEDS_ALL

    def __init__(
        self,
        start: Callable | None = None,
        start_state: Callable | None = None,
        pretask: Callable | None = None,
        posttask: Callable | None = None,
        finish: Callable | None = None,
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
    def _callback(self) -> Hooks:
        """The 5-tuple of this object's hooks (None where not overridden),
        carrying its ``needs``."""
        return Hooks(*[_own_hook(self, name) for name in HOOKS], needs=self.needs)

    @property
    def _dask_callback(self) -> tuple:
        """The hooks dask's own schedulers fire for this callback (registered
        in dask's registry too while dask is imported).  The same hooks by
        default; the profilers override it, since dask's state has no
        ``timing``."""
        return self._callback

    def __enter__(self):
        _hold(self._callback, self._dask_callback)
        return self

    def __exit__(self, *args):
        _release(self._callback)

    def register(self) -> None:
        """Fire this callback for every computation until ``unregister()``."""
        _hold(self._callback, self._dask_callback)

    def unregister(self) -> None:
        """Stop firing this callback (however often it was registered)."""
        _release(self._callback, everything=True)


def _own_hook(obj: Callback, name: str) -> Callable | None:
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
    """The registered hooks of the current context: localsched's, and at top
    level dask's when dask's callbacks module is loaded (so ``with
    dask.diagnostics.ProgressBar():`` works around a localsched computation
    too)."""
    local = _local_active.get()
    with _registry_lock:
        cbs = list(_global_active if local is None else local)
        mirrors = set(_dask_mirrors.values())
    dask_callbacks = sys.modules.get("dask.callbacks")
    if dask_callbacks is not None and local is None:
        for cb in list(getattr(dask_callbacks.Callback, "active", ())):
            if cb not in cbs and cb not in mirrors:  # (ours, put there by _hold)
                cbs.append(cb)
    return cbs


def callback_list(callbacks: Any) -> list:
    """The hooks tuples of a computation: the registered ones (None), else
    those given per call (one callback, or a collection of them), each
    once."""
    if callbacks is None:
        return active_callbacks()
    if hasattr(callbacks, "_callback") or _is_raw_callback(callbacks):
        callbacks = [callbacks]  # one callback, not a collection of them
    cbs: list = []
    for c in callbacks:
        c = normalize_callback(c)
        if c not in cbs:
            cbs.append(c)
    return cbs


def _is_raw_callback(x) -> bool:
    return (type(x) in (tuple, Hooks) and len(x) == 5
            and all(f is None or (callable(f) and not hasattr(f, "_callback")) for f in x))


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
    for t in tuples:
        _hold(t)
    try:
        yield
    finally:
        for t in tuples:
            _release(t)
