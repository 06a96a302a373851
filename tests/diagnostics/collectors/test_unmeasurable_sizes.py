"""A diagnostic never breaks a computation that works without it: a result
whose size cannot be measured has an unknown size (noted), never an error."""

from __future__ import annotations

import math
import sys
import weakref

import pytest

from localsched.diagnostics import CacheProfiler
from localsched.diagnostics.report import RunData, performance_report
from localsched.metrics import nbytes

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module


class Gone:
    pass


def dead_proxy():
    return weakref.proxy(Gone())  # (its referent is gone at once)


class SizeRaises:
    def __sizeof__(self):
        raise RuntimeError("no size for you")


class NbytesRaises:
    @property
    def nbytes(self):
        raise RuntimeError("no nbytes for you")


class NbytesNonsense:
    nbytes = float("nan")


def make(kind):
    return kind()


def used(x):
    return 1


def graph(kind):
    return {"odd": (make, kind), "total": (used, "odd")}


#: (value maker, whether it crosses processes: a dead proxy cannot be pickled)
KINDS = {"dead-proxy": (dead_proxy, False), "sizeof-raises": (SizeRaises, True),
         "nbytes-raises": (NbytesRaises, True), "nbytes-nan": (NbytesNonsense, True)}


def kinds_for(scheduler_name):
    return [k for k, (_, portable) in KINDS.items() if portable or scheduler_name != "processes"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_nbytes_of_an_unmeasurable_value_is_unknown(kind):
    assert nbytes(KINDS[kind][0]()) is None
    assert nbytes(b"abc") == sys.getsizeof(b"abc")


def test_cache_profiler_sizes_unknown_not_fatal(scheduler):
    name, get = scheduler
    for kind in kinds_for(name):
        for metric in ("nbytes", sys.getsizeof):
            with CacheProfiler(metric=metric) as cprof:
                assert get(graph(KINDS[kind][0]), "total") == 1
            sizes = {r.key: r.metric for r in cprof.results}
            # (a metric function of the user's measures what it can: only a
            # raising one leaves the size unknown)
            unknown = metric == "nbytes" or kind == "sizeof-raises"
            assert math.isnan(sizes["odd"]) == unknown, (kind, metric, sizes)
            assert sizes["total"] > 0


def test_performance_report_notes_unknown_sizes(scheduler, tmp_path):
    name, get = scheduler
    for kind in kinds_for(name):
        path = tmp_path / f"{kind}.html"
        with performance_report(str(path), samples=False, json=str(tmp_path / "r.json"),
                                trace=str(tmp_path / "t.json")) as report:
            assert get(graph(KINDS[kind][0]), "total") == 1
        assert report.data is not None
        sizes = {r.key: r.metric for r in report.data.cache}
        assert math.isnan(sizes["odd"]) and sizes["total"] > 0
        assert "1 result of unknown size" in path.read_text(encoding="utf-8")
        again = RunData.load_json(tmp_path / "r.json")
        assert math.isnan({r.key: r.metric for r in again.cache}["odd"])


def test_dashboard_memory_sizes_unknown_not_fatal(scheduler):
    pytest.importorskip("bokeh")
    from localsched.diagnostics.live import Dashboard

    name, get = scheduler
    dash = Dashboard("127.0.0.1:0", memory=True, quiet=True)
    try:
        for kind in kinds_for(name):
            with dash:
                assert get(graph(KINDS[kind][0]), "total") == 1
    finally:
        dash.close()
