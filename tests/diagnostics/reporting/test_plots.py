"""The bokeh figures: data they hold, shared time axis, aggregation, HTML, real browser."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psutil
import pytest

from localsched.diagnostics.collectors.records import CacheData, ResourceData, TaskData
from localsched.diagnostics.figures import tasks as figures_tasks
from localsched.diagnostics.reporting import page, plots
from tests.support.platform_marks import needs_browser_driver

try:  # the repository root is on sys.path (python -m pytest), or tests/ is a package
    from tests.support.browser import BrowserError, open_in_chromium, require_chromium
except ImportError:  # pytest put tests/ itself on sys.path
    from tests.support.browser import BrowserError, open_in_chromium, require_chromium

from bokeh.models import GlyphRenderer, HBar, HoverTool, LinearAxis, Range1d, Step

T0 = 1_700_000_000.0  # records hold epoch seconds

# Rendered once Bokeh built every root view and finished painting it.
BOKEH_RENDERED = (
    "window.Bokeh && Object.keys(Bokeh.index).length > 0"
    " && Object.values(Bokeh.index).every((view) => view.has_finished())"
)


def profiler(record_type, results, **attrs):
    return SimpleNamespace(record_type=record_type, results=results, **attrs)


def task_source(fig):
    return fig.select_one({"name": "tasks"}).data_source


def figures_of(layout):
    return [child[0] for child in layout.children]


@pytest.fixture
def small_profile():
    """Three profilers whose earliest records differ: resources start first."""
    tasks = [
        TaskData("load-a1b2c3d4", (len, "abc"), T0 + 1.0, T0 + 2.0, 30),
        TaskData(("inc-ffee0011", 0), (abs, -1), T0 + 1.5, T0 + 3.0, 10),
        TaskData(("inc-ffee0011", 1), (abs, -2), T0 + 2.0, T0 + 2.5, 20),
        TaskData("total-99aa88bb", (sum, ["load-a1b2c3d4"]), T0 + 3.0, T0 + 4.0, 30),
    ]
    resources = [ResourceData(T0 + 0.5 + i, 100.0 + 10 * i, 50.0 * i) for i in range(4)]
    cache = [
        CacheData("load-a1b2c3d4", None, 1, T0 + 2.0, T0 + 4.0),
        CacheData(("inc-ffee0011", 0), None, 1, T0 + 3.0, T0 + 4.0),
        CacheData(("inc-ffee0011", 1), None, 1, T0 + 2.5, T0 + 4.0),
        CacheData("total-99aa88bb", None, 1, T0 + 4.0, T0 + 4.5),
    ]
    return [
        profiler(TaskData, tasks),
        profiler(ResourceData, resources),
        profiler(CacheData, cache, metric_name="tasks"),
    ]


# --------------------------------------------------------------------------
# Importing


def run_python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parents[3], timeout=60)


def test_importing_the_package_does_not_import_bokeh():
    proc = run_python(
        "import sys, localsched, localsched.diagnostics\n"
        "import localsched.diagnostics.collectors.records\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'bokeh'))"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_missing_bokeh_says_how_to_install_it():
    proc = run_python(
        "import sys\n"
        "sys.modules['bokeh'] = None  # makes any import of bokeh fail\n"
        "try:\n"
        "    import localsched.diagnostics.reporting.plots\n"
        "except ImportError as exc:\n"
        "    print('ImportError:', exc)\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert "ImportError:" in proc.stdout and "pip install bokeh" in proc.stdout


# --------------------------------------------------------------------------
# Task stream


def test_task_stream_has_one_bar_per_task_on_its_workers_row(small_profile):
    fig = plots.plot_tasks(small_profile[0].results)
    data = task_source(fig).data
    assert data["key"] == ["load-a1b2c3d4", "('inc-ffee0011', 0)", "('inc-ffee0011', 1)",
                           "total-99aa88bb"]
    assert data["group"] == ["load", "inc", "inc", "total"]
    # workers 10, 20, 30 take rows 0, 1, 2 in sorted order; the hover names
    # them as the axis does
    assert data["row"].tolist() == [2, 0, 1, 2]
    assert fig.yaxis[0].major_label_overrides == {0: "worker 0", 1: "worker 1", 2: "worker 2"}
    assert data["worker"] == ["worker 2", "worker 0", "worker 1", "worker 2"]
    assert list(fig.yaxis[0].ticker.ticks) == [0, 1, 2]
    # x is seconds since the earliest start
    assert data["left"].tolist() == [0.0, 0.5, 1.0, 2.0]
    assert data["right"].tolist() == [1.0, 2.0, 1.5, 3.0]
    assert data["count"].tolist() == [1, 1, 1, 1]
    assert data["task"][0] == "len('abc')"
    assert data["status"][1] == "took 1.5 s"
    assert data["height"].tolist() == [plots.ROW_HEIGHT] * 4
    assert isinstance(fig.select_one({"name": "tasks"}).glyph, HBar)
    assert fig.xaxis[0].axis_label == "Time (s)"


def test_task_stream_colours_by_group_with_a_legend_and_hover(small_profile):
    fig = plots.plot_tasks(small_profile[0].results)
    data = task_source(fig).data
    colour = dict(zip(data["group"], data["color"], strict=False))
    assert len(set(colour.values())) == 3
    assert data["color"][1] == data["color"][2]  # both 'inc'
    labels = [item.label.value for legend in fig.legend for item in legend.items]
    assert labels == ["inc", "load", "total"]
    (hover,) = [tool for tool in fig.tools if type(tool).__name__ == "HoverTool"]
    fields = dict(hover.tooltips)
    assert {"key", "group", "task", "status", "worker"} <= set(fields)


def test_task_stream_palette_sequence_mapping_and_missing_group(small_profile):
    results = small_profile[0].results
    data = task_source(plots.plot_tasks(results, palette=["red", "blue"])).data
    assert dict(zip(data["group"], data["color"], strict=False)) == {"inc": "red", "load": "blue",
                                                       "total": "red"}
    mapping = {"inc": "#000001", "load": "#000002", "total": "#000003"}
    data = task_source(plots.plot_tasks(results, palette=mapping)).data
    assert dict(zip(data["group"], data["color"], strict=False)) == mapping
    with pytest.raises(ValueError, match="total"):
        plots.plot_tasks(results, palette={"inc": "red", "load": "blue"})


def test_huge_task_reprs_are_truncated():
    huge = (sum, list(range(100_000)), "x" * 10_000)
    data = task_source(plots.plot_tasks([TaskData("big-1", huge, 0.0, 1.0, 1)])).data
    assert data["task"][0].startswith("sum([0, 1, 2, 3,")
    assert len(data["task"][0]) <= plots.REPR_LIMIT
    data = task_source(plots.plot_tasks([TaskData("big-1", "y" * 10_000, 0.0, 1.0, 1)])).data
    assert len(data["task"][0]) <= plots.REPR_LIMIT


def test_figure_kwargs_override_defaults_and_typos_fail():
    fig = plots.plot_tasks([], width=321, plot_height=123, title="mine")
    assert (fig.width, fig.height, fig.title.text) == (321, 123, "mine")
    with pytest.raises(AttributeError, match="widht"):
        plots.plot_tasks([], widht=300)


# --------------------------------------------------------------------------
# Aggregation of what is narrower than a pixel


def test_sub_pixel_tasks_become_occupancy_bars_per_pixel_column(monkeypatch):
    monkeypatch.setattr(figures_tasks, "AGGREGATE_ABOVE", 0)
    # x range 0..1000 s over PIXELS=1000 px: one pixel is one second
    assert plots.PIXELS == 1000
    tasks = [
        TaskData(("a", 1), None, 10.0, 10.2, 1),  # \
        TaskData(("a", 2), None, 10.3, 10.5, 1),  #  } column 10: one bar, 0.7 busy
        TaskData(("b", 1), None, 10.6, 10.9, 1),  # /
        TaskData(("b", 2), None, 11.2, 11.4, 1),  # column 11, up to where c starts
        TaskData(("c", 1), None, 11.5, 14.0, 1),  # wider than a pixel: kept as is
        TaskData(("a", 3), None, 10.1, 10.4, 2),  # another worker: its own row
    ]
    fig = plots.plot_tasks(tasks, x_range=Range1d(0, 1000), t0=0.0)
    data = task_source(fig).data
    assert data["count"].tolist() == [3, 1, 1, 1]
    assert data["row"].tolist() == [0, 0, 1, 0]
    assert data["left"].tolist() == [10.0, 11.0, 10.0, 11.5]
    assert data["right"].tolist() == [11.0, 11.5, 11.0, 14.0]
    # height = ROW_HEIGHT x the share of the bar's span the worker was busy
    np.testing.assert_allclose(data["height"] / plots.ROW_HEIGHT, [0.7, 0.2 / 0.5, 0.3, 1.0])
    assert data["group"][0] == "a (2), b (1)"
    assert data["key"][0] == "3 tasks: ('a', 1) \u2026 ('b', 1)"
    assert data["key"][1:] == ["('b', 2)", "('a', 3)", "('c', 1)"]
    assert data["status"][0] == "busy 700 ms in 900 ms"
    # coloured by the group with most time in the bar
    assert data["color"][0] == data["color"][2] != data["color"][3]
    hover = dict(fig.select_one({"type": HoverTool}).tooltips)
    assert "tasks" in hover and "group" in hover


def painted_busy(fig):
    """Per row: the area the task bars paint, in seconds of full-height bar."""
    data = task_source(fig).data
    area = (np.asarray(data["right"]) - np.asarray(data["left"])) * np.asarray(data["height"])
    rows = np.asarray(data["row"])
    return {int(r): float(area[rows == r].sum() / plots.ROW_HEIGHT) for r in np.unique(rows)}


def test_aggregated_rows_paint_exactly_their_busy_time():
    """Issue 7.1: 20,000 tasks of 10 us, one a millisecond, are 0.2 s of work,
    not 19 s; a worker busy all along paints its whole row."""
    n = 20_000
    idle = [TaskData(("tiny-1a2b3c4d", i), None, T0 + i * 1e-3, T0 + i * 1e-3 + 1e-5, 1)
            for i in range(n)]
    busy = [TaskData(("full-1a2b3c4d", i), None, T0 + i * 1e-3, T0 + (i + 1) * 1e-3, 2)
            for i in range(n)]
    wide = [TaskData(("long-1a2b3c4d", 0), None, T0 + 20.0, T0 + 20.5, 1)]
    fig = plots.plot_tasks(idle + busy + wide)
    px = (20.5 + 1e-5) / plots.PIXELS
    data = task_source(fig).data
    assert len(data["left"]) <= 2 * plots.PIXELS + 10  # aggregated
    painted = painted_busy(fig)
    assert abs(painted[0] - (n * 1e-5 + 0.5)) <= px  # 0.7 s, not ~20 s
    assert abs(painted[1] - n * 1e-3) <= px
    assert painted[0] < 0.05 * painted[1]
    # the wide task keeps its own full-height bar and its key
    i = data["key"].index("('long-1a2b3c4d', 0)")
    assert data["height"][i] == plots.ROW_HEIGHT and data["right"][i] - data["left"][i] == 0.5


def test_small_runs_keep_one_bar_per_task():
    tasks = [TaskData(f"t-{i}", None, i * 1e-6, i * 1e-6 + 5e-7, 1) for i in range(2000)]
    tasks.append(TaskData("t-end", None, 100.0, 101.0, 1))  # makes the others sub-pixel
    data = task_source(plots.plot_tasks(tasks)).data
    assert len(data["key"]) == 2001 and set(data["count"].tolist()) == {1}


def test_cache_resampling_keeps_a_one_microsecond_peak():
    # 5000 short stays one at a time, and one instant where 7 results overlap
    records = [CacheData(("x-abc123", i), None, 1, float(i), i + 0.5) for i in range(5000)]
    records += [CacheData(("x-abc123", -k), None, 1, 2500.2, 2500.200001) for k in range(6)]
    fig = plots.plot_cache(records)
    (line,) = fig.renderers
    values = np.asarray(line.data_source.data["value"])
    assert len(values) <= 2 * plots.PIXELS + 2
    assert values.max() == 7
    assert values.min() == 0


# --------------------------------------------------------------------------
# Resources and cache


def test_resources_have_cpu_left_and_memory_on_a_second_y_range(small_profile):
    fig = plots.plot_resources(small_profile[1].results)
    assert set(fig.extra_y_ranges) == {"memory"}
    right_axes = [axis for axis in fig.right if isinstance(axis, LinearAxis)]
    assert [axis.y_range_name for axis in right_axes] == ["memory"]
    assert right_axes[0].axis_label == "Memory (MB)"
    assert fig.yaxis[0].axis_label == "CPU (%)"
    cpu, mem = fig.select_one({"name": "cpu"}), fig.select_one({"name": "memory"})
    assert mem.y_range_name == "memory" and cpu.y_range_name == "default"
    assert cpu.data_source.data["time"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert cpu.data_source.data["cpu"].tolist() == [0.0, 50.0, 100.0, 150.0]
    assert cpu.data_source.data["mem"].tolist() == [100.0, 110.0, 120.0, 130.0]
    assert fig.y_range.end >= 150 and fig.extra_y_ranges["memory"].end >= 130
    assert fig.select_one({"type": HoverTool}) is not None


def test_cache_has_one_line_per_group_not_per_key():
    records = [CacheData(("x-abc123", i), None, 1, 10.0 + i, 20.0) for i in range(5)]
    records += [CacheData(f"y-{i:08x}aa", None, 1, 12.0, 13.0 + i) for i in range(3)]
    fig = plots.plot_cache(records, metric_name="tasks")
    steps = [r for r in fig.renderers if isinstance(r, GlyphRenderer) and isinstance(r.glyph, Step)]
    assert sorted(r.name for r in steps) == ["x", "y"]
    assert len(fig.renderers) == 2
    assert fig.yaxis[0].axis_label == "Cache Size (tasks)"
    x = fig.select_one({"name": "x"}).data_source.data
    y = fig.select_one({"name": "y"}).data_source.data
    assert max(x["value"]) == 5 and x["value"][-1] == 0
    assert max(y["value"]) == 3 and y["value"][-1] == 0
    assert x["time"][0] == 0.0  # relative to the earliest cache_time
    labels = [item.label.value for legend in fig.legend for item in legend.items]
    assert labels == ["x", "y"]


def test_cache_sums_the_metric_and_counts_unfreed_results_to_the_end():
    records = [
        CacheData(("a", 1), None, 100.0, 0.0, 3.0),
        CacheData(("a", 2), None, 50.0, 1.0, 2.0),
        CacheData(("a", 3), None, 7.0, 2.0, None),  # never freed while profiling
    ]
    fig = plots.plot_cache(records, metric_name="nbytes")
    data = fig.renderers[0].data_source.data
    assert list(zip(data["time"].tolist(), data["value"].tolist(), strict=False)) == [
        (0.0, 0.0), (0.0, 100.0), (1.0, 150.0), (2.0, 100.0), (2.0, 107.0),
        (3.0, 7.0), (3.0, 0.0),
    ]
    assert fig.yaxis[0].axis_label == "Cache Size (nbytes)"


def test_empty_results_still_make_figures(tmp_path):
    for fig in (plots.plot_tasks([]), plots.plot_resources([]), plots.plot_cache([])):
        assert fig.xaxis[0].axis_label == "Time (s)"
    layout = plots.visualize(
        [profiler(TaskData, []), profiler(ResourceData, []), profiler(CacheData, [])],
        filename=tmp_path / "empty.html", show=False,
    )
    assert len(figures_of(layout)) == 3
    assert (tmp_path / "empty.html").stat().st_size > 0


# --------------------------------------------------------------------------
# visualize


def test_figures_share_one_x_range_from_the_global_earliest_time(small_profile, tmp_path):
    layout = plots.visualize(small_profile, filename=tmp_path / "p.html", show=False)
    tasks, resources, cache = figures_of(layout)
    assert tasks.x_range is resources.x_range is cache.x_range
    # the earliest record is the first resource sample, at T0 + 0.5
    assert (tasks.x_range.start, tasks.x_range.end) == (0.0, 4.0)
    assert task_source(tasks).data["left"].tolist() == [0.5, 1.0, 1.5, 2.5]
    assert resources.select_one({"name": "cpu"}).data_source.data["time"][0] == 0.0
    assert cache.select_one({"name": "load"}).data_source.data["time"][0] == 1.5
    # one time axis label, under the bottom figure
    assert [fig.xaxis[0].axis_label for fig in (tasks, resources, cache)] == [None, None,
                                                                              "Time (s)"]
    # one colour per group across the task stream and the cache plot
    data = task_source(tasks).data
    colour = dict(zip(data["group"], data["color"], strict=True))
    for line in cache.renderers:
        assert line.glyph.line_color == colour[line.name]


def test_visualize_takes_a_single_profiler_and_passes_figure_kwargs(small_profile):
    fig = plots.visualize(small_profile[0], save=False, show=False, height=222)
    assert fig.height == 222 and fig.x_range.start == 0.0


def test_visualize_refuses_what_it_cannot_plot(small_profile):
    with pytest.raises(TypeError, match="record_type"):
        plots.visualize([SimpleNamespace(results=[])], save=False, show=False)
    with pytest.raises(ValueError, match="at least one"):
        plots.visualize([], save=False, show=False)
    with pytest.raises(ValueError):
        plots.visualize(small_profile, save=False, show=False, mode="carrier-pigeon")


def test_saved_html_is_standalone_and_holds_the_data(small_profile, tmp_path):
    path = tmp_path / "profile.html"
    plots.visualize(small_profile, filename=str(path), show=False)
    html = path.read_text(encoding="utf-8")
    assert "load-a1b2c3d4" in html and "total-99aa88bb" in html
    assert '"inc"' in html
    # BokehJS is inlined: no script or stylesheet is fetched from anywhere
    assert "<script src=" not in html.replace("'", '"')
    assert "cdn.bokeh.org" not in html
    assert "Bokeh.embed.embed_items" in html


def test_show_opens_a_browser_outside_notebooks(small_profile, tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr(page, "_in_notebook", lambda: False)
    monkeypatch.setattr(page, "_view_in_browser", opened.append)
    plots.visualize(small_profile, filename=str(tmp_path / "shown.html"), show=True)
    assert opened == [str(tmp_path / "shown.html")]
    plots.visualize(small_profile, save=False, show=True)  # a temporary file instead
    try:
        assert opened[1].endswith(".html")
        assert "load-a1b2c3d4" in Path(opened[1]).read_text(encoding="utf-8")
    finally:
        os.unlink(opened[1])


def test_show_displays_inline_in_notebooks(small_profile, monkeypatch):
    calls = []
    monkeypatch.setattr(page, "_in_notebook", lambda: True)
    monkeypatch.setattr(page, "_output_notebook", lambda **kw: calls.append(("output", kw)))
    monkeypatch.setattr(page, "_show", lambda obj: calls.append(("show", obj)))
    monkeypatch.setattr(page, "_view_in_browser", lambda path: calls.append(("browser", path)))
    layout = plots.visualize(small_profile, save=False, show=True, mode="cdn")
    assert [name for name, _ in calls] == ["output", "show"]
    assert calls[0][1]["resources"].mode == "cdn"
    # the page shown is the summary above the returned plots
    summary, plot = calls[1][1].children
    assert plot is layout and "wall time" in summary.text


# --------------------------------------------------------------------------
# A big run


def big_profile(n=100_000, seed=0):
    """n tasks over 2 workers, n cache records and ~100 resource samples."""
    rng = np.random.default_rng(seed)
    groups = ["load", "inc", "add-x", "sum-aggregate", "getitem"]
    durations = rng.exponential(1e-4, n)
    durations[::1000] = 0.05  # some tasks wider than a pixel
    workers = np.arange(n) % 2
    starts = np.empty(n)
    for w in (0, 1):  # back to back on each worker, 1 us apart
        mine = workers == w
        gaps = durations[mine] + 1e-6
        starts[mine] = T0 + np.r_[0.0, np.cumsum(gaps)[:-1]]
    ends = starts + durations
    freed = ends + rng.exponential(0.01, n)
    tasks, cache = [], []
    for i in range(n):
        key = (f"{groups[i % 5]}-abcdef{i % 5}1", i)
        tasks.append(TaskData(key, (max, i, [i] * 50), starts[i], ends[i], 140_000_000_000 + i % 2))
        cache.append(CacheData(key, None, 1.0, ends[i], freed[i]))
    end = float(freed.max())
    resources = [ResourceData(T0 + k * (end - T0) / 100, 100.0 + k, float(k % 50))
                 for k in range(101)]
    return [profiler(TaskData, tasks), profiler(ResourceData, resources),
            profiler(CacheData, cache, metric_name="tasks")]


@pytest.fixture(scope="module")
def big_html(tmp_path_factory):
    profilers = big_profile()
    path = tmp_path_factory.mktemp("big") / "big.html"
    layout = plots.visualize(profilers, filename=str(path), show=False)
    return profilers, layout, path


def test_big_profile_is_aggregated_not_dropped(big_html):
    profilers, layout, path = big_html
    assert path.stat().st_size <= 20 * 2**20
    tasks_fig, _, cache_fig = figures_of(layout)
    data = task_source(tasks_fig).data
    counts = np.asarray(data["count"])
    # a task cut by a pixel column's edge counts in the bars on both sides
    assert 100_000 <= counts.sum() <= 2 * 100_000
    assert len(counts) <= 2 * (plots.PIXELS + 2) + 100  # two workers, a bar a pixel, wide ones
    assert counts.max() > 1
    # each worker's row paints exactly its busy time
    records = profilers[0].results
    px = tasks_fig.x_range.end / plots.PIXELS
    painted = painted_busy(tasks_fig)
    for w in (0, 1):
        busy = sum(r.end_time - r.start_time for r in records
                   if r.worker_id == 140_000_000_000 + w)
        assert abs(painted[w] - busy) <= px
    # the cache plot: one line per group, each resampled to about a point a pixel
    assert sorted(line.name for line in cache_fig.renderers) == sorted(
        ["load", "inc", "add-x", "sum-aggregate", "getitem"])
    for line in cache_fig.renderers:
        assert len(line.data_source.data["time"]) <= 2 * plots.PIXELS + 2


# --------------------------------------------------------------------------
# A real browser


@pytest.fixture(scope="module")
def chromium():
    return require_chromium()


@needs_browser_driver  # (elsewhere it skips, CI or not)
def test_require_chromium_skips_locally_but_fails_in_ci(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI"):
        require_chromium()


def session_processes(session_id):
    """Processes (zombies included) still in the session the browser ran in."""
    left = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == session_id:
                left.append(proc)
        except (ProcessLookupError, PermissionError):
            pass
    return left


def chromium_descendants():
    """Chromium processes, or the helper's supervisor, still below this process."""
    left = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" in proc.name().lower() or "SUBREAPER" in " ".join(proc.cmdline()):
                left.append(proc)
        except psutil.NoSuchProcess:
            pass
    return left


