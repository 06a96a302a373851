"""The report tells the truth: failed, interrupted and travelling work, a
summary read first, an empty report that says so, readable legends.

Real computations check what the core hands to callbacks (``state.outcome``'s
failed and running tasks, ``state.task.transfer``) end to end; the hooks are
also driven directly with a State, to pin down exact values.
"""

from __future__ import annotations

import logging
import threading
from operator import add, truediv
from types import SimpleNamespace

import numpy as np
import pytest
from bokeh.models import HoverTool

from localsched.diagnostics import CacheProfiler, Profiler, ResourceProfiler, visualize
from localsched.diagnostics.collectors.records import (
    FailedTaskData,
    InterruptedTaskData,
    TaskData,
    TransferData,
)
from localsched.diagnostics.reporting import plots
from localsched.diagnostics.reporting.summary import GroupSummary, Summary, summarize
from localsched.diagnostics.reporting.tables import summary_html

try:  # the repository root is on sys.path (python -m pytest), or tests/ is a package
    from tests.support.browser import open_in_chromium, require_chromium
except ImportError:  # pytest put tests/ itself on sys.path
    from tests.support.browser import open_in_chromium, require_chromium

T0 = 1_700_000_000.0


# Rendered once Bokeh built every root view and finished painting it.
BOKEH_RENDERED = (
    "window.Bokeh && Object.keys(Bokeh.index).length > 0"
    " && Object.values(Bokeh.index).every((view) => view.has_finished())"
)

#: An 85-character group name, as dask makes them.
LONG = ("dictitems-frequencies-aggregate-topk-series-groupby-value-counts-"
        "combine-partial-aggr")
assert len(LONG) == 85


def inc(x):
    return x + 1


def hooks(callback):
    """The five hooks a scheduler fires, by name."""
    return dict(zip(("start", "start_state", "pretask", "posttask", "finish"),
                    callback._callback, strict=False))


def fake_state():
    """What the core hands to callbacks: a real (empty) State whose task
    record and outcome a test sets (keeping the run's task records, as a
    computation does when a callback reads them)."""
    from localsched.run.machine import RunState
    from localsched.view import State

    state = State(RunState.empty())
    state.outcome.records = []
    return state


def end_task(h, dsk, state, record, result, worker_id):
    """What the core does when a task ends: keep its record, fire posttask."""
    state.task = record._replace(worker_id=worker_id)
    state.outcome.records.append(tuple(state.task))
    if h["posttask"] is not None:
        h["posttask"](record.key, result, dsk, state, worker_id)


def task_record(key, start, end, transfer=None):
    from localsched.view import TaskRecord

    return TaskRecord(key, start, end, 0, [], transfer)


def by_name(fig, name):
    return fig.select_one({"name": name})


# --------------------------------------------------------------------------
# Failed and interrupted tasks (issue 7.2)


def test_profiler_keeps_failed_and_interrupted_tasks_apart_from_results():
    prof = Profiler()
    h = hooks(prof)
    dsk = {"a": (inc, 1), "b": (truediv, "a", 0), "c": (inc, 5)}
    state = fake_state()
    h["start_state"](dsk, state)
    end_task(h, dsk, state, task_record("a", T0, T0 + 0.5), 2, 7)
    state.outcome.failed["b"] = (ZeroDivisionError("division by zero"), T0 + 0.5, T0 + 0.6, 7)
    state.outcome.running_since["c"] = (T0 + 0.2, 8)
    h["finish"](dsk, state, True)

    assert prof.results == [TaskData("a", dsk["a"], T0, T0 + 0.5, 7)]
    (failed,) = prof.failed
    assert failed == FailedTaskData("b", dsk["b"], T0 + 0.5, T0 + 0.6, 7,
                                    "ZeroDivisionError", "division by zero")
    assert failed.error == "ZeroDivisionError: division by zero"
    (cut,) = prof.interrupted
    assert (cut.key, cut.task, cut.start_time, cut.worker_id) == ("c", dsk["c"], T0 + 0.2, 8)
    assert cut.stop_time > T0 + 0.2  # the finish: when the computation stopped
    # dask's records stay five fields long
    assert all(len(r) == 5 for r in prof.results)
    summary = prof.summary()
    assert (summary.tasks, summary.failed, summary.interrupted) == (1, 1, 1)


