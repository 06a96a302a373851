"""Task graphs for the benchmarks: pure builders returning ``(dsk, output_keys)``.

Every builder makes a fresh dict of classic task tuples whose functions live
in importable modules (``operator``, builtins), so the same graph runs on
dask's and localsched's schedulers alike, including the process pools that
start workers with "spawn".  Values are small ints, so a task costs well
under a microsecond and what the benchmarks measure is scheduling overhead.

>>> dsk, out = tree_reduction(4)
>>> len(dsk), out
(7, [('sum', 2, 0)])
>>> from localsched.local import get_sync
>>> get_sync(dsk, out)
(-6,)
>>> dsk, out = stencil(width=3, steps=2)
>>> len(dsk), get_sync(dsk, out)
(7, (-1,))

The builders used by each script are listed in ``OVERHEAD_GRAPHS`` and
``ORDER_GRAPHS`` at the bottom.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

__all__ = [
    "tree_reduction",
    "chain",
    "chains_then_reduction",
    "stencil",
    "blocked_matmul",
    "shared_leaves_two_reductions",
    "dask_array_graph",
    "ORDER_GRAPHS",
    "count_tasks",
    "SHAPES",
    "TaskKind",
    "KINDS",
    "spin",
]

Graph = tuple[dict, list]


def count_tasks(dsk: dict) -> int:
    """Entries of ``dsk`` that are tasks (tuples with a callable first)."""
    return sum(1 for v in dsk.values() if type(v) is tuple and v and callable(v[0]))


def _reduce_pairwise(dsk: dict, keys: list, name: str, op: Callable = operator.add) -> Any:
    """Combine ``keys`` pairwise with ``op`` (default: add), level by level,
    into one root key; return it.

    An odd key out at some level is carried to the next level as it is (no
    extra task), so ``len(keys) - 1`` tasks are created.
    """
    level = 0
    while len(keys) > 1:
        level += 1
        nxt = []
        for j in range(0, len(keys) - 1, 2):
            k = (name, level, j // 2)
            dsk[k] = (op, keys[j], keys[j + 1])
            nxt.append(k)
        if len(keys) % 2:
            nxt.append(keys[-1])
        keys = nxt
    return keys[0]


def tree_reduction(n_leaves: int = 57_000) -> Graph:
    """``n_leaves`` leaves ``(neg, i)`` summed pairwise to one root: 2n-1 tasks.

    The default makes 113,999 tasks, the overhead benchmark's main graph.
    """
    dsk: dict = {}
    leaves = []
    for i in range(n_leaves):
        k = ("leaf", i)
        dsk[k] = (operator.neg, i)
        leaves.append(k)
    return dsk, [_reduce_pairwise(dsk, leaves, "sum")]


def chain(length: int = 10_000) -> Graph:
    """One linear chain: each task adds 1 to the previous one's result."""
    dsk: dict = {("chain", 0): (operator.neg, 0)}
    for i in range(1, length):
        dsk[("chain", i)] = (operator.add, ("chain", i - 1), 1)
    return dsk, [("chain", length - 1)]


def chains_then_reduction(n_chains: int = 100, length: int = 50, tree: bool = True) -> Graph:
    """Independent chains, their ends reduced by a pairwise tree (or one ``sum``).

    The ordering question: finish one chain (and fold it into the reduction)
    before starting the next, so that only about log2(n_chains) chain ends
    are held, instead of starting every chain at once.
    """
    dsk: dict = {}
    ends = []
    for c in range(n_chains):
        dsk[("c", c, 0)] = (operator.neg, c)
        for t in range(1, length):
            dsk[("c", c, t)] = (operator.add, ("c", c, t - 1), 1)
        ends.append(("c", c, length - 1))
    if tree:
        return dsk, [_reduce_pairwise(dsk, ends, "csum")]
    dsk["total"] = (sum, ends)
    return dsk, ["total"]


def stencil(width: int = 40, steps: int = 40) -> Graph:
    """A 1-D stencil over time: ``(t, i)`` needs ``(t-1, i-1), (t-1, i), (t-1, i+1)``.

    ``steps`` rows of ``width`` tasks (the first row are leaves), then one
    ``sum`` over the last row.  A lattice: no order can avoid holding about a
    row of results, the question is how many more.
    """
    dsk: dict = {}
    for i in range(width):
        dsk[("s", 0, i)] = (operator.neg, i)
    for t in range(1, steps):
        for i in range(width):
            lo, hi = max(0, i - 1), min(width - 1, i + 1)
            dsk[("s", t, i)] = (max, *[("s", t - 1, j) for j in range(lo, hi + 1)])
    dsk["stencil-total"] = (sum, [("s", steps - 1, i) for i in range(width)])
    return dsk, ["stencil-total"]


