"""dask's bag and delayed optimizers, done linearly (localsched/plan/dask_optimizers.py):
the graph is the one dask's own make, on every kind of partition and graph,
and its cost grows with the tasks, not with the items of literal partitions."""

from __future__ import annotations

import collections
import operator

import pytest

import localsched
from localsched.plan import dask_optimizers

dask = pytest.importorskip("dask")
db = pytest.importorskip("dask.bag")
task_spec = pytest.importorskip("dask._task_spec")
delayed = dask.delayed
Delayed = pytest.importorskip("dask.delayed").Delayed


class _Captured(Exception):
    pass


def expression(*collections_):
    """What ``dask.compute`` hands a scheduler for ``collections_``."""
    box = []

    def get(dsk, keys, **kwargs):
        box.append(dsk)
        raise _Captured

    with pytest.raises(_Captured):
        dask.compute(*collections_, scheduler=get)
    return box[0]


def both_graphs(*collections_) -> tuple[dict, dict | None]:
    """(dask's own graph, the primed one; None if not primed)."""
    expr = expression(*collections_)
    theirs = dict(expr.__dask_graph__())
    del expr.__dict__["_optimized_dsk"]
    dask_optimizers.prime(expr)
    if "_optimized_dsk" not in expr.__dict__:
        return theirs, None
    return theirs, dict(expr.__dask_graph__())


def assert_same_graph(*collections_, primed: bool = True) -> None:
    theirs, ours = both_graphs(*collections_)
    if not primed:
        assert ours is None
        return
    assert ours is not None, "not primed"
    assert set(theirs) == set(ours)
    for k, node in theirs.items():
        assert ours[k] == node, k
        assert type(ours[k]) is type(node), k


Point = collections.namedtuple("Point", "x y")


def bag_of(partitions: list) -> db.Bag:
    """A bag whose graph holds ``partitions`` as literal data."""
    name = "literal-bag"
    dsk = {(name, i): p for i, p in enumerate(partitions)}
    return db.Bag(dsk, name, len(partitions))


@pytest.mark.parametrize("partitions", [
    [[1, 2, 3], [4.5, float("nan"), True, None, b"x", 1j]],
    [["a", "b"], []],
    [("t", 1), [("nested", [1]), [2]]],
    [[{"id": 1}, {"id": 2}], [Point(1, 2)]],
    [frozenset({1, 2}), {3, 4}],
    [["literal-bag"], ("literal-bag", 0)],  # (items and a tuple that name keys)
    [[("literal-bag", 1)], [0]],  # (an item that is another partition's key)
], ids=["scalars", "strings", "tuples-nested", "dicts-namedtuples", "sets", "key-names",
        "item-is-a-key"])
def test_a_bag_of_any_partitions_gets_dask_s_own_graph(partitions):
    bag = bag_of(partitions)
    assert_same_graph(bag.map(str).count())
    assert_same_graph(bag)
    assert bag.map(str).compute(scheduler=localsched.get_sync) == \
        bag.map(str).compute(scheduler="sync")


def test_bags_of_every_common_kind_get_dask_s_own_graph():
    b = db.from_sequence(range(1000), npartitions=10)
    words = db.from_sequence(["a b", "c d e", ""] * 50, npartitions=4)
    for coll in (b.map(operator.neg).filter(bool).sum(), b.foldby(lambda x: x % 3, operator.add),
                 b.distinct(), words.str.split().flatten().frequencies(),
                 b.map_partitions(len).max(), b.count(),
                 db.from_delayed([delayed(list)(range(i)) for i in range(4)]).sum()):
        assert_same_graph(coll)
    assert_same_graph(b.sum(), words.count())  # (two collections at once)


def test_delayed_graphs_get_dask_s_own_graph():
    chunks = [delayed(operator.neg)(i) for i in range(200)]
    assert_same_graph(delayed(sum)(chunks))
    shared = delayed(operator.add, pure=True)(1, 2)
    assert_same_graph(delayed(operator.mul)(shared, shared), chunks[0])
    assert_same_graph(*chunks[:5])


def test_annotated_fused_and_legacy_delayed_graphs_are_dask_s_own():
    # (dask's own optimizer makes them: the layers keep their annotations)
    with dask.annotate(priority=3):
        annotated = delayed(sum)([delayed(operator.neg)(i) for i in range(5)])
    assert_same_graph(annotated)
    expr = expression(annotated)
    dask_optimizers.prime(expr)
    assert [sorted(layer.annotations or {}) for layer in expr._optimized_dsk.layers.values()] \
        == [["priority"]] * 6
    chain = delayed(operator.neg)(delayed(operator.neg)(1))
    with dask.config.set({"optimization.fuse.delayed": True}):
        assert_same_graph(chain)
    assert_same_graph(Delayed("out", {"in": 1, "out": (operator.neg, "in")}))


def test_collections_it_does_not_know_are_left_alone():
    da = pytest.importorskip("dask.array")
    assert_same_graph(da.ones(10, chunks=5).sum(), primed=False)
    assert_same_graph(db.from_sequence([1, 2]).sum(), dask.delayed(1), primed=True)


def test_results_are_dask_s_on_every_scheduler():
    b = db.from_sequence(range(10_000), npartitions=20)
    chunks = [delayed(operator.neg)(i) for i in range(300)]
    wanted = dask.compute(b.map(operator.neg).sum(), delayed(sum)(chunks), scheduler="sync")
    for get in (localsched.get_sync, localsched.threaded.get, localsched.multiprocessing.get):
        assert dask.compute(b.map(operator.neg).sum(), delayed(sum)(chunks),
                            scheduler=get) == wanted


def test_a_bag_s_graph_costs_per_task_not_per_item(monkeypatch):
    # (dask's conversion visits every item of every literal partition: here
    # 100,000 items in 20 partitions; primed, it sees each task once)
    visits = [0]
    convert = task_spec.convert_legacy_task

    def counted(*args, **kwargs):
        visits[0] += 1
        return convert(*args, **kwargs)

    monkeypatch.setattr(task_spec, "convert_legacy_task", counted)
    bag = db.from_sequence(range(100_000), npartitions=20).map(operator.neg).sum()
    assert bag.compute(scheduler=localsched.get_sync) == -sum(range(100_000))
    tasks = len(dict(bag.__dask_graph__()))
    assert visits[0] < 20 * tasks, (visits[0], tasks)
