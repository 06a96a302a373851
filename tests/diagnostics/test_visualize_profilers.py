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
    html = out.read_text(encoding="utf-8")
    assert title in html
    assert layout is not None


def test_package_visualize_stacks_all_three(tmp_path):
    with Profiler() as prof, ResourceProfiler(dt=0.05) as rprof, CacheProfiler() as cprof:
        get(DSK, "total")
    out = tmp_path / "all.html"
    visualize([prof, rprof, cprof], filename=str(out), show=False)
    html = out.read_text(encoding="utf-8")
    assert all(t in html for t in ("Task stream", "Resources", "Cache"))


# --------------------------------------------------------------------------
# dask's visualize API, as dask's own tests call it (issue 7.4)


def test_visualize_one_profiler_returns_its_figure_with_the_given_settings():
    import warnings

    from bokeh.models import HoverTool

    with Profiler() as prof:
        get(DSK, "total")
    fig = prof.visualize(width=500, height=300, tools="hover", title="Not the default",
                         show=False, save=False)
    assert (fig.width, fig.height, fig.title.text) == (500, 300, "Not the default")
    assert len(fig.tools) == 1 and isinstance(fig.tools[0], HoverTool)
    prof.clear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        prof.visualize(show=False, save=False)
    assert not record


def test_visualize_several_titles_the_top_and_labels_time_once():
    with ResourceProfiler(dt=0.01) as rprof, Profiler() as prof:
        get(DSK, "total")
    grid = visualize([prof, rprof], label_size=50, title="Not the default", show=False,
                     save=False)
    top, bottom = [child[0] for child in grid.children]
    assert top.title.text == "Not the default" and bottom.title is None
    assert top.xaxis[0].axis_label is None and bottom.xaxis[0].axis_label == "Time (s)"


def test_file_path_still_saves_with_a_future_warning(tmp_path):
    with Profiler() as prof:
        get(DSK, "total")
    path = tmp_path / "old.html"
    with pytest.warns(FutureWarning, match="file_path keyword argument is deprecated"):
        prof.visualize(show=False, file_path=str(path))
    assert "Task stream" in path.read_text(encoding="utf-8")


def test_cache_axis_names_the_metric_as_dask_does():
    with CacheProfiler(metric=len, metric_name="non-standard") as cprof:
        get({"a": [1, 2], "b": (list, "a")}, "b")
    fig = cprof.visualize(show=False, save=False)
    assert fig.axis[1].axis_label == "Cache Size (non-standard)"
    assert cprof._metric_name == "non-standard"  # dask's attribute name


def test_profilers_time_their_with_block_on_dasks_clock():
    from timeit import default_timer

    for make in (Profiler, CacheProfiler, lambda: ResourceProfiler(dt=0.01)):
        with make() as p:
            inside = default_timer()
            get(DSK, "total")
        assert p.start_time < inside < p.end_time


def test_dask_palette_names_colour_the_groups():
    from bokeh.palettes import Viridis3

    # three task groups under dask's naming rule ("inc-1" and "inc-2" are one: "inc")
    dsk = {"a": 1, "inc-1": (inc, "a"), "dec-1": (inc, "inc-1"), "total": (add, "inc-1", "dec-1")}
    with Profiler() as prof:
        get(dsk, "total")
    fig = prof.visualize(palette="Viridis", show=False, save=False)
    data = fig.select_one({"name": "tasks"}).data_source.data
    assert len(set(data["group"])) == 3
    assert set(data["color"]) == set(Viridis3)  # one colour per group
    with pytest.raises(ValueError, match="palette"):
        prof.visualize(palette="NoSuchPalette", show=False, save=False)