def blocked_matmul(n: int = 8, reduce: bool = False) -> Graph:
    """C = A @ B in ``n x n`` blocks, as ints: ``C[i,j] = sum_k A[i,k] * B[k,j]``.

    Each input block feeds ``n`` products, so every order must keep inputs
    alive for a while; a good one finishes output blocks while their inputs
    are still around.  Outputs are all ``n*n`` blocks of C (as an array
    computation returns them), or their sum with ``reduce=True``.
    """
    dsk: dict = {}
    for i in range(n):
        for k in range(n):
            dsk[("A", i, k)] = (operator.neg, i * n + k)
            dsk[("B", i, k)] = (operator.neg, k * n + i)
    outs = []
    for i in range(n):
        for j in range(n):
            prods = []
            for k in range(n):
                p = ("AB", i, j, k)
                dsk[p] = (operator.mul, ("A", i, k), ("B", k, j))
                prods.append(p)
            dsk[("C", i, j)] = (sum, prods)
            outs.append(("C", i, j))
    if reduce:
        dsk["C-total"] = (sum, outs)
        return dsk, ["C-total"]
    return dsk, outs


def shared_leaves_two_reductions(n_leaves: int = 1_000) -> Graph:
    """Two tree reductions over the same leaves, combined: a mean/variance shape.

    Leaf ``x_i`` feeds ``sum(x)`` directly and ``sum(x*x)`` through
    ``sq_i = x_i * x_i``.  An order that finishes the first reduction before
    touching the second holds every leaf at once; a good one squares each
    leaf right after computing it.
    """
    dsk: dict = {}
    xs, sqs = [], []
    for i in range(n_leaves):
        dsk[("x", i)] = (operator.neg, i)
        dsk[("sq", i)] = (operator.mul, ("x", i), ("x", i))
        xs.append(("x", i))
        sqs.append(("sq", i))
    s1 = _reduce_pairwise(dsk, xs, "sum-x")
    s2 = _reduce_pairwise(dsk, sqs, "sum-sq")
    dsk["moments"] = (operator.add, s1, s2)
    return dsk, ["moments"]


def dask_array_graph(kind: str) -> Graph:
    """Graphs dask.array builds (dask's own task spec), unoptimised.

    ``kind``: "x+x.T" (``(x + x.T).sum()``: a transpose pairs distant
    blocks), "mean-std" (``x.mean() + x.std()``: reductions sharing inputs),
    "map_overlap" (a halo exchange, then a sum).  Needs dask and numpy.
    """
    import dask.array as da
    from dask.core import flatten

    x = da.ones((400, 400), chunks=(20, 20))
    if kind == "x+x.T":
        arr = (x + x.T).sum()
    elif kind == "mean-std":
        arr = x.mean() + x.std()
    elif kind == "map_overlap":
        arr = x.map_overlap(lambda b: b + 1, depth=1, boundary="none").sum()
    else:
        raise ValueError(f"unknown dask_array_graph kind {kind!r}")
    return dict(arr.__dask_graph__()), list(flatten(arr.__dask_keys__()))


# name -> builder; the graphs bench_order.py compares dask's and localsched's order on.
ORDER_GRAPHS: dict[str, Callable[[], Graph]] = {
    "tree (2,000 leaves)": lambda: tree_reduction(2_000),
    "chain (10,000)": lambda: chain(10_000),
    "100 chains x 50 + tree": lambda: chains_then_reduction(100, 50, tree=True),
    "100 chains x 50 + sum": lambda: chains_then_reduction(100, 50, tree=False),
    "stencil 40 x 40": lambda: stencil(40, 40),
    "blocked matmul 8x8": lambda: blocked_matmul(8),
    "blocked matmul 8x8 + sum": lambda: blocked_matmul(8, reduce=True),
    "two reductions, shared leaves (1,000)": lambda: shared_leaves_two_reductions(1_000),
    "dask.array (x + x.T).sum()": lambda: dask_array_graph("x+x.T"),
    "dask.array x.mean() + x.std()": lambda: dask_array_graph("mean-std"),
    "dask.array map_overlap(...).sum()": lambda: dask_array_graph("map_overlap"),
}


# -- the shapes people build (bench_shapes.py) ---------------------------------
#
# Each builder takes a ``TaskKind``: the function of a task that makes a
# value from an int (``leaf``) and of one that combines results (``combine``,
# any number of int arguments).  Tiny tasks are builtins (``operator.neg``,
# ``max``); the others spin a Python loop for about 10 µs or 1 ms first, so
# they hold the GIL as pure-Python work does.


def spin(loops: int, *xs: int) -> int:
    """About ``loops`` iterations of pure Python, then the max of ``xs``
    (``-loops`` when there are none): a task of measured size."""
    n = 0
    for _ in range(loops):
        n += 1
    return max(xs) if xs else -n


