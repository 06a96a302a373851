"""dask's fused subgraphs, run in an order found once, when the graph is compiled.

dask's optimisations fuse chains of tasks into one task,
``Task(key, _execute_subgraph, inner_graph, out_key, in_keys, *refs)``
(``dask._task_spec``): every bag partition's pipeline, every array chunk's
chain of blockwise operations.  When such a task runs, dask's
``execute_graph`` orders its inner graph with ``dask.order.order`` -- about a
millisecond per call whatever the inner graph's size, often more than the
work itself (a 1,600-chunk array sum spends a third of its time there, on
any dask scheduler).

``fuse(node)`` makes the same task with that order computed here, once, at
compile time: a plain depth-first post-order of the inner graph (any
topological order gives the same results), each inner result dropped after
its last inner use, as ``execute_graph`` does.  The task's function, inputs
and results do not change; a subgraph this module does not recognise (any
other shape, a cycle, a reference to a key it lacks) is left as it is, to
run (or fail) as dask would run it.  It never imports dask: ``fuse`` is only
called on nodes of ``dask._task_spec``, already imported.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from typing import Any

__all__ = ["FusedSubgraph", "fuse", "subgraph_function", "datanode_type"]


def subgraph_function() -> Any:
    """dask's ``_execute_subgraph`` if its task spec is imported, else None."""
    mod = sys.modules.get("dask._task_spec")
    return getattr(mod, "_execute_subgraph", None) if mod is not None else None


def datanode_type() -> Any:
    """dask's ``DataNode`` class if its task spec is imported, else None."""
    mod = sys.modules.get("dask._task_spec")
    return getattr(mod, "DataNode", None) if mod is not None else None


class FusedSubgraph:
    """A fused task with its inner order: called with ``{dependency key:
    value}``, as dask's ``GraphNode`` is, it runs the inner tasks in that
    order and returns the output's value.

    ``func`` and ``key`` are the original task's (what diagnostics and the
    planner name a task by); ``node`` is the original task.
    """

    __slots__ = ("node", "key", "func", "inputs", "constants", "steps", "out_key")

    def __init__(self, node: Any, inputs: tuple, constants: dict, steps: tuple,
                 out_key: Hashable):
        self.node = node
        self.key = node.key
        self.func = node.func
        self.inputs = inputs  # ((inner key, dependency key), ...)
        self.constants = constants  # inner key -> value given in the task (a DataNode's)
        self.steps = steps  # ((inner key, inner node, keys to drop after it), ...)
        self.out_key = out_key

    @property
    def dependencies(self) -> frozenset:
        return self.node.dependencies

    def __call__(self, values: Mapping) -> Any:
        cache = {inner: values[outer] for inner, outer in self.inputs}
        if self.constants:
            cache.update(self.constants)
        for key, node, drop in self.steps:
            cache[key] = node(cache)
            for d in drop:
                del cache[d]
        return cache[self.out_key]

    def __repr__(self) -> str:
        return f"<FusedSubgraph {self.key!r}: {len(self.steps)} inner tasks>"


def fuse(node: Any, taskref: Any, datanode: Any) -> Any:
    """``node`` (a dask ``_execute_subgraph`` task) as a ``FusedSubgraph``,
    or ``node`` itself if its shape is not the one this module knows.
    ``taskref``, ``datanode``: dask's TaskRef and DataNode classes (the
    task's inputs are one or the other)."""
    args = node.args
    if node.kwargs or len(args) < 3:
        return node
    inner, out_key, in_keys = args[0], args[1], args[2]
    refs = args[3:]
    if type(inner) is not dict or type(in_keys) is not tuple or len(in_keys) != len(refs):
        return node
    inputs: list = []
    constants: dict = {}
    for k, r in zip(in_keys, refs, strict=True):
        if type(r) is taskref:
            inputs.append((k, r.key))
        elif type(r) is datanode:
            constants[k] = r.value
        else:
            return node
    try:
        run = _post_order(inner, set(in_keys), out_key)
    except (KeyError, ValueError, TypeError, AttributeError):
        return node  # (dask runs it, or says what is wrong with it)
    steps = _with_drops(run, inner, out_key)
    return FusedSubgraph(node, tuple(inputs), constants, steps, out_key)


def _post_order(inner: dict, given: set, out_key: Hashable) -> list:
    """The inner keys, each after its inner dependencies: the output's
    first, then any the output does not need (``execute_graph`` runs them
    all).  ValueError on a cycle, KeyError on a dependency neither the
    inner graph nor the inputs have."""
    if out_key not in inner or out_key in given:
        raise KeyError(out_key)
    done: dict = {}  # key -> True once emitted, False while on the walk
    out: list = []
    for root in [out_key, *inner]:
        if root in done or root in given:  # (an input overrides an inner task)
            continue
        walk = [(root, iter(sorted(inner[root].dependencies, key=str)))]
        done[root] = False
        while walk:
            key, todo = walk[-1]
            for d in todo:
                if d in given:
                    continue
                state = done.get(d)
                if state is None:
                    if d not in inner:
                        raise KeyError(d)
                    done[d] = False
                    walk.append((d, iter(sorted(inner[d].dependencies, key=str))))
                    break
                if state is False:
                    raise ValueError(f"cycle in a fused subgraph at {d!r}")
            else:
                walk.pop()
                done[key] = True
                out.append(key)
    return out


def _with_drops(run: list, inner: dict, out_key: Hashable) -> tuple:
    """``run`` as steps ``(key, node, keys to drop after it)``: a result
    goes after its last inner use, unless it is the output."""
    last_use: dict = {}
    for key in run:
        for d in inner[key].dependencies:
            last_use[d] = key
    drops: dict = {}
    for d, key in last_use.items():
        if d != out_key:
            drops.setdefault(key, []).append(d)
    return tuple((key, inner[key], tuple(drops.get(key, ()))) for key in run)
