"""A small lazy front for people without dask: ``delayed`` and ``compute``.

Wrap a function with ``delayed``; calling it records a task instead of
running it.  Lazy values can be passed to other delayed calls (also inside
lists, tuples and dicts), and computed together:

>>> from operator import add
>>> a = delayed(add)(1, 2)
>>> b = delayed(add)(a, 10)
>>> b.compute(scheduler="sync")
13
>>> compute(a, b, {'both': [a, b]})
(3, 13, {'both': [3, 13]})

Lazy values inside lists, tuples, sets and dicts are computed too; anything
else is returned as it is.

Each lazy value knows only its own task and the lazy values it uses; the
graph is assembled when it is computed, so building a long chain costs
linear, not quadratic, time.

See Also
--------
localsched.get : the threaded scheduler used by default
"""

from __future__ import annotations

import contextvars
import operator
import os
from collections.abc import Callable, Hashable, Iterable
from typing import Any, NoReturn, overload

from .utils import funcname

__all__ = ["delayed", "Delayed", "compute", "get_scheduler"]


class _Literal:
    """A task returning a fixed value, so the value is never read as a task
    or a key (``delayed((len, [1]))`` is that tuple, not a call of len)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __call__(self) -> Any:
        return self.value

    def __reduce__(self) -> tuple[type[_Literal], tuple[Any]]:
        return (_Literal, (self.value,))

    def __repr__(self) -> str:
        return f"literal({self.value!r})"


def _apply(func: Callable, args: list, kwargs: dict) -> Any:
    return func(*args, **kwargs)


def _binary(op: Callable[[Any, Any], Any], name: str,
            reflected: bool = False) -> Callable[[Delayed, Any], Delayed]:
    """The method ``Delayed.__<name>__`` (``__r<name>__`` if ``reflected``):
    a task applying ``op``."""
    if reflected:
        def method(self: Delayed, other: Any) -> Delayed:
            return delayed(op, name=name)(other, self)
    else:
        def method(self: Delayed, other: Any) -> Delayed:
            return delayed(op, name=name)(self, other)
    method.__name__ = name
    return method


class Delayed:
    """A lazy value: a key, the task that computes it, and its inputs.

    >>> x = delayed(sum)([1, 2, 3])
    >>> x.key.startswith('sum-')
    True
    >>> x.compute()
    6
    """

    __slots__ = ("_key", "_task", "_inputs")

    def __init__(self, key: Hashable, task: tuple, inputs: tuple[Delayed, ...] = ()):
        self._key = key
        self._task = task
        self._inputs = inputs

    @property
    def key(self) -> Hashable:
        """This value's key in the graph."""
        return self._key

    @property
    def dask(self) -> dict:
        """The graph computing this value (built on access)."""
        return _collect_graph([self])

    def __dask_graph__(self) -> dict:
        return self.dask

    def __dask_keys__(self) -> list:
        return [self._key]

    def compute(self, *, scheduler: str | Callable | None = None, **options: Any) -> Any:
        """Compute this value; see ``localsched.compute``."""
        return compute(self, scheduler=scheduler, **options)[0]

    def __repr__(self) -> str:
        return f"Delayed({self._key!r})"

    def __hash__(self) -> int:
        return hash(self._key)

    def __bool__(self) -> bool:
        raise TypeError("the truth of a lazy value is unknown until it is computed; "
                        "call .compute() first")

    def __iter__(self) -> NoReturn:
        raise TypeError("a lazy value cannot be iterated before it is computed")

    def __getitem__(self, index: Any) -> Delayed:
        return delayed(operator.getitem, name="getitem")(self, index)

    def __neg__(self) -> Delayed:
        return delayed(operator.neg, name="neg")(self)

    def __getattr__(self, attr: str) -> Delayed:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return delayed(getattr, name=f"getattr-{attr}")(self, attr)

    # Operators record a task too (comparisons have no reflected form).
    __add__ = _binary(operator.add, "add")
    __radd__ = _binary(operator.add, "add", reflected=True)
    __sub__ = _binary(operator.sub, "sub")
    __rsub__ = _binary(operator.sub, "sub", reflected=True)
    __mul__ = _binary(operator.mul, "mul")
    __rmul__ = _binary(operator.mul, "mul", reflected=True)
    __truediv__ = _binary(operator.truediv, "truediv")
    __rtruediv__ = _binary(operator.truediv, "truediv", reflected=True)
    __floordiv__ = _binary(operator.floordiv, "floordiv")
    __rfloordiv__ = _binary(operator.floordiv, "floordiv", reflected=True)
    __mod__ = _binary(operator.mod, "mod")
    __rmod__ = _binary(operator.mod, "mod", reflected=True)
    __pow__ = _binary(operator.pow, "pow")
    __rpow__ = _binary(operator.pow, "pow", reflected=True)
    __matmul__ = _binary(operator.matmul, "matmul")
    __rmatmul__ = _binary(operator.matmul, "matmul", reflected=True)
    __and__ = _binary(operator.and_, "and")
    __rand__ = _binary(operator.and_, "and", reflected=True)
    __or__ = _binary(operator.or_, "or")
    __ror__ = _binary(operator.or_, "or", reflected=True)
    __xor__ = _binary(operator.xor, "xor")
    __rxor__ = _binary(operator.xor, "xor", reflected=True)
    __lt__ = _binary(operator.lt, "lt")
    __le__ = _binary(operator.le, "le")
    __gt__ = _binary(operator.gt, "gt")
    __ge__ = _binary(operator.ge, "ge")