def test_failed_and_interrupted_tasks_are_drawn_and_explained():
    done = [TaskData("ok-1a2b3c4d", None, T0, T0 + 1.0, 10)]
    failed = [FailedTaskData("bad-1a2b3c4d", (truediv, 1, 0), T0 + 1.0, T0 + 1.5, 10,
                             "ZeroDivisionError", "division by zero")]
    cut = [InterruptedTaskData("slow-1a2b3c4d", None, T0 + 0.5, T0 + 3.0, 20),
           InterruptedTaskData("lost-1a2b3c4d", None, T0 + 0.5, T0 + 3.0, None)]
    fig = plots.plot_tasks(done, failed=failed, interrupted=cut)
    bad = by_name(fig, "failed").data_source.data
    assert bad["key"] == ["bad-1a2b3c4d"] and bad["color"] == [plots.FAILED_COLOR]
    assert "ZeroDivisionError: division by zero" in bad["status"][0]
    assert (bad["left"].tolist(), bad["right"].tolist()) == ([1.0], [1.5])
    assert by_name(fig, "failed").glyph.hatch_pattern == "x"
    slow = by_name(fig, "interrupted").data_source.data
    # drawn up to the stop, on its worker's row; an unknown worker gets its own row
    assert (slow["left"].tolist(), slow["right"].tolist()) == ([0.5, 0.5], [3.0, 3.0])
    assert slow["worker"] == ["worker 1", "unknown worker"]
    assert "running for 2.5 s when the computation stopped" in slow["status"][0]
    assert fig.yaxis[0].major_label_overrides == {0: "worker 0", 1: "worker 1",
                                                  2: "unknown worker"}
    labels = [item.label.value for legend in fig.legend for item in legend.items]
    assert "failed" in labels and "interrupted" in labels
    hover = next(t for t in fig.tools if isinstance(t, HoverTool))
    assert {r.name for r in hover.renderers} == {"tasks", "failed", "interrupted"}


@pytest.mark.parametrize("name", ["sync", "threads", "processes"])
def test_a_real_failure_shows_in_the_profile(name, tmp_path):
    import importlib

    from tests.diagnostics.conftest import SCHEDULERS

    module, attr = SCHEDULERS[name]
    get = getattr(importlib.import_module(module), attr)
    dsk = {"a": (inc, 1), "b": (truediv, "a", 0)}
    with Profiler() as prof:
        with pytest.raises(ZeroDivisionError):
            get(dsk, "b")
    assert [r.key for r in prof.results] == ["a"]
    (failed,) = prof.failed
    assert (failed.key, failed.exc_type, failed.message) == ("b", "ZeroDivisionError",
                                                             "division by zero")
    assert failed.start_time <= failed.end_time
    fig = prof.visualize(filename=str(tmp_path / "failed.html"), show=False)
    assert by_name(fig, "failed").data_source.data["key"] == ["b"]


def test_tasks_running_when_another_fails_are_drawn_up_to_the_stop():
    from localsched.threaded import get

    slow_started, release = threading.Event(), threading.Event()

    def slow():
        slow_started.set()
        release.wait(30)
        return 1

    def bad():
        assert slow_started.wait(30)
        raise ValueError("boom")

    dsk = {"slow": (slow,), "bad": (bad,), "both": (add, "slow", "bad")}
    try:
        with Profiler() as prof:
            with pytest.raises(ValueError, match="boom"):
                get(dsk, "both", num_workers=2)
    finally:
        release.set()
    assert [r.key for r in prof.failed] == ["bad"]
    (cut,) = prof.interrupted
    assert cut.key == "slow" and cut.start_time <= cut.stop_time
    assert cut.worker_id is not None and cut.worker_id != prof.failed[0].worker_id
    assert prof.summary().interrupted == 1


