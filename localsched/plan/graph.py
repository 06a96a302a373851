"""The task spec: what is a key, a task, an alias, and how a task executes.

A graph is any Mapping from keys to values (or an object with
``__dask_graph__()``).  Keys are str, bytes, int, float or tuples of these.
A value is

* a **task**: a tuple whose first element is callable; its arguments may be
  keys, literals, nested tasks, and lists/tuples/dicts containing them;
* an **alias**: a value that is itself a key of the graph;
* a dask ``GraphNode`` (``dask._task_spec.Task``, ``Alias``, ``DataNode``...),
  when dask is installed -- they carry their own dependencies; a task dask
  fused from several (``_execute_subgraph``) runs with its inner order
  found here, once (``localsched.plan.fused``);
* anything else is **data**, used as it is.

``compile_graph`` turns a graph into integer-indexed dependency lists plus one
compact, picklable *spec* per task, so that workers execute specs without
re-walking the original structure:

>>> from operator import add
>>> g = compile_graph({'a': 1, 'b': (add, 'a', 2), 'c': 'b', 'd': (sum, ['a', 'b'])})
>>> g.keys
['a', 'b', 'c', 'd']
>>> [[g.keys[j] for j in deps] for deps in g.deps]
[[], ['a'], ['b'], ['a', 'b']]
>>> execute(g.specs[1], {'a': 1})
3
>>> execute(g.specs[3], {'a': 1, 'b': 3})
4
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from .dask_optimizers import prime
from .fused import datanode_type, fuse, subgraph_function

__all__ = [
    "compile_graph",
    "execute",
    "is_task",
    "CycleError",
    "MissingDependencyError",
    "as_mapping",
    "flatten_keys",
]

# Spec kinds.  A spec is a tuple whose first item is one of these ints.
DATA = 0  # (DATA, value)
ALIAS = 1  # (ALIAS, key)
CALL = 2  # (CALL, func, args, keypos): args is a tuple; positions in keypos hold keys
NESTED = 3  # (NESTED, argspec): a general structure, see _compile_arg
NODE = 4  # (NODE, graph_node, dep_keys): a dask GraphNode

# Argument specs inside NESTED (small tuples, picklable).
A_KEY = 0  # (A_KEY, key)
A_LIT = 1  # (A_LIT, value)
A_TASK = 2  # (A_TASK, func, (argspec, ...), kwargspec-or-None)
A_LIST = 3  # (A_LIST, (argspec, ...))
A_TUPLE = 4  # (A_TUPLE, (argspec, ...))
A_DICT = 5  # (A_DICT, (key, ...), (argspec, ...))


class CycleError(ValueError):
    """The graph has a cycle; the message shows it, e.g. ``'a' -> 'b' -> 'a'``."""

    def __init__(self, cycle: list):
        self.cycle = cycle
        super().__init__("cycle in graph: " + " -> ".join(repr(k) for k in cycle))


class MissingDependencyError(KeyError, ValueError):
    """A task depends on a key that is not in the graph.

    A KeyError (the key is missing) and, as dask raises, a ValueError.
    """

    def __init__(self, missing: Hashable, needed_by: Hashable):
        self.missing = missing
        self.needed_by = needed_by
        super().__init__(
            f"Missing dependency: key {missing!r} is not in the graph; "
            f"it is needed by task {needed_by!r}"
        )

    def __str__(self) -> str:  # KeyError's str() would repr the message
        return self.args[0]


def is_task(x: Any) -> bool:
    """Whether ``x`` is a classic task: a tuple whose first element is callable.

    >>> is_task((len, 'x')), is_task(('x', 1)), is_task(())
    (True, False, False)
    """
    return type(x) is tuple and bool(x) and callable(x[0])


def as_mapping(dsk: Any) -> Mapping:
    """The graph as a Mapping: accepts Mappings and objects with ``__dask_graph__``."""
    if isinstance(dsk, Mapping):
        return dsk
    getter = getattr(dsk, "__dask_graph__", None)
    if getter is not None:
        prime(dsk)  # (bags and delayed: dask's optimizers, linear: see dask_optimizers)
        g = getter()
        if isinstance(g, Mapping):
            return g
    raise TypeError(
        f"a task graph must be a Mapping or have __dask_graph__(), got {type(dsk).__name__}"
    )


def flatten_keys(keys: Any, out: list) -> list:
    """Append the keys of an arbitrarily nested list of keys to ``out``.

    >>> flatten_keys([['a', ('x', 0)], 'b'], [])
    ['a', ('x', 0), 'b']
    """
    if type(keys) is list:
        for k in keys:
            flatten_keys(k, out)
    else:
        out.append(keys)
    return out


def _taskref_type() -> type[Any] | None:
    """dask's TaskRef class if dask's task spec is already imported, else None.

    A ``TaskRef('a')`` standing in a graph or inside a task is an alias for
    the key ``'a'`` (dask's new spec writes dependencies this way).
    """
    mod = sys.modules.get("dask._task_spec")
    return getattr(mod, "TaskRef", None) if mod is not None else None


def _graph_node_type() -> type[Any] | None:
    """dask's GraphNode class if dask's task spec is already imported, else None.

    A graph can only hold GraphNode objects if their module was imported, so
    this never imports dask itself.
    """
    mod = sys.modules.get("dask._task_spec")
    return getattr(mod, "GraphNode", None) if mod is not None else None


class CompiledGraph:
    """A graph in integer-indexed form.

    ``keys[i]`` is task i's key, ``deps[i]`` the indices it depends on,
    ``specs[i]`` its executable spec, ``is_data[i]`` whether it is plain data
    (``specs[i] == (DATA, value)``) that never runs.
    """

    __slots__ = ("keys", "index", "deps", "specs", "is_data", "dsk")

    def __init__(self, dsk: Mapping, keys: list, index: dict[Hashable, int],
                 deps: list[tuple[int, ...]], specs: list[tuple], is_data: list[bool]):
        self.dsk = dsk
        self.keys = keys
        self.index = index
        self.deps = deps
        self.specs = specs
        self.is_data = is_data


_POS_0 = (0,)
_POS_01 = (0, 1)
_POS_012 = (0, 1, 2)
# Argument types that are a key or a literal, never a structure to walk.
_SCALARS = frozenset({str, bytes, int, float, bool, type(None)})


def compile_graph(dsk: Mapping, known: Mapping | None = None) -> CompiledGraph:
    """Compile a graph: dependencies by index and one spec per key.

    ``known``: results given in advance (dask's ``cache=``); those keys are
    data, whether or not the graph has them.  Raises MissingDependencyError
    for an explicit dependency (a dask ``TaskRef``) on a key neither has.
    """
    keys, index = _keys_and_index(dsk, known)
    node_type = _graph_node_type()
    taskref = _taskref_type()
    subgraph = subgraph_function()
    deps: list = [()] * len(keys)
    specs: list = [None] * len(keys)
    is_data = [False] * len(keys)
    get = index.get
    items: Iterable[tuple[int, Any]]
    if known:
        for k, v in known.items():
            i = index[k]
            specs[i] = (DATA, v)
            is_data[i] = True
        items = ((index[k], v) for k, v in dsk.items() if k not in known)
    else:
        items = enumerate(dsk.values())  # (keys is list(dsk): i is the index)
    # This loop runs once per task: the common shapes are handled inline.
    # A task's argument that is found in the index is a key (as in
    # ``_compile_task``); a list, or a tuple that is not a key, takes the
    # general path.
    for i, value in items:
        tv = type(value)
        if tv is tuple and value and callable(value[0]):
            n = len(value)
            if n == 3:  # (func, x, y): the commonest task shape
                try:
                    ja, jb = get(value[1]), get(value[2])
                except TypeError:
                    ja = None  # an unhashable literal: general path
                else:
                    if ja is not None and jb is not None:
                        deps[i] = (ja, jb) if ja != jb else (ja,)
                        specs[i] = (CALL, value[0], value[1:], _POS_01)
                        continue
            elif n == 2:  # (func, x)
                a = value[1]
                try:
                    ja = get(a)
                except TypeError:
                    ja = None
                    ta = list  # (the general path)
                else:
                    if ja is not None:
                        deps[i] = (ja,)
                        specs[i] = (CALL, value[0], value[1:], _POS_0)
                        continue
                    ta = type(a)
                if ta in _SCALARS:  # not a key: a literal
                    specs[i] = (CALL, value[0], value[1:], ())
                    continue
            elif n == 4:  # (func, x, y, z): a stencil's task, spelled out
                try:
                    ja, jb, jc = get(value[1]), get(value[2]), get(value[3])
                except TypeError:
                    ja = None  # an unhashable literal: general path
                else:
                    if ja is not None and jb is not None and jc is not None:
                        deps[i] = ((ja, jb, jc) if ja != jb and jb != jc and ja != jc
                                   else tuple(dict.fromkeys((ja, jb, jc))))
                        specs[i] = (CALL, value[0], value[1:], _POS_012)
                        continue
            elif n > 4:  # (func, x, y, z, w, ...)
                made = _all_keys(value, get)
                if made is not None:
                    specs[i], deps[i] = made
                    continue
            specs[i], deps[i] = _compile_task(value, index, keys[i], taskref)
            continue
        specs[i], deps[i], is_data[i] = _compile_other(
            value, keys[i], index, node_type, taskref, subgraph)
    return CompiledGraph(dsk, keys, index, deps, specs, is_data)


def _compile_other(value: Any, key, index: dict, node_type, taskref, subgraph
                   ) -> tuple[tuple, tuple, bool]:
    """``(spec, dependency indices, is data)`` of what is not a tuple task
    (``compile_graph``'s other cases): a dask ``GraphNode`` (``node_type``),
    a ``TaskRef`` alias (``taskref``), a structure, a key alias or data."""
    tv = type(value)
    if node_type is not None and isinstance(value, node_type):
        # A set: sorted, so the order (which walks dependencies as
        # listed) does not change with the hash of random key tokens.
        dep_keys = tuple(sorted(value.dependencies, key=str))
        try:
            deps = tuple(index[k] for k in dep_keys)
        except KeyError:
            missing = next(k for k in dep_keys if k not in index)
            raise MissingDependencyError(missing, key) from None
        if getattr(value, "func", None) is subgraph and subgraph is not None:
            value = fuse(value, taskref, datanode_type())  # (its inner order found once)
        return (NODE, value, dep_keys), deps, False
    if tv is taskref and taskref is not None:
        if value.key not in index:
            raise MissingDependencyError(value.key, key)
        return (ALIAS, value.key), (index[value.key],), False
    if tv is list or tv is dict or (tv is tuple and value):
        spec, found = _compile_structure(value, index)
        if found or _holds_task(spec):
            # A structure holding keys or tasks is evaluated, as dask does:
            # {'c': [1, (inc, 1)]} gives [1, 2].
            return (NESTED, spec), _dep_indices(found, index, key), False
        return (DATA, value), (), True
    spec, deps = _alias_or_data(value, key, index)
    return spec, deps, spec[0] == DATA


def _all_keys(task: tuple, get) -> tuple[tuple, tuple[int, ...]] | None:
    """Spec and dependency indices of a task whose arguments are all keys
    (``get``: the index's), as ``_compile_task`` makes them; else None."""
    args = task[1:]
    js = []  # (a loop, not a comprehension: no frame of its own per task)
    try:
        for a in args:
            j = get(a, -1)
            if j < 0:
                return None
            js.append(j)
    except TypeError:  # an unhashable literal: the general path
        return None
    spec = (CALL, task[0], args, _all_positions(len(args)))
    return spec, tuple(js) if len(set(js)) == len(js) else tuple(dict.fromkeys(js))


@functools.lru_cache(maxsize=64)
def _all_positions(n: int) -> tuple[int, ...]:
    """``(0, ..., n-1)``, one tuple per ``n`` (shared by the specs)."""
    return tuple(range(n))


def _keys_and_index(dsk: Mapping, known: Mapping | None) -> tuple[list, dict]:
    """The graph's keys, then those of ``known`` it lacks, and their indices."""
    keys = list(dsk)
    if known:
        keys += [k for k in known if k not in dsk]
    index = dict(zip(keys, range(len(keys)), strict=True))
    if len(index) != len(keys):  # only a strange Mapping can do this
        raise ValueError("graph has duplicate keys")
    return keys, index


def _alias_or_data(value: Any, key: Hashable, index: dict) -> tuple[tuple, tuple]:
    """Spec and dependency indices of a value that is neither a task nor a
    structure: another key's name (an alias), or plain data."""
    try:
        alias = value in index
    except TypeError:  # unhashable data
        alias = False
    if alias and value != key:
        return (ALIAS, value), (index[value],)
    return (DATA, value), ()


def _compile_task(task: tuple, index: dict, key: Hashable = None,
                  taskref: type[Any] | None = None) -> tuple[tuple, tuple[int, ...]]:
    """Spec and dependency indices of a classic task tuple (``taskref``:
    dask's TaskRef class, if loaded)."""
    args = task[1:]
    get = index.get
    keypos = []
    dep = []
    for p, a in enumerate(args):
        ta = type(a)
        if ta is list or ta is dict or (ta is tuple and a and callable(a[0])):
            break  # a structure to walk: general path below
        try:
            j = get(a)
        except TypeError:  # unhashable: a literal, unless it hides keys
            if ta is tuple:
                break
            continue
        if j is not None:
            keypos.append(p)
            dep.append(j)
        elif ta is tuple or ta is taskref:
            break  # a literal tuple may contain keys; a TaskRef names one
    else:
        spec = (CALL, task[0], args, tuple(keypos))
        if len(dep) > 1 and len(set(dep)) != len(dep):
            return spec, tuple(dict.fromkeys(dep))  # the same key twice: depend on it once
        return spec, tuple(dep)
    spec, found = _compile_structure(task, index)
    return (NESTED, spec), _dep_indices(found, index, key)


def _dep_indices(found: list, index: dict, needed_by: Hashable) -> tuple[int, ...]:
    """Indices of the keys a structure refers to, each once; a TaskRef to a
    key the graph lacks is a MissingDependencyError."""
    try:
        return tuple(index[k] for k in dict.fromkeys(found))
    except KeyError:
        missing = next(k for k in found if k not in index)
        raise MissingDependencyError(missing, needed_by) from None


def _holds_task(spec: tuple) -> bool:
    """Whether an argument spec contains a task anywhere."""
    kind = spec[0]
    if kind == A_TASK:
        return True
    if kind in (A_LIST, A_TUPLE):
        return any(_holds_task(s) for s in spec[1])
    if kind == A_DICT:
        return any(_holds_task(s) for s in spec[2])
    return False


def _compile_structure(x: Any, index: dict) -> tuple[tuple, list]:
    """Argument spec of any structure, and the keys it refers to (in order)."""
    found: list = []
    spec = _compile_arg(x, index, found)
    return spec, found


def _compile_arg(x: Any, index: dict, found: list) -> tuple:
    tx = type(x)
    if tx.__name__ == "TaskRef" and tx is _taskref_type():  # an explicit dependency
        found.append(x.key)
        return (A_KEY, x.key)
    if tx is tuple and x and callable(x[0]):
        return (A_TASK, x[0], tuple(_compile_arg(a, index, found) for a in x[1:]))
    if tx is list:
        return (A_LIST, tuple(_compile_arg(a, index, found) for a in x))
    if tx is dict:
        return (A_DICT, tuple(x), tuple(_compile_arg(v, index, found) for v in x.values()))
    try:
        if x in index:
            found.append(x)
            return (A_KEY, x)
    except TypeError:  # unhashable: a literal, or a tuple holding keys
        pass
    if tx is tuple:
        return (A_TUPLE, tuple(_compile_arg(a, index, found) for a in x))
    return (A_LIT, x)


def execute(spec: tuple, data: Mapping) -> Any:
    """Run one compiled spec, reading dependency results from ``data``."""
    kind = spec[0]
    if kind == CALL:
        keypos = spec[3]
        if not keypos:
            return spec[1](*spec[2])
        if len(keypos) == len(spec[2]):  # (every argument a key)
            return spec[1](*[data[a] for a in spec[2]])
        args = list(spec[2])
        for p in keypos:
            args[p] = data[args[p]]
        return spec[1](*args)
    if kind == ALIAS:
        return data[spec[1]]
    if kind == NESTED:
        return _run_arg(spec[1], data)
    if kind == NODE:
        return spec[1]({k: data[k] for k in spec[2]})
    return spec[1]  # DATA


def _run_arg(a: tuple, data: Mapping) -> Any:
    kind = a[0]
    if kind == A_KEY:
        return data[a[1]]
    if kind == A_LIT:
        return a[1]
    if kind == A_TASK:
        return a[1](*[_run_arg(s, data) for s in a[2]])
    if kind == A_LIST:
        return [_run_arg(s, data) for s in a[1]]
    if kind == A_TUPLE:
        return tuple(_run_arg(s, data) for s in a[1])
    return dict(zip(a[1], [_run_arg(s, data) for s in a[2]], strict=False))  # A_DICT