class _DelayedFunction:
    """``delayed(func)``: calling it records a task."""

    __slots__ = ("func", "name")

    def __init__(self, func: Callable, name: str | None):
        self.func = func
        self.name = name or funcname(func)

    def __call__(self, *args: Any, **kwargs: Any) -> Delayed:
        inputs: dict = {}
        targs = tuple(_to_task_arg(a, inputs) for a in args)
        if kwargs:
            tkw = {k: _to_task_arg(v, inputs) for k, v in kwargs.items()}
            task = (_apply, self.func, list(targs), tkw)
        else:
            task = (self.func, *targs)
        return Delayed(f"{self.name}-{_token()}", task, tuple(inputs.values()))

    def __repr__(self) -> str:
        return f"delayed({self.name})"


def _to_task_arg(x: Any, inputs: dict[Hashable, Delayed]) -> Any:
    """A task argument for ``x``: lazy values become their keys."""
    tx = type(x)
    if tx is Delayed:
        inputs[x._key] = x
        return x._key
    if tx is list:
        return [_to_task_arg(v, inputs) for v in x]
    if tx is dict:
        return (dict, [[_to_task_arg(k, inputs), _to_task_arg(v, inputs)] for k, v in x.items()])
    if tx is tuple:
        if any(type(v) in (Delayed, list, dict, tuple) for v in x):
            return (tuple, [_to_task_arg(v, inputs) for v in x])
        return (_Literal(x),) if x and callable(x[0]) else x
    if tx is str or tx is bytes:
        return (_Literal(x),)  # never mistaken for a key
    return x


@overload
def delayed(obj: Callable[..., Any], *, name: str | None = None) -> _DelayedFunction: ...


@overload
def delayed(obj: Any, *, name: str | None = None) -> Delayed: ...


def delayed(obj: Any, *, name: str | None = None) -> Delayed | _DelayedFunction:
    """Make ``obj`` lazy: a function's calls become tasks; a value becomes a
    lazy value.

    >>> inc = delayed(lambda x: x + 1, name="inc")
    >>> y = inc(inc(1))
    >>> y.key.split('-')[0], y.compute()
    ('inc', 3)
    >>> (delayed(10) * y).compute()
    30
    """
    if isinstance(obj, Delayed):
        return obj
    if callable(obj):
        return _DelayedFunction(obj, name)
    inputs: dict = {}
    arg = _to_task_arg(obj, inputs)
    task: tuple
    if inputs:  # a structure holding lazy values
        task = (_identity, arg)
    else:
        task = (_Literal(obj),)
    return Delayed(f"{name or type(obj).__name__}-{_token()}", task,
                   tuple(inputs.values()))