def test_ctrl_c_shows_what_was_running_up_to_the_stop():
    import _thread

    from localsched.callbacks import Callback
    from localsched.threaded import get

    slow_seen, release = threading.Event(), threading.Event()

    def slow():
        release.wait(30)
        return 1

    def press_ctrl_c():
        # Only once the scheduler has seen 'slow' start (its pretask fired
        # in the scheduler's thread), so the key press cannot land while it
        # is still handing 'slow' to its worker.
        assert slow_seen.wait(30)
        _thread.interrupt_main()  # what Ctrl-C does to the scheduler's thread
        return 2

    def pretask(key, dsk, state):
        if key == "slow":
            slow_seen.set()

    dsk = {"slow": (slow,), "ctrl-c": (press_ctrl_c,), "both": (add, "slow", "ctrl-c")}
    try:
        with Profiler() as prof, Callback(pretask=pretask):
            with pytest.raises(KeyboardInterrupt):
                get(dsk, "both", num_workers=2)
    finally:
        release.set()
    assert prof.failed == []
    cut = {r.key: r for r in prof.interrupted}
    assert "slow" in cut and "both" not in cut
    assert cut["slow"].start_time <= cut["slow"].stop_time
    fig = plots.plot_tasks(prof.results, interrupted=prof.interrupted)
    assert "slow" in by_name(fig, "interrupted").data_source.data["key"]


def test_report_without_finished_tasks_says_so_and_bokeh_does_not_warn(tmp_path, caplog):
    path = tmp_path / "empty.html"
    with caplog.at_level(logging.WARNING, logger="bokeh"):
        stack = visualize([Profiler(), ResourceProfiler(), CacheProfiler()],
                          filename=str(path), show=False)
    bokeh_warnings = [r.getMessage() for r in caplog.records if r.name.startswith("bokeh")]
    assert bokeh_warnings == []  # today: W-1000 (MISSING_RENDERERS)
    page = path.read_text(encoding="utf-8")
    assert "No task finished" in page
    for fig, message in zip([child[0] for child in stack.children],
                            ["No task finished", "No resource samples", "Nothing was cached"],
                            strict=True):
        assert by_name(fig, "message").data_source.data["text"] == [message]


# --------------------------------------------------------------------------
# Summary (issue 7.5)


def test_summary_numbers_from_records():
    results = [
        TaskData(("load-1a2b3c4d", 0), None, T0, T0 + 3.0, 1),
        TaskData(("load-1a2b3c4d", 1), None, T0, T0 + 1.0, 2),
        TaskData("total-9f8e7d6c", None, T0 + 3.0, T0 + 4.0, 1),
    ]
    failed = [FailedTaskData("bad-00ff00ff", None, T0 + 1.0, T0 + 2.0, 2, "ValueError", "x")]
    s = summarize(results, failed, walls=[(T0 - 1.0, T0 + 4.0)])
    assert isinstance(s, Summary)
    assert (s.wall, s.tasks, s.failed, s.interrupted, s.workers, s.busy) == (5.0, 3, 1, 0, 2, 6.0)
    assert s.efficiency == pytest.approx(6.0 / (5.0 * 2))
    assert s.groups[0] == GroupSummary("load", 2, 4.0, 2.0, pytest.approx(4 / 6))
    assert [g.name for g in s.groups] == ["load", "bad", "total"]
    assert s.as_dict()["groups"][0]["name"] == "load"
    text = repr(s)
    assert "wall time 5 s" in text and "parallel efficiency 60%" in text
    assert "load" in text and "67%" in text
    # overlapping computations count their wall time once
    assert summarize(results, walls=[(T0, T0 + 3.0), (T0 + 2.0, T0 + 4.0)]).wall == 4.0
    # computations with a gap between them: the wall time is theirs, the
    # time axis (span) holds the gap too, and the summary says both
    apart = summarize(results, walls=[(T0, T0 + 1.0), (T0 + 3.0, T0 + 4.0)])
    assert (apart.wall, apart.span, apart.computations) == (2.0, 4.0, 2)
    assert "wall time 2 s in 2 computations over 4 s," in str(apart)
    assert "in 2 computations over 4 s" in summary_html(apart)
    assert "computations" not in str(s)  # one computation: nothing to reconcile
    assert summarize([]).efficiency is None and summarize([]).wall == 0.0


def test_profiler_summary_of_a_real_run_and_in_the_page(tmp_path):
    from localsched.threaded import get

    dsk = {("inc-1a2b3c4d", i): (inc, i) for i in range(20)}
    dsk["total-9f8e7d6c"] = (sum, list(dsk))
    with Profiler() as prof:
        assert get(dsk, "total-9f8e7d6c") == sum(range(1, 21))
    s = prof.summary()
    assert (s.tasks, s.failed, s.interrupted) == (21, 0, 0)
    assert 1 <= s.workers <= 2
    assert 0 < s.busy <= s.wall * s.workers
    assert 0 < s.efficiency <= 1
    assert {g.name: g.count for g in s.groups} == {"inc": 20, "total": 1}
    assert sum(g.share for g in s.groups) == pytest.approx(1.0)
    path = tmp_path / "summary.html"
    prof.visualize(filename=str(path), show=False)
    page = path.read_text(encoding="utf-8")
    assert "parallel efficiency" in page and "tasks run" in page and "inc" in page
    # the summary comes before the plots
    assert page.index("parallel efficiency") < page.index('"Task stream"')