def test_browser_helper_reports_thrown_errors(chromium, tmp_path):
    page = tmp_path / "broken.html"
    page.write_text(
        "<html><body><p>before</p>"
        "<script>throw new Error('deliberate boom')</script>"
        "<script>setTimeout(() => { throw new TypeError('later boom') }, 0);"
        "Promise.reject(new Error('rejected boom'));"
        "console.error('logged boom')</script>"
        "</body></html>",
        encoding="utf-8")
    result = open_in_chromium(page)
    text = "\n".join(result.errors)
    for boom in ("deliberate boom", "later boom", "rejected boom", "logged boom"):
        assert boom in text
    assert session_processes(result.pid) == []


def test_browser_helper_sees_a_clean_page_as_clean(chromium, tmp_path):
    page = tmp_path / "clean.html"
    page.write_text("<html><body><p id=p>before</p><script>"
                    "document.getElementById('p').textContent = 'after script';"
                    "console.log('just saying')</script></body></html>", encoding="utf-8")
    result = open_in_chromium(page)
    assert result.errors == []
    assert "after script" in result.dom
    assert result.console == ["console.log: just saying"]
    assert session_processes(result.pid) == []
    assert chromium_descendants() == []


def test_browser_helper_kills_chromium_on_timeout(chromium, tmp_path):
    page = tmp_path / "hang.html"
    page.write_text("<html><body><script>while (true) {}</script></body></html>", encoding="utf-8")
    with pytest.raises(BrowserError, match="timed out") as info:
        open_in_chromium(page, timeout=3)
    assert session_processes(info.value.pid) == []
    assert chromium_descendants() == []