class TaskKind:
    """How heavy a shape's tasks are: ``loops`` of ``spin`` (0: builtins).

    ``leaf(i)`` makes a value, ``step(x)`` transforms one, ``combine(*xs)``
    combines two or more."""

    def __init__(self, name: str, loops: int):
        self.name = name
        self.loops = loops
        if loops:
            import functools

            self.leaf = self.step = self.combine = functools.partial(spin, loops)
        else:  # (one input: ``step``; two or more: ``combine``)
            self.leaf, self.step, self.combine = operator.neg, operator.neg, max

    def __repr__(self) -> str:
        return f"TaskKind({self.name!r}, {self.loops})"


# ~10 µs and ~1 ms of Python on this machine's cores (a loop step ~25 ns);
# bench_shapes.py prints what a task really took.
KINDS = {"tiny": TaskKind("tiny", 0), "10us": TaskKind("10us", 300),
         "1ms": TaskKind("1ms", 30_000)}


def shape_tree(kind: TaskKind, n_leaves: int) -> Graph:
    """A binary tree reduction: 2n-1 tasks."""
    dsk = {("leaf", i): (kind.leaf, i) for i in range(n_leaves)}
    return dsk, [_reduce_pairwise(dsk, list(dsk), "sum", kind.combine)]


def shape_chain(kind: TaskKind, length: int) -> Graph:
    """One linear chain."""
    dsk: dict = {("chain", 0): (kind.leaf, 0)}
    for i in range(1, length):
        dsk[("chain", i)] = (kind.step, ("chain", i - 1))
    return dsk, [("chain", length - 1)]


def shape_fan_in(kind: TaskKind, n: int) -> Graph:
    """``[delayed(f)(x) for x in items]`` then one ``sum`` of them all."""
    dsk: dict = {("x", i): (kind.leaf, i) for i in range(n)}
    dsk["total"] = (sum, [("x", i) for i in range(n)])
    return dsk, ["total"]


def shape_outputs(kind: TaskKind, n: int) -> Graph:
    """``dask.compute(*[delayed(f)(x) for x in items])``: n independent outputs."""
    dsk = {("x", i): (kind.leaf, i) for i in range(n)}
    return dsk, list(dsk)


def shape_bag(kind: TaskKind, partitions: int, arity: int = 8) -> Graph:
    """A bag's ``map(...).sum()``: a partition task and a map task each,
    then an ``arity``-ary reduction tree over the mapped partitions."""
    dsk: dict = {}
    level = []
    for i in range(partitions):
        dsk[("part", i)] = (kind.leaf, i)
        dsk[("map", i)] = (kind.step, ("part", i))
        level.append(("map", i))
    depth = 0
    while len(level) > 1:
        depth += 1
        nxt = []
        for j in range(0, len(level), arity):
            k = ("agg", depth, j // arity)
            group = level[j:j + arity]
            dsk[k] = (kind.combine if len(group) > 1 else kind.step, *group)
            nxt.append(k)
        level = nxt
    return dsk, level


def shape_shuffle(kind: TaskKind, n: int, stages: int) -> Graph:
    """An all-to-all shuffle, ``stages`` times: each of n partitions is split
    in n pieces (one task each), each new partition gathers its n pieces."""
    dsk: dict = {("p", 0, i): (kind.leaf, i) for i in range(n)}
    for s in range(1, stages + 1):
        for i in range(n):
            for j in range(n):
                dsk[("split", s, i, j)] = (kind.step, ("p", s - 1, i))
        for j in range(n):
            dsk[("p", s, j)] = (kind.combine, *[("split", s, i, j) for i in range(n)])
    return dsk, [("p", stages, j) for j in range(n)]


def shape_stencil(kind: TaskKind, width: int, steps: int) -> Graph:
    """A 1-D stencil over time (3 inputs each), then one ``sum`` of the last row."""
    dsk: dict = {("s", 0, i): (kind.leaf, i) for i in range(width)}
    for t in range(1, steps):
        for i in range(width):
            lo, hi = max(0, i - 1), min(width - 1, i + 1)
            dsk[("s", t, i)] = (kind.combine, *[("s", t - 1, j) for j in range(lo, hi + 1)])
    dsk["stencil-total"] = (sum, [("s", steps - 1, i) for i in range(width)])
    return dsk, ["stencil-total"]


# name -> (builder, full size, size for 1 ms tasks); the eight shapes
# (fan-in with ~10 µs tasks is the fan-in row of the 10us kind).
SHAPES: dict[str, tuple[Callable, tuple, tuple]] = {
    "tree 100k": (shape_tree, (50_000,), (500,)),
    "chain 5k": (shape_chain, (5_000,), (500,)),
    "fan-in 5k + sum": (shape_fan_in, (5_000,), (1_000,)),
    "5k outputs": (shape_outputs, (5_000,), (1_000,)),
    "bag 2000 parts, 8-ary": (shape_bag, (2_000,), (400,)),
    "shuffle 48x48 x3": (shape_shuffle, (48, 3), (12, 3)),
    "stencil 64x48": (shape_stencil, (64, 48), (32, 24)),
}