# --------------------------------------------------------------------------
# Processes: time spent shipping tasks and results (issue 7.6)


def test_profiler_records_transfer_times_from_the_state():
    prof = Profiler()
    h = hooks(prof)
    dsk = {"a": (inc, 1), "b": (inc, "a")}
    state = fake_state()
    h["start_state"](dsk, state)
    end_task(h, dsk, state, task_record("a", T0 + 1.0, T0 + 2.0, (0.25, 0.5)), 2, 4242)
    # nothing travelled:
    end_task(h, dsk, state, task_record("b", T0 + 2.0, T0 + 2.1, (0.0, 0.0)), 3, 4242)
    h["finish"](dsk, state, False)
    assert [r.key for r in prof.results] == ["a", "b"]
    (shipped,) = prof.transfers
    assert shipped == TransferData("a", 4242, T0 + 0.75, T0 + 1.0, T0 + 2.0, T0 + 2.5)
    assert (shipped.send, shipped.receive) == (0.25, 0.5)

    fig = plots.plot_tasks(prof.results, transfers=prof.transfers)
    data = by_name(fig, "transfers").data_source.data
    # grey before the compute bar, red after it, thinner, on the worker's row
    assert data["left"].tolist() == [0.0, 1.25] and data["right"].tolist() == [0.25, 1.75]
    assert data["color"] == [plots.SEND_COLOR, plots.RECEIVE_COLOR]
    assert data["height"].tolist() == [plots.TRANSFER_HEIGHT] * 2
    assert data["status"] == ["sending inputs: 250 ms", "receiving result: 500 ms"]
    labels = [item.label.value for legend in fig.legend for item in legend.items]
    assert "sending inputs" in labels and "receiving result" in labels
    # drawn first, so the task bars cover them where the worker computed
    assert fig.renderers.index(by_name(fig, "transfers")) < fig.renderers.index(
        by_name(fig, "tasks"))


def test_many_transfers_are_aggregated_with_their_area_kept():
    n = 12_000
    transfers = [TransferData(("x-1a2b3c4d", i), 1, T0 + i * 1e-3 - 2e-4, T0 + i * 1e-3,
                              T0 + i * 1e-3 + 1e-4, T0 + i * 1e-3 + 4e-4) for i in range(n)]
    results = [TaskData(r.key, None, r.start_time, r.end_time, 1) for r in transfers]
    fig = plots.plot_tasks(results, transfers=transfers)
    data = by_name(fig, "transfers").data_source.data
    assert len(data["left"]) <= 2 * 2 * (plots.PIXELS + 2)
    area = (np.asarray(data["right"]) - np.asarray(data["left"])) * np.asarray(data["height"])
    send = np.asarray(data["color"]) == plots.SEND_COLOR
    # (epoch seconds near 1.7e9 carry ~0.2 us of rounding: sum the records' own)
    assert area[send].sum() / plots.TRANSFER_HEIGHT == pytest.approx(
        sum(r.send for r in transfers))
    assert area[~send].sum() / plots.TRANSFER_HEIGHT == pytest.approx(
        sum(r.receive for r in transfers))


def test_processes_report_their_transfers(tmp_path):
    import localsched.multiprocessing as lmp

    dsk = {f"big-{i}": (bytes, 4_000_000) for i in range(4)}
    dsk["sizes"] = (list, [(len, k) for k in list(dsk)])
    with Profiler() as prof:
        lmp.get(dsk, list(dsk)[:4], num_workers=2)
    transfers = prof.transfers
    assert transfers, "4 MB results travel back from the workers"
    assert all(r.send >= 0 and r.receive >= 0 for r in transfers)
    assert sum(r.receive for r in transfers) > 0
    assert {r.key for r in transfers} <= {r.key for r in prof.results}
    fig = prof.visualize(filename=str(tmp_path / "p.html"), show=False)
    assert by_name(fig, "transfers") is not None


