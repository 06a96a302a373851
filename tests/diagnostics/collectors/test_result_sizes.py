"""The size of a result, its contents included.

A bag partition is a list of records, a groupby's output a dict of lists,
a delayed function's a tuple of arrays: what such a result holds is in its
items, not in the list's own header.  The report's memory panel, the
dashboard's held bytes and the memory budget all read one size
(``metrics.sizeof``); these tests hold it to the bytes the result really
holds, on every scheduler (sizes are measured where the result lives).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import localsched
from localsched import metrics

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module


def _strings(n):
    return [f"record-{i:06d}-" + "x" * 80 for i in range(n)]


def _arrays(n):
    return [np.full(25_000, i, dtype=np.float64) for i in range(n)]  # 200 kB each


def _records(n):
    return [{"id": i, "name": f"n{i:05d}", "tags": ["a", "b"]} for i in range(n)]


def _true_size(value, seen=None) -> int:
    """Every object reachable through containers counted once (the truth
    the estimate is held to)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return value.nbytes
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(_true_size(k, seen) + _true_size(v, seen) for k, v in value.items())
    elif isinstance(value, (list, tuple, set, frozenset)):
        size += sum(_true_size(v, seen) for v in value)
    return size


CASES = {
    "list of strings": lambda: _strings(20_000),
    "list of arrays": lambda: _arrays(20),
    "tuple of arrays": lambda: tuple(_arrays(8)),
    "list of records": lambda: _records(5_000),
    "dict of lists": lambda: {f"k{i}": list(range(i * 10, i * 10 + 500)) for i in range(200)},
    "set of strings": lambda: set(_strings(5_000)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_container_is_sized_with_its_items(case):
    value = CASES[case]()
    truth = _true_size(value)
    assert 0.8 * truth <= metrics.sizeof(value) <= 1.25 * truth, (case, truth)


def test_sizes_are_bounded_work_and_never_an_error():
    loop: list = [1, 2]
    loop.append(loop)  # (a list that holds itself: sized, not followed forever)
    assert metrics.sizeof(loop) >= sys.getsizeof(loop)

    class Broken:
        nbytes = property(lambda self: 1 / 0)
    assert metrics.sizeof([Broken(), Broken()]) >= sys.getsizeof([None, None])
    assert metrics.sizeof(Broken()) is None  # (unknown, as ``nbytes`` says)
    deep = [[[[[[np.zeros(1000)]]]]]]
    assert metrics.sizeof(deep) >= sys.getsizeof(deep)
    assert metrics.sizeof(7) == sys.getsizeof(7)
    assert metrics.sizeof(np.zeros(1000)) == 8000


def _make(case, i):
    return CASES[case]()


@pytest.mark.parametrize("case", ["list of arrays", "list of records"])
def test_the_reports_memory_counts_what_results_hold(scheduler, case):
    """The report's peak (results held at once) is the results' real bytes,
    measured where they live: on processes in the worker."""
    name, get = scheduler
    dsk = {("part", i): (_make, case, i) for i in range(3)}
    dsk["count"] = (len, [("part", i) for i in range(3)])
    with localsched.performance_report(None, samples=False) as report:
        get(dsk, "count")
    truth = 3 * _true_size(CASES[case]())
    peak = report.data.memory_peak()
    assert peak is not None and 0.8 * truth <= peak.bytes <= 1.25 * truth, (name, peak.bytes,
                                                                            truth)
