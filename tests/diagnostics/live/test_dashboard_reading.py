"""What a user reads on the live page and the report: numbers checked against
the run's own records at one moment, labels checked in the document model."""

from __future__ import annotations

import re
import threading
from operator import add

import numpy as np
import pytest

from localsched.diagnostics import FineMetrics, SampleProfiler
from localsched.diagnostics.collectors.records import SampleData
from localsched.diagnostics.figures.flame import LABEL_CHAR_PX, flame_trees, plot_flame
from localsched.diagnostics.live.feed import Feed
from localsched.diagnostics.live.finemetrics import FineMetricsView
from localsched.diagnostics.live.flame import CHAR_PX, PLOT_PX, FlameGraph
from localsched.diagnostics.live.groups import GroupProgress
from localsched.diagnostics.live.summary import Summary, summary_html
from localsched.diagnostics.live.taskstream import TaskStream
from localsched.diagnostics.reporting.aggregate import NO_GROUP, metric_table
from tests.support.replayed_runs import live_feed


def _cells(text: str) -> dict:
    """The strip's ``label -> value`` cells."""
    return dict(re.findall(r"<span style=.color:#777.>([^<]+)</span> <b>([^<]*)</b>", text))


def _blocked_run(dash, release: threading.Event, started: threading.Barrier, quick: int = 30):
    """A threaded computation on two workers: ``quick`` tiny tasks, then two
    tasks that block (both running at once) until ``release``."""
    from localsched.threaded import get

    def block(*_):
        started.wait(30)
        assert release.wait(60)
        return 1

    dsk: dict = {("quick", i): (add, i, 1) for i in range(quick)}
    dsk.update({("block", j): (block, [("quick", i) for i in range(quick)]) for j in range(2)})
    dsk["total"] = (add, ("block", 0), ("block", 1))
    out: list = []
    thread = threading.Thread(target=lambda: out.append(
        get(dsk, "total", num_workers=2, callbacks=[dash])))
    thread.start()
    return thread, out


def test_strip_and_groups_agree_and_workers_are_busy_mid_run(dash):
    release, started = threading.Event(), threading.Barrier(3)
    feed = Feed(dash.recorder)
    summary, groups = Summary(feed, dash), GroupProgress(feed, dash)
    thread, out = _blocked_run(dash, release, started)
    try:
        started.wait(30)  # both blocking tasks run now, on the two workers
        groups.update()  # a page's full update: one take-in, then every part
        summary.update()
        cells = _cells(summary.text)
        assert cells["workers busy"] == "2 / 2", cells
        done = sum(int(label.split()[-1].split("/")[0]) for label in groups.source.data["label"])
        assert cells["tasks"] == f"{done} / 33" and done == 30
        assert cells["run"].endswith("running")
    finally:
        release.set()
        thread.join(60)
    assert out == [2]
    dash.feed.update(force=True)  # (a probe of another reader: not this page's feed)
    summary.tick()  # a summary refresh after the end, before the next take-in:
    cells = _cells(summary.text)  # still the groups' snapshot
    assert cells["tasks"] == "30 / 33" and cells["run"].endswith("running")
    feed.update(force=True)  # the next full update (a page makes them 0.1 s apart at most)
    groups.update()
    summary.update()
    cells = _cells(summary.text)
    assert cells["tasks"] == "33 / 33" and cells["run"].endswith("finished")
    assert "ETA" not in cells and "workers busy" not in cells and cells["workers"] == "2"


def test_elapsed_below_a_second_and_why_no_eta_yet():
    done, run, clock, feed = live_feed(50)
    summary = Summary(feed)
    clock.t = run.started + 0.37
    feed.update(force=True)
    summary.update()
    cells = _cells(summary.text)
    assert cells["elapsed"] == "0.37 s"
    assert cells["ETA"] == "? (after the first tasks finish)"
    run.ends.extend(done.ends[:40])
    clock.t += 0.5
    feed.update(force=True)
    summary.update()
    cells = _cells(summary.text)
    assert cells["elapsed"] == "0.87 s" and cells["ETA"].endswith(" s")
    run.ends.extend(done.ends[40:])
    run.finished = clock.t = clock.t + 0.2
    feed.update(force=True)
    summary.update()
    cells = _cells(summary.text)
    assert cells["took"] == "1.1 s" and "ETA" not in cells and "elapsed" not in cells


def test_an_unregistered_dashboard_says_it_is_not_recording(dash):
    from localsched.threaded import get

    get({"x-1": (add, 1, 2)}, "x-1")  # a computation the dashboard does not see
    summary = Summary(dash.feed, dash)
    assert not dash.recording
    assert "not recording" in summary.text and "with dash:" in summary.text
    assert "dash.register()" in summary.text
    with dash:
        assert dash.recording
        summary.update()
        assert summary.text.endswith("waiting for a computation...</div>")
    assert summary_html({"status": "idle"}, recording=False) != \
        summary_html({"status": "idle"}, recording=True)


