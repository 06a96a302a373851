"""The task spec and the static order."""

from __future__ import annotations

from operator import add, neg

import pytest

from localsched.local import get_sync
from localsched.plan.graph import CycleError, compile_graph, execute, is_task
from localsched.plan.order import order, peak_live


def test_keys_are_recognised_only_where_they_are_keys():
    dsk = {
        "a": 1,
        "lit": (str.upper, "not-a-key"),
        "unhashable": (len, [[1, 2], {"x": [3]}]),
        "tuple-literal": (len, ("a", "zzz")),  # contains a key: walked
    }
    g = compile_graph(dsk)
    deps = {g.keys[i]: {g.keys[j] for j in d} for i, d in enumerate(g.deps)}
    assert deps == {"a": set(), "lit": set(), "unhashable": set(), "tuple-literal": {"a"}}
    assert get_sync(dsk, ["lit", "unhashable", "tuple-literal"]) == ("NOT-A-KEY", 2, 2)


def test_data_and_aliases():
    g = compile_graph({"a": (1, 2), "b": "a", "c": "not a key", "d": ()})
    assert g.is_data == [True, False, True, True]
    assert execute(g.specs[1], {"a": (1, 2)}) == (1, 2)


def test_a_self_alias_is_data_and_a_self_reference_is_a_cycle():
    assert get_sync({"a": "a"}, "a") == "a"
    with pytest.raises(CycleError, match="'a' -> 'a'"):
        get_sync({"a": (neg, "a")}, "a")


def test_is_task():
    assert is_task((add, 1, 2)) and not is_task(("add", 1)) and not is_task([add, 1])


def test_any_mapping_and_dask_graph_objects_are_accepted():
    from collections import ChainMap

    class Lazy:
        def __dask_graph__(self):
            return {"x": (add, 1, 2)}

    assert get_sync(ChainMap({"a": 1}, {"b": (neg, "a")}), "b") == -1
    assert get_sync(Lazy(), "x") == 3
    with pytest.raises(TypeError, match="Mapping or have __dask_graph__"):
        get_sync([("x", 1)], "x")


# -- ordering ---------------------------------------------------------------


