"""Each profiler's own ``visualize()`` and the package-level one, for real."""

from operator import add

import pytest

from localsched.diagnostics import (
    CacheData,
    CacheProfiler,
    Profiler,
    ResourceData,
    ResourceProfiler,
    TaskData,
    visualize,
)
from localsched.threaded import get


def inc(x):
    return x + 1


DSK = {"a": 1, "inc-1": (inc, "a"), "inc-2": (inc, "inc-1"), "total": (add, "inc-1", "inc-2")}


@pytest.mark.parametrize("make, title, record_type", [
    (Profiler, "Task stream", TaskData),
    (lambda: ResourceProfiler(dt=0.05), "Resources", ResourceData),
    (CacheProfiler, "Cache", CacheData),
])
def test_each_profiler_plots_itself(tmp_path, make, title, record_type):
    with make() as p:
        assert get(DSK, "total") == 5
    assert p.record_type is record_type and p.results
    out = tmp_path / "one.html"
    layout = p.visualize(filename=str(out), show=False)
    html = out.read_text()
    assert title in html
    assert layout is not None


def test_package_visualize_stacks_all_three(tmp_path):
    with Profiler() as prof, ResourceProfiler(dt=0.05) as rprof, CacheProfiler() as cprof:
        get(DSK, "total")
    out = tmp_path / "all.html"
    visualize([prof, rprof, cprof], filename=str(out), show=False)
    html = out.read_text()
    assert all(t in html for t in ("Task stream", "Resources", "Cache"))