def test_fine_metrics_bars_are_named_by_group_on_their_axis(dash):
    from localsched.threaded import get

    dsk = {("load-part", i): (sum, list(range(2000))) for i in range(8)}
    dsk["combine-all"] = (sum, [("load-part", i) for i in range(8)])
    with FineMetrics() as fm:
        get(dsk, "combine-all", num_workers=2)
    view = FineMetricsView(dash.feed, type("Context", (), {
        "diagnostics": lambda self, kind: [fm] if kind == "FineMetrics" else []})())
    axis = view.root.yaxis[0]
    names = axis.major_label_overrides
    groups = list(dict.fromkeys(view.source.data["group"]))
    assert list(view.ticker.ticks) == list(range(len(groups)))
    assert [names[i] for i in range(len(groups))] == groups
    assert {"load-part", "combine-all"} <= set(groups)
    if NO_GROUP in groups:  # (time outside tasks: last, not ranked)
        assert groups[-1] == NO_GROUP
    # each bar sits on its name's tick
    for group, bottom, top in zip(view.source.data["group"], view.source.data["bottom"],
                                  view.source.data["top"], strict=True):
        assert bottom < groups.index(group) < top


def _samples_in_c() -> list:
    """A SampleProfiler's samples of tasks that are NumPy's matmul itself
    (a C function: nothing of Python below the task), and of a Python task."""
    from localsched.threaded import get

    a = np.random.default_rng(0).random((300, 300))

    def py_loop(n):
        return sum(i * i for i in range(n))

    dsk = {("matmul", i): (np.dot, a, a) for i in range(40)}
    dsk.update({("pyloop", i): (py_loop, 300_000) for i in range(10)})
    with SampleProfiler(interval=0.002) as sp:
        get(dsk, list(dsk), num_workers=2)
    return sp.results


def test_the_report_flame_graph_roots_every_stack_at_its_task_group():
    samples = _samples_in_c()
    in_c = [s for s in samples if s.group == "matmul"]
    assert in_c and all(not s.stack for s in in_c), "matmul's samples have no Python frames"
    trees = flame_trees(samples)
    children = {c["name"]: c["seconds"] for c in trees["all"]["children"]}
    rooted = sum(v for k, v in children.items() if k in ("matmul", "pyloop"))
    # every sampled second of a task sits under its group (C code included)
    assert children["matmul"] == pytest.approx(sum(s.seconds for s in in_c), rel=1e-6)
    assert rooted == pytest.approx(sum(s.seconds for s in samples if s.group), rel=1e-6)
    # the selector: all, the task groups, then the time between tasks (not ranked)
    labels = list(trees)
    assert labels[0] == "all" and set(labels[1:3]) == {"matmul", "pyloop"}
    assert NO_GROUP not in labels[:-1]


def _label_fits(label: str, name: str, width_px: float, char_px: float) -> bool:
    return label == "" or (len(label) * char_px <= width_px and
                           (label == name or label.endswith("\u2026")))


def test_flame_labels_are_drawn_only_where_they_fit(dash):
    samples = [SampleData(0.0, 1, "g", (("m.py", 1, "a_rather_long_function_name"),
                                        ("m.py", 9, f"callee_number_{i}")), 0.01)
               for i in range(60)]
    samples += [SampleData(0.0, 1, "g", (("m.py", 1, "a_rather_long_function_name"),), 0.4)]
    # the report's
    fig = plot_flame(flame_trees(samples)).children[1]
    data = fig.select_one({"name": "flame-labels"}).data_source.data
    for label, name, share in zip(data["label"], data["name"], data["share"], strict=True):
        assert _label_fits(label, name, share * 1000, LABEL_CHAR_PX), (label, share)
    assert sum(1 for label in data["label"] if label) >= 3
    assert fig.x_range.js_property_callbacks["change:start"], "labels refit on zoom"
    # the live page's
    context = type("Context", (), {"diagnostics": lambda self, kind:
                                   [type("S", (), {"results": samples})()]
                                   if kind == "SampleProfiler" else []})()
    live = FlameGraph(dash.feed, context)
    data = live.source.data
    assert data["name"][0] == "all" and "g" in data["name"]  # (rooted at the group)
    for label, name, left, right in zip(data["label"], data["name"], data["left"],
                                        data["right"], strict=True):
        assert _label_fits(label, name, (right - left) * PLOT_PX, CHAR_PX), (label, name)
    assert any(label == "" for label in data["label"])  # the 60 thin callees: no label
    assert live.figure.x_range.js_property_callbacks["change:end"]


def test_the_task_stream_ticks_seconds_since_the_run_started(dash):
    from localsched.threaded import get

    dsk = {("slowish", i): (sum, list(range(20_000))) for i in range(20)}
    with dash:
        get(dsk, list(dsk), num_workers=2)
    run = dash.recorder.runs[-1]
    feed = Feed(dash.recorder)
    feed.update(force=True)
    stream = TaskStream(feed, dash)
    stream.update()
    axis = stream.root.xaxis[0]
    assert type(axis).__name__ == "LinearAxis" and "seconds since" in axis.axis_label
    lefts, rights = stream.source.data["left"], stream.source.data["right"]
    assert min(lefts) >= -1e-6 and max(rights) <= run.finished - run.started + 1e-6
    span = run.finished - run.started
    assert -0.05 * span <= stream.x_range.start <= min(lefts)  # (from 0, a little padded)
    assert stream.x_range.end >= max(rights)


def test_the_time_outside_tasks_is_not_ranked_among_the_groups():
    metrics = {((), None, "idle", "seconds"): 9.0, ((), "load", "thread-cpu", "seconds"): 1.0,
               ((), "save", "thread-cpu", "seconds"): 2.0}
    groups, _, _ = metric_table(metrics)
    assert groups == ["save", "load", NO_GROUP]
    assert "idle" in NO_GROUP and "no task" not in NO_GROUP