def assert_rendered(result, n_figures):
    assert result.errors == []
    assert result.ready, "BokehJS did not finish rendering"
    assert result.dom.count('class="bk-Figure') == n_figures
    assert result.dom.count("<canvas") >= n_figures


def test_saved_profile_renders_in_chromium(chromium, small_profile, tmp_path):
    path = tmp_path / "profile.html"
    plots.visualize(small_profile, filename=str(path), show=False)
    frames = (
        "Object.values(Bokeh.index).flatMap(function walk(view) {"
        "  const mine = view.frame ? [[view.frame.bbox.left, view.frame.bbox.right]] : [];"
        "  return mine.concat((view.child_views || []).flatMap(walk)); })"
    )
    result = open_in_chromium(path, wait_for=BOKEH_RENDERED, evaluate=frames)
    assert_rendered(result, 3)
    # the three plot frames, and so their time axes, line up
    assert len(result.value) == 3 and len({tuple(frame) for frame in result.value}) == 1
    assert session_processes(result.pid) == []


def test_big_profile_renders_in_chromium(chromium, big_html):
    result = open_in_chromium(big_html[2], wait_for=BOKEH_RENDERED)
    assert_rendered(result, 3)


# --------------------------------------------------------------------------
# The flame graph: frames as wide as the time their samples stand for


