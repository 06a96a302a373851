"""dask's fused subgraphs (bag partitions, array chunks' blockwise chains):
their inner order is found once, when the graph is compiled, not by
``dask.order`` each time one runs; results, errors and releases as dask's."""

from __future__ import annotations

import pickle
from operator import add, mul

import pytest

pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")

import dask  # noqa: E402
import dask.base  # noqa: E402
import dask.core  # noqa: E402
import dask.order  # noqa: E402
from dask._task_spec import DataNode, Task, TaskRef, _execute_subgraph  # noqa: E402

import localsched.local  # noqa: E402
import localsched.multiprocessing  # noqa: E402
import localsched.threaded  # noqa: E402
from localsched.plan.fused import FusedSubgraph, fuse  # noqa: E402
from localsched.plan.graph import compile_graph  # noqa: E402

GETS = {
    "sync": localsched.local.get_sync,
    "threads": localsched.threaded.get,
    "processes": localsched.multiprocessing.get,
}


def _fused(key="out", x="x"):
    """``out = (x + 1) * 2`` fused, x given by a TaskRef; and 10 as a DataNode."""
    inner = {
        "plus": Task("plus", add, TaskRef("in"), 1),
        "out": Task("out", mul, TaskRef("plus"), TaskRef("two")),
    }
    return Task(key, _execute_subgraph, inner, "out", ("in", "two"), TaskRef(x),
                DataNode(None, 2))


def test_a_fused_task_runs_as_dask_runs_it():
    node = _fused()
    f = fuse(node, TaskRef, DataNode)
    assert isinstance(f, FusedSubgraph)
    assert f({"x": 4}) == node({"x": 4}) == 10
    assert pickle.loads(pickle.dumps(f))({"x": 5}) == 12  # (process pools ship it)
    # The inner results are dropped after their last inner use.
    assert [(k, set(d)) for k, _, d in f.steps] == [("plus", {"in"}), ("out", {"plus", "two"})]


def test_shapes_it_does_not_know_are_left_as_they_are():
    cycle = {"a": Task("a", add, TaskRef("b"), 1), "b": Task("b", add, TaskRef("a"), 1)}
    missing = {"a": Task("a", add, TaskRef("nowhere"), 1)}
    for node in (
        Task("k", _execute_subgraph, cycle, "a", ()),
        Task("k", _execute_subgraph, missing, "a", ()),
        Task("k", _execute_subgraph, {"a": Task("a", add, 1, 1)}, "nope", ()),
        Task("k", _execute_subgraph, {"a": Task("a", add, 1, 1)}, "a", ("in",), 3),
    ):
        assert fuse(node, TaskRef, DataNode) is node


@pytest.mark.parametrize("scheduler", list(GETS))
def test_bags_and_arrays_with_fused_tasks_give_dasks_results(scheduler):
    get = GETS[scheduler]
    bag = db.from_sequence(range(2_000), npartitions=20)
    freq = bag.map(lambda x: x % 7).filter(lambda x: x > 1).frequencies(sort=True)
    arr = da.ones((40, 40), chunks=(10, 10))
    total = (arr * 2 + 1).sum()
    expected = dask.compute(freq, total, scheduler="sync")
    assert dask.compute(freq, total, scheduler=get) == expected


def test_no_fused_task_calls_dask_order_when_it_runs(monkeypatch):
    calls = []
    real = dask.order.order

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    arr = (da.ones((40, 40), chunks=(10, 10)) + 1).sum()
    expr = dask.base.collections_to_expr([arr]).optimize()
    graph = dict(expr.__dask_graph__())
    keys = list(dask.core.flatten(expr.__dask_keys__()))
    g = compile_graph(graph)
    fused = [s for s in g.specs if isinstance(s[1], FusedSubgraph)]
    assert len(fused) >= 16  # every chunk's chain
    monkeypatch.setattr(dask.order, "order", counting)
    assert localsched.local.get_sync(graph, keys) == (2 * 1600.0,)
    assert calls == []


def test_a_failing_inner_task_raises_its_own_error():
    def boom(x):
        raise ZeroDivisionError(f"boom {x}")

    inner = {"b": Task("b", boom, TaskRef("in"))}
    dsk = {"x": 1, "k": Task("k", _execute_subgraph, inner, "b", ("in",), TaskRef("x"))}
    with pytest.raises(ZeroDivisionError, match="boom 1"):
        localsched.local.get_sync(dsk, "k")
