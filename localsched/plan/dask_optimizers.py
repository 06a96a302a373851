"""dask's low-level graph optimizers for bags and delayed, in time linear
in the graph, giving the graph dask's own would.

Where the time goes.  ``dask.compute`` hands a scheduler an expression
whose ``__dask_graph__`` runs each collection's low-level optimizer, inside
the scheduler's call: dask's schedulers and localsched's pay it alike.  Two
of those optimizers cost more than the tasks they prepare
(``benchmarks/README.md``, "Real work"):

* a bag's (``dask.bag.core.optimize``) first converts the legacy graph to
  task objects, visiting every item of every literal partition
  (``from_sequence``: a 200,000-item bag is 200,000 visits, most of the
  call);
* delayed's (``dask.delayed.optimize``) culls a graph of one layer per
  ``delayed`` call layer by layer, each layer walking every key needed so
  far: quadratic (1,600 chunks, 1.3 million set operations).

What this module does instead, before the expression is asked for its
graph (``prime``): the same steps as dask's ``_optimized_dsk``, with the
two optimizers replaced by ``_bag`` and ``_delayed``.  ``_bag`` converts a
partition that holds only plain scalars none of which is a key in one
C-level pass (what dask's conversion makes of it: a copy, as data) and
leaves every other value, and the cull, fuse and lazify after it, to
dask's own functions.  ``_delayed`` culls the merged graph once from the
output keys (dask's own ``cull`` on task objects); a graph with legacy
tuples or annotated layers, or with delayed fusion on, goes to dask's
optimizer unchanged.  The result is stored where the expression caches
its optimized graph, so ``__dask_graph__`` returns it.

Anything else -- an optimizer not listed, a dask whose expressions look
different, an error on the way -- leaves the expression untouched and
dask's own path runs, as it would without localsched.  The tests compare
both graphs on every kind of partition and graph these take
(``tests/plan/test_dask_optimizers.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["prime"]

#: Items of a partition that dask's conversion keeps as they are unless
#: one equals a key (exact types: a subclass may define its own equality).
_SCALARS = frozenset({int, float, str, bool, bytes, complex, type(None)})
_SEQUENCES = (list, tuple, set, frozenset)


def prime(source: Any) -> None:
    """Compute ``source``'s optimized graph the fast way and cache it where
    dask's ``__dask_graph__`` looks, when ``source`` is a sequence of
    dask's graph expressions whose optimizers are known here; else nothing."""
    expr = sys.modules.get("dask._expr")
    if expr is None or type(source) is not getattr(expr, "_HLGExprSequence", None):
        return
    state = getattr(source, "__dict__", None)
    if state is None or "_optimized_dsk" in state:
        return
    try:
        optimized = _optimized(source.operands)
    except Exception:  # noqa: BLE001 -- dask's own path then runs (and raises its own error)
        return
    if optimized is not None:
        state["_optimized_dsk"] = optimized


def _optimized(operands) -> Any:
    """``_HLGExprSequence._optimized_dsk`` with the known optimizers
    replaced; None if an operand is not a graph expression or an
    optimizer is not known."""
    from dask._expr import HLGExpr
    from dask.highlevelgraph import HighLevelGraph

    replacements = _replacements()
    if not any(isinstance(op, HLGExpr) and op.low_level_optimizer in replacements
               for op in operands):
        return None
    steps = []
    for op in operands:
        if not isinstance(op, HLGExpr):
            return None
        optimizer = op.low_level_optimizer
        if optimizer is not None and optimizer not in replacements:
            return None
        steps.append((op, optimizer))
    graphs = []
    for op, optimizer in steps:
        keys = op.__dask_keys__()
        graph = op.hlg
        if optimizer is not None:
            graph = replacements[optimizer](optimizer, graph, keys)
        graphs.append(graph)
    return HighLevelGraph.merge(*graphs)


def _replacements() -> dict[Callable, Callable]:
    """dask's optimizer -> this module's, for the modules imported."""
    out: dict[Callable, Callable] = {}
    bag = sys.modules.get("dask.bag.core")
    if bag is not None and callable(getattr(bag, "optimize", None)):
        out[bag.optimize] = _bag
    delayed = sys.modules.get("dask.delayed")
    if delayed is not None and callable(getattr(delayed, "optimize", None)):
        out[delayed.optimize] = _delayed
    return out


def _bag(dask_optimize: Callable, graph, keys):
    """A bag's optimizer: dask's own, on the graph converted here (dask's
    conversion then finds every value converted already)."""
    return dask_optimize(converted(graph), keys)


def converted(graph) -> dict:
    """``dask._task_spec.convert_legacy_graph(graph)``: partitions of plain
    scalars none of which is a key converted in one pass, every other value
    by dask's ``convert_legacy_task``."""
    from dask._task_spec import Alias, DataNode, GraphNode, convert_legacy_task

    all_keys = set(graph)
    out: dict = {}
    for k, value in graph.items():
        kind = type(value)
        if (kind in _SEQUENCES and _SCALARS.issuperset(map(type, value))
                and all_keys.isdisjoint(value) and not (kind is tuple and value in all_keys)):
            out[k] = DataNode(k, kind(value))  # (dask's: a copy of the items, as data)
            continue
        node = convert_legacy_task(k, value, all_keys)
        if isinstance(node, Alias) and node.target == k:
            continue
        out[k] = node if isinstance(node, GraphNode) else DataNode(k, node)
    return out


def _delayed(dask_optimize: Callable, graph, keys):
    """delayed's optimizer: the graph culled once from ``keys``, where every
    layer holds task objects without annotations; else dask's own."""
    from dask import config
    from dask._task_spec import GraphNode, cull
    from dask.core import flatten
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    if config.get("optimization.fuse.delayed") or type(graph) is not HighLevelGraph:
        return dask_optimize(graph, keys)
    merged: dict = {}
    for layer in graph.layers.values():
        if type(layer) is not MaterializedLayer or layer.annotations \
                or layer.collection_annotations:
            return dask_optimize(graph, keys)
        merged.update(layer.mapping)
    if not all(isinstance(node, GraphNode) for node in merged.values()):
        return dask_optimize(graph, keys)
    wanted = set(flatten(keys if isinstance(keys, (list, set)) else [keys]))
    return cull(merged, wanted)