def _token() -> str:
    """A random hex token that makes a key unique (and has a digit, so that
    ``key_split`` recognises it)."""
    return os.urandom(12).hex() + "0"


def _identity(x: Any) -> Any:
    return x


def _collect_graph(values: Iterable[Delayed]) -> dict:
    """The graph of all tasks the lazy ``values`` need (iterative walk)."""
    dsk: dict = {}
    stack = list(values)
    while stack:
        v = stack.pop()
        if v._key in dsk:
            continue
        dsk[v._key] = v._task
        stack.extend(v._inputs)
    return dsk


#: The scheduler ``compute`` uses when none is named, in this context (None:
#: the process-wide ``process_default_scheduler``).
default_scheduler: contextvars.ContextVar = contextvars.ContextVar(
    "localsched_default_scheduler", default=None
)
#: The process-wide default, for every thread ("threads" unless set, e.g. by
#: ``localsched profile --scheduler``): a one-item list, replaced in place.
process_default_scheduler: list = ["threads"]

_SCHEDULER_NAMES = {
    "threads": ("threaded", "get"),
    "threading": ("threaded", "get"),
    "processes": ("multiprocessing", "get"),
    "multiprocessing": ("multiprocessing", "get"),
    "sync": ("local", "get_sync"),
    "synchronous": ("local", "get_sync"),
    "single-threaded": ("local", "get_sync"),
    # a dask.distributed cluster (the optional extra localsched[distributed])
    "distributed": ("distributed", "get"),
}


def get_scheduler(scheduler: str | Callable | None = None) -> Callable:
    """The get function for a scheduler name (or a get function itself).

    >>> get_scheduler("sync").__name__
    'get_sync'
    """
    if scheduler is None:
        scheduler = default_scheduler.get()
        if scheduler is None:
            scheduler = process_default_scheduler[0]
    if callable(scheduler):
        return scheduler
    try:
        module, attr = _SCHEDULER_NAMES[scheduler]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown scheduler {scheduler!r}; use one of "
            f"{sorted(_SCHEDULER_NAMES)} or a get function"
        ) from None
    import importlib

    return getattr(importlib.import_module(f"localsched.{module}"), attr)


def compute(*values: Any, scheduler: str | Callable | None = None, **options: Any) -> tuple:
    """Compute several lazy values at once, sharing their common work.

    ``scheduler`` is "threads" (default), "processes", "sync" or a get
    function; other keyword options go to it (e.g. ``num_workers=2``).
    Arguments that are not lazy are returned unchanged.

    >>> x = delayed(abs)(-3)
    >>> compute(x, x + 1, 'plain', scheduler="sync")
    (3, 4, 'plain')
    """
    get = get_scheduler(scheduler)
    found: dict = {}
    for v in values:
        _find_lazy(v, found)
    if not found:
        return values
    lazy = list(found.values())
    dsk = _collect_graph(lazy)
    results = dict(zip(found, get(dsk, list(found), **options), strict=False))
    return tuple(_substitute(v, results) for v in values)


def _find_lazy(x: Any, found: dict[Hashable, Delayed]) -> None:
    tx = type(x)
    if tx is Delayed:
        found[x._key] = x
    elif tx in (list, tuple, set, frozenset):
        for v in x:
            _find_lazy(v, found)
    elif tx is dict:
        for v in x.values():
            _find_lazy(v, found)


def _substitute(x: Any, results: dict) -> Any:
    tx = type(x)
    if tx is Delayed:
        return results[x._key]
    if tx in (list, tuple, set, frozenset):
        return tx(_substitute(v, results) for v in x)
    if tx is dict:
        return {k: _substitute(v, results) for k, v in x.items()}
    return x