def frame_widths(rects) -> dict:
    return {name: right - left
            for name, left, right in zip(rects["name"], rects["left"], rects["right"],
                                         strict=True)}


def test_flame_frames_are_as_wide_as_their_seconds_not_their_sample_counts():
    from localsched.diagnostics.collectors.records import SampleData
    from localsched.diagnostics.figures.flame import flame_rects, flame_trees, plot_flame

    slow, quick = ("m.py", 1, "slow"), ("m.py", 9, "quick")
    # One look at `slow` after the sampler waited 0.3 s for the GIL; three
    # on-time looks (10 ms each) at `quick`: slow took 10x the time of quick.
    samples = [SampleData(T0, 1, "load", (slow,), 0.3)]
    samples += [SampleData(T0 + 0.31 + 0.01 * i, 1, "sum", (quick,), 0.01) for i in range(3)]
    trees = flame_trees(samples)
    # the selector lists the groups by time: load (0.3 s in 1 sample) first
    assert list(trees) == ["all", "load", "sum"]
    rects = flame_rects(trees["all"])
    widths = frame_widths(rects)
    assert widths["all"] == pytest.approx(1.0)
    assert widths["slow"] / widths["quick"] == pytest.approx(10.0)
    seconds = dict(zip(rects["name"], rects["seconds"], strict=True))
    # (each stack rooted at its task group: the first row names the groups)
    assert seconds == pytest.approx({"all": 0.33, "load": 0.3, "sum": 0.03, "slow": 0.3,
                                     "quick": 0.03})
    # the hover says the time, the axis says what the widths share
    fig = plot_flame(trees).children[1]
    (hover,) = fig.select(HoverTool)
    assert ("time", "@seconds{0.000} s") in hover.tooltips
    assert fig.xaxis[0].axis_label == "share of time"


def test_flame_of_samples_that_do_not_say_their_seconds_is_by_count():
    from localsched.diagnostics.collectors.records import SampleData
    from localsched.diagnostics.figures.flame import flame_rects, flame_trees, plot_flame

    # (runs saved before samples carried their seconds)
    f, g = ("m.py", 1, "f"), ("m.py", 9, "g")
    samples = [SampleData(T0, 1, "x", (f,)), SampleData(T0 + 1, 1, "x", (g,)),
               SampleData(T0 + 2, 1, "x", (g,))]
    widths = frame_widths(flame_rects(flame_trees(samples)["all"]))
    assert widths["g"] / widths["f"] == pytest.approx(2.0)
    assert plot_flame(flame_trees(samples)).children[1].xaxis[0].axis_label == "share of samples"