# --------------------------------------------------------------------------
# Readable with real dask names (issue 7.3)


def test_legend_shortens_long_names_and_hover_keeps_them():
    results = [TaskData((f"{LONG}-1a2b3c4d", i), None, T0 + i, T0 + i + 1, i % 2)
               for i in range(3)]
    fig = plots.plot_tasks(results)
    labels = [item.label.value for legend in fig.legend for item in legend.items]
    assert labels == [LONG[: plots.LABEL_SIZE - 1] + "\u2026"]
    assert by_name(fig, "tasks").data_source.data["group"] == [LONG] * 3
    assert fig.sizing_mode == "stretch_width"
    fixed = plots.plot_tasks(results, width=500, label_size=10)
    assert fixed.width == 500 and fixed.sizing_mode is None
    assert [i.label.value for i in fixed.legend[0].items] == [LONG[:9] + "\u2026"]


@pytest.fixture(scope="module")
def chromium():
    return require_chromium()


def everything(n_groups=8):
    """Records of every kind, the task groups named with 85 characters."""
    from localsched.diagnostics.collectors.records import CacheData, ResourceData

    names = [LONG[:83] + chr(ord("a") + k) * 2 for k in range(n_groups)]
    results = []
    for i in range(40):
        start = T0 + 0.1 * i
        results.append(TaskData((f"{names[i % n_groups]}-1a2b3c4d", i), (inc, i), start,
                                start + 0.08, 100 + i % 2))
    failed = [FailedTaskData("bad-1a2b3c4d", None, T0 + 4.0, T0 + 4.2, 100,
                             "ValueError", "boom")]
    cut = [InterruptedTaskData(("slow-1a2b3c4d", 0), None, T0 + 3.5, T0 + 4.3, 101)]
    transfers = [TransferData(r.key, r.worker_id, r.start_time - 0.01, r.start_time,
                              r.end_time, r.end_time + 0.015) for r in results[::3]]
    tasks = SimpleNamespace(record_type=TaskData, results=results, failed=failed,
                            interrupted=cut, transfers=transfers, walls=[(T0, T0 + 4.3)])
    cache = [CacheData(r.key, None, 1, r.end_time, r.end_time + 0.5) for r in results]
    resources = [ResourceData(T0 + 0.5 * k, 100.0 + k, 50.0) for k in range(10)]
    return [tasks, SimpleNamespace(record_type=ResourceData, results=resources),
            SimpleNamespace(record_type=CacheData, results=cache, metric_name="tasks")]


# Every legend's box in page coordinates, the figures' widths, the page's width.
LAYOUT = r"""
(() => {
  const legends = [], figures = [];
  const walk = (view) => {
    if (view.renderer_views && view.canvas_view) {
      const canvas = view.canvas_view.el.getBoundingClientRect();
      figures.push(canvas.width);
      for (const rv of view.renderer_views.values()) {
        if (rv.model.type === 'Legend') {
          const b = rv.bbox;
          legends.push([canvas.left + b.x0, canvas.top + b.y0,
                        canvas.left + b.x1, canvas.top + b.y1]);
        }
      }
    }
    for (const child of (view.child_views || [])) walk(child);
  };
  Object.values(Bokeh.index).forEach(walk);
  return {legends, figures, width: document.documentElement.clientWidth,
          scroll: document.documentElement.scrollWidth};
})()
"""


def test_legends_stay_inside_the_page_and_plots_use_its_width(chromium, tmp_path):
    """Issue 7.3, in a real browser: 85-character group names used to push the
    legend off the page's left edge, and the plots used ~610 px of the window."""
    path = tmp_path / "long-names.html"
    visualize(everything(), filename=str(path), show=False)
    result = open_in_chromium(path, wait_for=BOKEH_RENDERED, evaluate=LAYOUT)
    assert result.errors == [] and result.ready
    layout = result.value
    assert len(layout["legends"]) == 3  # task stream, resources, cache
    for x0, y0, x1, y1 in layout["legends"]:
        assert 0 <= x0 < x1 <= layout["width"] and 0 <= y0 < y1
    assert layout["scroll"] <= layout["width"]  # nothing sticks out to the right
    assert all(width >= 0.9 * layout["width"] for width in layout["figures"])
    # the summary is in the page as text
    assert "parallel efficiency" in result.dom and "tasks run" in result.dom