def tree(n_leaves):
    dsk = {("l", 0, i): (neg, i) for i in range(n_leaves)}
    level, width = 0, n_leaves
    while width > 1:
        for j in range(0, width, 2):
            args = [("l", level, j)] + ([("l", level, j + 1)] if j + 1 < width else [])
            dsk[("l", level + 1, j // 2)] = (add, *args) if len(args) == 2 else (neg, *args)
        level, width = level + 1, (width + 1) // 2
    return dsk, ("l", level, 0)


def chains_then_reduce(n_chains, length):
    dsk = {}
    for c in range(n_chains):
        dsk[("c", c, 0)] = (neg, c)
        for i in range(1, length):
            dsk[("c", c, i)] = (neg, ("c", c, i - 1))
    dsk["total"] = (sum, [("c", c, length - 1) for c in range(n_chains)])
    return dsk, "total"


def stencil(width, steps):
    dsk = {("s", 0, i): (neg, i) for i in range(width)}
    for t in range(1, steps):
        for i in range(width):
            nb = [("s", t - 1, j) for j in (i - 1, i, i + 1) if 0 <= j < width]
            dsk[("s", t, i)] = (sum, nb)
    dsk["out"] = (sum, [("s", steps - 1, i) for i in range(width)])
    return dsk, "out"


def our_peak(dsk, out):
    g = compile_graph(dsk)
    return peak_live(order(g.deps, g.is_data, [g.index[out]]), g.deps)


def dask_peak(dsk, out):
    dask_order = pytest.importorskip("dask.order")
    g = compile_graph(dsk)
    prio = dask_order.order(dsk)
    run = sorted((i for i in range(len(g.keys)) if not g.is_data[i]),
                 key=lambda i: prio[g.keys[i]])
    return peak_live(run, g.deps)


def test_tree_reduction_keeps_memory_logarithmic():
    dsk, out = tree(1024)
    assert our_peak(dsk, out) <= 11 + 2  # one pending result per level, plus two


def test_order_is_topological_and_culls():
    dsk, out = stencil(10, 10)
    dsk["unused"] = (neg, 1)
    g = compile_graph(dsk)
    run = order(g.deps, g.is_data, [g.index[out]])
    pos = {i: p for p, i in enumerate(run)}
    assert g.index["unused"] not in pos
    assert len(run) == len(dsk) - 1
    for i in run:
        assert all(pos[d] < pos[i] for d in g.deps[i])


def tree_over(leaves, dsk, name):
    level, depth = leaves, 0
    while len(level) > 2:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            k = (name, depth, j)
            dsk[k] = (add, level[j], level[j + 1])
            nxt.append(k)
        if len(level) % 2:
            nxt.append(level[-1])
        level, depth = nxt, depth + 1
    return (add, *level) if len(level) == 2 else (neg, level[0])


def interleaved_reductions(n):
    """Two tree reductions over the same leaves: a walk that finishes one
    reduction first would hold every leaf for the other."""
    dsk = {("x", i): (neg, i) for i in range(n)}
    dsk["a"] = tree_over([("x", i) for i in range(n)], dsk, "ta")
    dsk["b"] = tree_over([("x", i) for i in range(n)], dsk, "tb")
    dsk["out"] = (add, "a", "b")
    return dsk, "out"


def test_shared_inputs_are_released_by_running_their_last_consumer_early():
    dsk, out = interleaved_reductions(512)
    assert our_peak(dsk, out) <= 2 * 10 + 4  # both trees' pending levels, not 512 leaves


@pytest.mark.parametrize("build", [lambda: tree(4096), lambda: chains_then_reduce(50, 40),
                                   lambda: stencil(30, 30), lambda: interleaved_reductions(512)])
def test_peak_live_results_no_worse_than_dask(build):
    dsk, out = build()
    assert our_peak(dsk, out) <= dask_peak(dsk, out)


def test_hungriest_branch_first():
    # 'deep' needs three live results at once, 'flat' one: deep goes first,
    # so only one result waits while the other branch runs.
    dsk = {
        "x1": (neg, 1), "x2": (neg, 2), "x12": (add, "x1", "x2"),
        "x3": (neg, 3), "x4": (neg, 4), "x34": (add, "x3", "x4"),
        "deep": (add, "x12", "x34"),
        "flat": (neg, 5),
        "root": (add, "flat", "deep"),
    }
    g = compile_graph(dsk)
    run = [g.keys[i] for i in order(g.deps, g.is_data, [g.index["root"]])]
    assert run.index("deep") < run.index("flat")


def _args(*xs):
    return xs


def test_a_task_of_several_keys_compiles_as_the_general_path_does():
    # The common shapes have fast paths in ``compile_graph``; what they
    # make is what the general path (``_compile_task``) makes.
    from localsched.plan.graph import _compile_task

    dsk = {"a": 1, "b": 2, ("c", 0): 3,
           "three": (_args, "a", "b", ("c", 0)),
           "repeated": (_args, "a", "b", "a", "b"),
           "mixed": (_args, "a", "b", 7),
           "nested": (_args, "a", "b", (neg, "a")),
           "unhashable": (_args, "a", "b", [1, "a"]),
           "tuple-literal": (_args, "a", "b", ("a", 9)),
           "first-again": (_args, "a", "b", "a"),
           "twice-first": (_args, "a", "a", "b"),
           "twice-last": (_args, "b", "a", "a"),
           "thrice": (_args, "a", "a", "a"),
           "five": (_args, "a", "b", ("c", 0), "b", "a"),
           "five-mixed": (_args, "a", "b", ("c", 0), "b", 5)}
    g = compile_graph(dsk)
    for k in list(dsk)[3:]:
        i = g.index[k]
        assert (g.specs[i], g.deps[i]) == _compile_task(dsk[k], g.index, k), k
    assert g.deps[g.index["twice-last"]] == (g.index["b"], g.index["a"])
    assert get_sync(dsk, ["twice-last", "thrice", "five-mixed"]) == (
        (2, 1, 1), (1, 1, 1), (1, 2, 3, 2, 5))
    assert get_sync(dsk, ["three", "repeated", "mixed", "nested", "unhashable",
                          "tuple-literal"]) == (
        (1, 2, 3), (1, 2, 1, 2), (1, 2, 7), (1, 2, -1), (1, 2, [1, 1]), (1, 2, (1, 9)))


def test_pushing_dependencies_least_hungry_first_keeps_their_listed_order_on_ties():
    # The release walk pushes a task's dependencies by their need, ties as
    # listed (what ``sorted`` does); two or three are ordered by hand.
    import random

    from localsched.plan.order import _by_need

    rng = random.Random(38)
    for _ in range(3000):
        ds = tuple(rng.sample(range(12), rng.choice([2, 3, 4])))
        need = [rng.randint(0, 3) for _ in range(12)]
        assert list(_by_need(ds, need)) == sorted(ds, key=need.__getitem__), (ds, need)
