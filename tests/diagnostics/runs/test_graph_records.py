"""The dependencies a recorded run keeps, once per computation."""

from __future__ import annotations

from operator import add

import pytest

from localsched.diagnostics import Profiler
from localsched.diagnostics.report import RunData


def test_each_scheduler_keeps_the_graph_of_each_computation(scheduler):
    name, get = scheduler
    dsk = {"x": 1, "a": (add, "x", 1), "b": (add, "a", 1), "c": (add, "a", "b"),
           "unused": (add, "x", 5)}
    with Profiler() as prof:
        assert get(dsk, "c") == 5
        assert get(dsk, "b") == 3
    first, second = prof.graphs
    assert first.workers >= 1 and first.started <= first.finished
    assert first.submitted is not None and first.submitted <= first.started
    ran = [first.keys[p] for p in first.order]
    assert ran[0] == "a" and set(ran) == {"a", "b", "c"}  # ("unused" culled, "x" data)
    deps = {first.keys[p]: {first.keys[d] for d in first.deps[p]} for p in first.order}
    assert deps == {"a": {"x"}, "b": {"a"}, "c": {"a", "b"}}
    assert {second.keys[p] for p in second.order} == {"a", "b"}
    run = RunData.from_profilers([prof])
    assert [g.order for g in RunData.from_json(run.to_json()).graphs] == \
        [first.order, second.order]
    cp = run.critical_path()
    assert cp.keys == ["a", "b", "c", "a", "b"]  # (the two computations, one after the other)


def test_dasks_own_scheduler_keeps_the_dependencies_without_an_order():
    pytest.importorskip("dask")
    import dask.local

    with Profiler() as prof:
        dask.local.get_sync({"a": (add, 1, 1), "b": (add, "a", 1)}, "b")
    (graph,) = prof.graphs
    assert graph.order is None and graph.submitted is None
    deps = {graph.keys[i]: {graph.keys[d] for d in ds} for i, ds in enumerate(graph.deps)}
    assert deps["b"] == {"a"} and deps["a"] == set()
    assert RunData.from_profilers([prof]).critical_path().keys == ["a", "b"]
