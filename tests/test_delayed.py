"""The small lazy front: delayed and compute."""

from __future__ import annotations

from operator import add

import pytest

import localsched
from localsched import delayed


def inc(x):
    return x + 1


def test_delayed_builds_a_graph_and_computes():
    x = delayed(inc)(1)
    y = delayed(add)(x, 10)
    assert set(y.dask) == {x.key, y.key}
    assert y.__dask_keys__() == [y.key]
    assert y.compute() == 12 and y.compute(scheduler="sync") == 12
    assert x.key.startswith("inc-") and repr(x).startswith("Delayed('inc-")


def test_lazy_values_inside_containers_and_kwargs():
    x = delayed(inc)(1)

    def f(items, *, scale, opts):
        return sum(items) * scale + opts["bonus"]

    y = delayed(f)([x, x, 3], scale=x, opts={"bonus": x})
    assert y.compute() == (2 + 2 + 3) * 2 + 2


def test_literals_are_never_taken_for_tasks_or_keys():
    x = delayed(inc)(1)
    # A string equal to x's key, and a tuple that looks like a task.
    assert delayed(lambda a, b: (a, b))(x.key, (len, [1])).compute() == (x.key, (len, [1]))
    assert delayed((len, [1, 2])).compute() == (len, [1, 2])


def test_operators_and_getitem():
    a, b = delayed(3), delayed(4)
    assert (a * b + 1 - a).compute() == 10
    assert (2 ** a).compute() == 8
    assert (-a).compute() == -3
    assert delayed([10, 20])[1].compute() == 20
    assert delayed({"k": 5})["k"].compute() == 5
    with pytest.raises(TypeError, match="truth"):
        bool(a)


def test_compute_shares_work_and_keeps_structure():
    calls = []

    def tracked(v):
        calls.append(v)
        return v

    x = delayed(tracked)(7)
    assert localsched.compute(x, {"again": [x]}, "plain", scheduler="sync") == (
        7, {"again": [7]}, "plain")
    assert calls == [7]
    assert localsched.compute(1, 2) == (1, 2)


def test_long_chain_builds_in_linear_time():
    x = delayed(0)
    for _ in range(20_000):
        x = delayed(inc)(x)
    assert x.compute(scheduler="sync") == 20_000


def test_compute_passes_options_and_rejects_unknown_ones():
    x = delayed(inc)(1)
    assert x.compute(scheduler="threads", num_workers=1) == 2
    with pytest.raises(TypeError, match="'num_worker'.*'num_workers'"):
        x.compute(num_worker=1)
    assert x.compute(bogus=1) == 2  # meant for some other scheduler: ignored, as dask does
