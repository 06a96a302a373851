"""The performance report (issue 8): a run's records saved as JSON and read
back unchanged, rendered as one offline HTML page that works in a real
browser, exported as a trace that follows the Trace Event Format's rules,
and the ``localsched report`` / ``localsched profile`` commands end to end.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from operator import add

import pytest

import localsched
from localsched.diagnostics import CacheProfiler, Profiler, ResourceProfiler
from localsched.diagnostics.collectors.records import (
    ActivityData,
    CacheData,
    FailedTaskData,
    InterruptedTaskData,
    MetricData,
    ResourceData,
    SampleData,
    TaskData,
    TransferData,
)
from localsched.diagnostics.report import RunData, load_json, stack_tree, to_chrome_trace
from localsched.diagnostics.reporting.aggregate import NO_GROUP

try:  # the repository root is on sys.path (python -m pytest), or tests/ is a package
    from tests.support.browser import open_in_chromium, require_chromium
    from tests.support.trace_format import check_trace, check_trace_text
except ImportError:  # pytest put tests/ itself on sys.path
    from tests.support.browser import open_in_chromium, require_chromium
    from tests.support.trace_format import check_trace, check_trace_text

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module

T0 = 1_700_000_000.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

BOKEH_RENDERED = (
    "window.Bokeh && Object.keys(Bokeh.index).length > 0"
    " && Object.values(Bokeh.index).every((view) => view.has_finished())"
)

F, G, H = ("/src/m.py", 1, "f"), ("/src/m.py", 9, "g"), ("/src/n.py", 3, "h")


def everything() -> RunData:
    """A run with every record type, keys that are tuples, ints, strings and
    bytes, worker ids that are ints and strings, spans and None groups."""
    run = RunData(meta={"title": "every record"}, cache_metric="bytes")
    keys = [("load-1a2b3c4d", i) for i in range(6)] + ["total-9f8e7d6c", 7, b"raw-1",
                                                        ("nested-1a2b3c4d", (0, "a"))]
    for i, k in enumerate(keys):
        run.tasks.append(TaskData(k, f"task {i}" if i % 2 else None, T0 + i * 0.1,
                                  T0 + i * 0.1 + 0.08, 100 + i % 2))
    run.failed.append(FailedTaskData("bad-00ff00ff", None, T0 + 1.0, T0 + 1.1, 100,
                                     "ValueError", "boom"))
    run.failed.append(FailedTaskData(("odd-00ff00ff", 1), None, T0 + 1.0, T0 + 1.05, None,
                                     "KeyError", ""))
    run.interrupted.append(InterruptedTaskData(("slow-1a2b3c4d", 0), None, T0 + 0.9,
                                               T0 + 1.2, "tcp://10.0.0.1:4000"))
    run.transfers.append(TransferData(keys[0], 100, T0 - 0.01, T0, T0 + 0.08, T0 + 0.09))
    run.resources += [ResourceData(T0 + 0.2 * i, 100.0 + i, 50.0 * i) for i in range(6)]
    run.cache += [CacheData(k, None, 1000 * (i + 1), T0 + i * 0.1 + 0.08,
                            None if i == 7 else T0 + 1.0) for i, k in enumerate(keys)]
    run.cache.append(CacheData("never-freed-1", None, 10, T0, math.nan))
    run.metrics = {
        ((), "load", "thread-cpu", "seconds"): 0.3,
        (("outer", "inner"), "load", "thread-noncpu", "seconds"): 0.1,
        ((), None, "idle", "seconds"): 0.2,
        (("outer",), "total", "I/O", "seconds"): 0.05,
        ((), "load", "serialize", "bytes"): 4096.0,
        ((), None, "scheduler", "count"): 3,
    }
    run.activities += [
        ActivityData(keys[0], "I/O", T0 + 0.01, T0 + 0.03, 100),            # inside its task
        ActivityData(keys[1], "queued", T0 + 0.05, T0 + 0.1, 101),          # before it
        ActivityData(keys[2], "serialize", T0 + 0.25, T0 + 0.3, 100),       # overlaps its end
        ActivityData("total-9f8e7d6c", "transfer", T0 + 0.7, T0 + 0.75, "tcp://10.0.0.1:4000"),
    ]
    run.samples += [SampleData(T0 + 0.01 * i, 100, "load" if i % 3 else None,
                               (F, G) if i % 2 else (F, H)) for i in range(50)]
    run.walls.append((T0 - 0.02, T0 + 1.3))
    return run


# --------------------------------------------------------------------------
# JSON


def test_json_round_trip_is_lossless_for_every_record_type(tmp_path):
    run = everything()
    run.cache.append(CacheData("weird-1", None, math.inf, T0, -math.inf))
    path = tmp_path / "run.json"
    run.save_json(path)
    again = load_json(path)
    for name in ("tasks", "failed", "interrupted", "transfers", "resources", "activities",
                 "samples", "walls", "metrics", "meta", "cache_metric"):
        assert getattr(again, name) == getattr(run, name), name
        if isinstance(getattr(run, name), list):
            assert [type(r) for r in getattr(again, name)] == \
                [type(r) for r in getattr(run, name)], name
    # NaN is never equal to itself: compare the cache records field by field
    assert len(again.cache) == len(run.cache)
    for a, b in zip(again.cache, run.cache, strict=False):
        assert type(a) is CacheData
        for x, y in zip(a, b, strict=False):
            assert x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
    # key types survive: tuples (nested too), ints, strings, bytes
    assert [r.key for r in again.tasks] == [r.key for r in run.tasks]
    import numpy as np

    assert RunData.from_json(RunData(tasks=[TaskData(np.int64(3), None, T0, T0, 1)])
                             .to_json()).tasks[0].key == 3
    assert {type(r.key) for r in again.tasks} == {tuple, str, int, bytes}
    assert again.tasks[-1].key == ("nested-1a2b3c4d", (0, "a"))
    # the metrics mapping keeps tuple spans and None groups
    assert ((), None, "idle", "seconds") in again.metrics
    assert (("outer", "inner"), "load", "thread-noncpu", "seconds") in again.metrics
    assert MetricData(("outer",), "total", "I/O", "seconds", 0.05) in list(again.metric_records())
    # sample stacks are tuples of (filename, line, function) tuples
    assert again.samples[1].stack == (F, G) and isinstance(again.samples[1].stack[0], tuple)
    # strict JSON: a browser's JSON.parse reads it
    text = path.read_text(encoding="utf-8")
    assert check_trace_text  # (the strict parser below is the trace checker's)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    # a second round trip writes the same text
    again.save_json(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text(encoding="utf-8") == text


def test_json_stores_task_specs_as_their_short_repr():
    run = RunData(tasks=[TaskData("a-1", (add, 1, 2), T0, T0 + 1, 1)],
                  cache=[CacheData("a-1", (add, 1, 2), 1, T0, T0 + 1)])
    again = RunData.from_json(run.to_json())
    assert again.tasks[0].task == "add(1, 2)" and again.cache[0].task == "add(1, 2)"
    # one repr stored for both records
    assert RunData.to_dict(run)["task_reprs"] == ["add(1, 2)"]


def test_json_is_columnar_and_interned():
    keys = [("x-1a2b3c4d", i) for i in range(100)]
    run = RunData(tasks=[TaskData(k, None, T0 + i, T0 + i + 1, 1) for i, k in enumerate(keys)],
                  cache=[CacheData(k, None, 1, T0 + i + 1, T0 + i + 2)
                         for i, k in enumerate(keys)])
    data = run.to_dict()
    assert len(data["keys"]) == 100  # each key stored once for tasks and cache
    assert data["workers"] == [1] and data["tasks"]["worker"] == [0] * 100
    assert data["tasks"]["key"] == data["cache"]["key"] == list(range(100))


def test_load_json_reads_the_data_embedded_in_a_report_page(tmp_path):
    run = everything()
    page = tmp_path / "report.html"
    run.to_html(page)
    assert load_json(page).tasks == run.tasks


def test_bad_files_are_clear_errors(tmp_path):
    (tmp_path / "other.json").write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(ValueError, match="other.json.*localsched-run"):
        load_json(tmp_path / "other.json")
    (tmp_path / "page.html").write_text("<html>nothing here</html>", encoding="utf-8")
    with pytest.raises(ValueError, match="page.html: neither"):
        load_json(tmp_path / "page.html")
    newer = everything().to_dict()
    newer["version"] = 99
    (tmp_path / "newer.json").write_text(json.dumps(newer), encoding="utf-8")
    with pytest.raises(ValueError, match="version 99 is newer"):
        load_json(tmp_path / "newer.json")


def test_from_profilers_gathers_a_real_run_and_merges():
    from localsched.threaded import get

    dsk = {("inc-1a2b3c4d", i): (add, i, 1) for i in range(10)}
    dsk["total-9f8e7d6c"] = (sum, list(dsk))
    with Profiler() as prof, CacheProfiler() as cprof, ResourceProfiler(dt=0.01) as rprof:
        assert get(dsk, "total-9f8e7d6c") == 55
    run = RunData.from_profilers([prof, cprof, rprof])
    assert len(run.tasks) == 11 and len(run.cache) == 11 and run.resources
    assert len(run.walls) == 1
    merged = RunData.from_profilers([run, RunData(metrics={((), "x", "idle", "seconds"): 1.0}),
                                     RunData(metrics={((), "x", "idle", "seconds"): 2.0})])
    assert merged.metrics == {((), "x", "idle", "seconds"): 3.0} and len(merged.tasks) == 11
    with pytest.raises(TypeError, match="cannot take records from object"):
        RunData.from_profilers([object()])


def test_stack_tree_counts_samples_by_group_and_window():
    samples = everything().samples
    tree = stack_tree(samples)
    assert tree["name"] == "all" and tree["count"] == 50
    (f,) = tree["children"]
    assert (f["name"], f["filename"], f["line"], f["count"]) == ("f", "/src/m.py", 1, 50)
    assert sorted((c["name"], c["count"]) for c in f["children"]) == [("g", 25), ("h", 25)]
    assert stack_tree(samples, group="load")["count"] == sum(s.group == "load" for s in samples)
    assert stack_tree(samples, start=T0 + 0.1, stop=T0 + 0.195)["count"] == 10
    deep = tuple(("/src/r.py", 1, f"r{i}") for i in range(5000))  # deeper than recursion
    node = stack_tree([SampleData(T0, 1, "r", deep)])
    for _ in range(5000):
        (node,) = node["children"]
    assert node["name"] == "r4999" and node["children"] == []


# --------------------------------------------------------------------------
# Trace Event Format


def test_the_checker_catches_what_viewers_reject():
    named = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}},
             {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t"}}]
    ok = named + [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
                  {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 3},
                  {"ph": "C", "name": "c", "pid": 1, "ts": 1, "args": {"v": 1.5}}]
    assert check_trace({"traceEvents": ok}) == []
    bad_cases = {
        "must nest": [{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10}],
        "counter values must be numbers": [
            {"ph": "C", "name": "c", "pid": 1, "ts": 1, "args": {"v": "1"}}],
        "dur must be": [{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5}],
        "ts must be": [{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": "5", "dur": 1}],
        "unknown phase": [{"ph": "Q", "pid": 1}],
        "no thread_name": [{"ph": "X", "name": "b", "pid": 1, "tid": 2, "ts": 5, "dur": 1}],
        "never ended": [{"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 5}],
        "unknown metadata": [{"ph": "M", "name": "thread_colour", "pid": 1, "args": {}}],
    }
    for message, extra in bad_cases.items():
        problems = check_trace({"traceEvents": ok + extra})
        assert any(message in p for p in problems), (message, problems)
    assert check_trace({"traceEvents": ok[2:]})  # unnamed process and thread
    assert check_trace_text('{"traceEvents": [{"ph": "C", "name": "c", "pid": 1, "ts": NaN, '
                            '"args": {"v": 1}}]}')


def test_trace_of_every_record_type_is_valid_and_nested(tmp_path):
    run = everything()
    path = tmp_path / "trace.json"
    trace = to_chrome_trace(path, run)
    assert check_trace_text(path.read_text(encoding="utf-8")) == []
    events = trace["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(n.split(" (")[0] for n in threads.values() if "outside" not in n) == \
        ["unknown worker", "worker 0", "worker 1", "worker 2"]
    slices = [e for e in events if e["ph"] == "X"]
    by_name = {}
    for e in slices:
        by_name.setdefault(e["name"], []).append(e)
    # one slice per task, on its worker's track, in microseconds since the first record
    first = by_name["('load-1a2b3c4d', 0)"][0]
    t0 = run.bounds()[0]
    assert first["ts"] == pytest.approx((T0 - t0) * 1e6) and first["dur"] == pytest.approx(8e4)
    assert trace["otherData"]["t0"] == t0 == pytest.approx(T0 - 0.01)  # the first transfer
    # the activity inside the task is nested in its slice, on its track
    (io,) = by_name["I/O"]
    assert io["tid"] == first["tid"] and first["ts"] <= io["ts"] and \
        io["ts"] + io["dur"] <= first["ts"] + first["dur"]
    # one partly outside its task is cut at the task's end (nesting), args keep the truth
    (ser,) = by_name["serialize"]
    task2 = by_name["('load-1a2b3c4d', 2)"][0]
    assert ser["tid"] == task2["tid"]
    assert ser["ts"] + ser["dur"] == pytest.approx(task2["ts"] + task2["dur"])
    assert ser["args"]["duration_s"] == pytest.approx(0.05)
    # one before its task, and the transfers, go to the worker's other track
    (queued,) = by_name["queued"]
    assert "outside tasks" in threads[queued["tid"]]
    assert {e["name"] for e in slices if e["cat"] == "transfer"} == \
        {"send inputs", "receive result"}
    assert by_name["bad-00ff00ff"][0]["cat"] == "failed"
    assert by_name["bad-00ff00ff"][0]["args"]["error"] == "ValueError: boom"
    assert by_name["('slow-1a2b3c4d', 0)"][0]["cat"] == "interrupted"
    samples = [e for e in events if e["ph"] == "i"]
    assert len(samples) == len(run.samples) and {e["name"] for e in samples} == {"g", "h"}
    assert samples[1]["args"]["stack"] == ["g (/src/m.py:9)", "f (/src/m.py:1)"]
    assert {e["tid"] for e in samples} == {first["tid"]}  # worker 100's track
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"CPU (%)", "Memory (MB)", "Cached results", "Cached (bytes)"}
    cached = [e["args"]["results"] for e in events if e["name"] == "Cached results"]
    assert max(cached) == len(run.cache) and cached[-1] == 0  # all in, then all out


def test_overlapping_slices_on_a_track_are_cut_to_nest():
    run = RunData(tasks=[TaskData("a-1", None, T0, T0 + 2, 1),
                         TaskData("b-1", None, T0 + 1, T0 + 3, 1)])  # impossible, but safe
    trace = run.to_chrome_trace()
    assert check_trace(trace) == []
    b = next(e for e in trace["traceEvents"] if e.get("name") == "b-1")
    assert (b["ts"], b["dur"]) == (1e6, 1e6) and b["args"]["duration_s"] == 2


def test_trace_of_a_real_process_run_is_valid(tmp_path):
    import localsched.multiprocessing as lmp

    dsk = {f"big-{i}": (bytes, 1_000_000) for i in range(4)}
    dsk["sizes"] = (sum, [(len, k) for k in list(dsk)])
    with Profiler() as prof, ResourceProfiler(dt=0.01) as rprof, CacheProfiler() as cprof:
        assert lmp.get(dsk, "sizes", num_workers=2) == 4_000_000
    path = tmp_path / "p.json"
    trace = to_chrome_trace(path, [prof, rprof, cprof])
    assert check_trace_text(path.read_text(encoding="utf-8")) == []
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert {f"big-{i}" for i in range(4)} <= names


# --------------------------------------------------------------------------
# The page


@pytest.fixture(scope="module")
def chromium():
    return require_chromium()


# Pick the last task group in the flame graph's selector, let Bokeh redraw,
# and report what the plot shows and what the page embeds.
FLIP_FLAME = r"""
(async () => {
  const doc = Bokeh.documents[0];
  const col = (d, k) => d instanceof Map ? d.get(k) : d[k];
  const select = doc.get_model_by_name('flame-group');
  const source = doc.get_model_by_name('flame').data_source;
  const before = col(source.data, 'count')[0];
  select.value = select.options[select.options.length - 1];
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const data = JSON.parse(document.getElementById('localsched-data').textContent);
  return {before, after: col(source.data, 'count')[0], options: select.options,
          tasks: data.tasks.key.length, format: data.format,
          scripts: Array.from(document.scripts).filter(s => s.src).length};
})()
"""


def test_report_page_works_offline_in_chromium(chromium, tmp_path):
    run = everything()
    path = tmp_path / "report.html"
    run.to_html(path)
    page = path.read_text(encoding="utf-8")
    assert "cdn.bokeh.org" not in page and "<script src=" not in page  # self-contained
    result = open_in_chromium(path, wait_for=BOKEH_RENDERED, evaluate=FLIP_FLAME,
                              executable=chromium)
    assert result.errors == [] and result.ready
    value = result.value
    assert value["scripts"] == 0 and value["format"] == "localsched-run"
    assert value["tasks"] == len(run.tasks)
    # the selector offers all samples, then each group's; switching redraws
    assert value["options"] == ["all", "load", NO_GROUP]
    assert value["before"] == 50 and value["after"] == sum(s.group is None for s in run.samples)
    for text in ("parallel efficiency", "Fine metrics", "Flame graph", "Task durations",
                 "Cache by task group (bytes)", "serialize"):
        assert text in result.dom, text


def test_report_figures_show_the_records():
    from bokeh.models import GridPlot

    from localsched.diagnostics.reporting import plots

    layout = plots.report_layout(everything())
    stream = next(c for c in layout.children if isinstance(c, GridPlot))
    task_fig = stream.children[0][0]
    acts = task_fig.select_one({"name": "activities"}).data_source.data
    assert sorted(acts["activity"]) == ["I/O", "queued", "serialize", "transfer"]
    assert acts["color"][acts["activity"].index("I/O")] != \
        acts["color"][acts["activity"].index("queued")]
    # an activity segment never takes a task group's colour
    bars = task_fig.select_one({"name": "tasks"}).data_source.data
    assert set(acts["color"]).isdisjoint(bars["color"])
    # (the per-group metrics chart; the accounting bar names its stacks too)
    metrics = next(r.data_source.data for r in layout.select({"name": "thread-cpu"})
                   if "group" in r.data_source.data)
    assert metrics["group"][0] == "load" and metrics["thread-cpu"][0] == 0.3
    assert list(layout.select_one({"name": "flame-group"}).options) == \
        ["all", "load", NO_GROUP]


def test_many_activities_are_aggregated_keeping_their_time():
    from localsched.diagnostics.reporting import plots

    n = 12_000
    acts = [ActivityData(("x-1a2b3c4d", i), "I/O", T0 + i * 1e-3, T0 + i * 1e-3 + 2e-4, 1)
            for i in range(n)]
    tasks = [TaskData(a.key, None, a.start, a.stop + 1e-4, 1) for a in acts]
    fig = plots.plot_tasks(tasks, activities=acts)
    data = fig.select_one({"name": "activities"}).data_source.data
    assert len(data["left"]) <= 2 * (plots.PIXELS + 2)
    import numpy as np

    area = (np.asarray(data["right"]) - np.asarray(data["left"])) * np.asarray(data["height"])
    assert area.sum() / plots.ACTIVITY_HEIGHT == pytest.approx(n * 2e-4, rel=1e-3)


def test_performance_report_records_a_real_run(tmp_path):
    path, data_path, trace_path = tmp_path / "r.html", tmp_path / "r.json", tmp_path / "t.json"
    dsk = {("inc-1a2b3c4d", i): (add, i, 1) for i in range(20)}
    dsk["total-9f8e7d6c"] = (sum, list(dsk))
    with localsched.performance_report(str(path), json=str(data_path), trace=str(trace_path),
                                       dt=0.01) as report:
        assert localsched.get(dsk, "total-9f8e7d6c") == 210
        assert localsched.get({"x-1": (len, "abc")}, "x-1") == 3
    data = report.data
    assert len(data.tasks) == 22 and len(data.walls) == 2
    assert data.cache_metric == "bytes"
    assert all(r.metric > 0 for r in data.cache)
    def times(run):  # (task specs are saved as their repr)
        return [(r.key, r.start_time, r.end_time, r.worker_id) for r in run.tasks]

    assert path.stat().st_size > 0 and times(load_json(data_path)) == times(data)
    assert check_trace_text(trace_path.read_text(encoding="utf-8")) == []
    report.save_json(tmp_path / "again.json")
    assert times(load_json(tmp_path / "again.json")) == times(data)
    # nothing stays registered or running
    from localsched.callbacks import Callback

    assert not Callback.active


def test_performance_report_writes_the_page_when_the_block_fails(tmp_path):
    path = tmp_path / "failed.html"
    with pytest.raises(ZeroDivisionError):
        with localsched.performance_report(str(path), samples=False) as report:
            localsched.get({"a-1": (add, 1, 1), "b-1": (lambda x: x / 0, "a-1")}, "b-1")
    assert [r.key for r in report.data.failed] == ["b-1"]
    assert "ZeroDivisionError" in path.read_text(encoding="utf-8")
    with pytest.raises(RuntimeError, match="once the with block ended"):
        localsched.performance_report(None).save_json(tmp_path / "x.json")


# --------------------------------------------------------------------------
# The commands


def run_cli(*args, cwd, timeout=180):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "localsched.command.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_report_command_renders_a_saved_run(tmp_path):
    everything().save_json(tmp_path / "data.json")
    proc = run_cli("report", "data.json", "-o", "again.html", "--trace", "t.json",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "written:" in proc.stderr and "again.html" in proc.stderr
    assert load_json(tmp_path / "again.html").tasks == everything().tasks
    assert check_trace_text((tmp_path / "t.json").read_text(encoding="utf-8")) == []
    # a page is a valid input too, and several runs merge into one report
    proc = run_cli("report", "again.html", "data.json", "-o", "both.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(load_json(tmp_path / "both.html").tasks) == 2 * len(everything().tasks)
    # bad input: a clear message, no traceback
    (tmp_path / "x.json").write_text("[]", encoding="utf-8")
    proc = run_cli("report", "x.json", cwd=tmp_path)
    assert proc.returncode != 0 and "x.json" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("report", "missing.json", cwd=tmp_path)
    assert proc.returncode != 0 and "cannot read missing.json" in proc.stderr


def test_profile_command_writes_report_json_and_trace(tmp_path):
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        from operator import add
        import localsched
        parts = [localsched.delayed(add)(i, 1) for i in range(30)]
        print("result", localsched.delayed(sum)(parts).compute())
    """), encoding="utf-8")
    proc = run_cli("profile", "--no-progress", "--dt", "0.01", "--json", "run.json",
                   "--trace", "trace.json", "job.py", "-o", "page.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "result 465" in proc.stdout and "31 tasks" in proc.stderr
    run = load_json(tmp_path / "run.json")
    assert len(run.tasks) == 31 and run.cache_metric == "bytes"
    assert load_json(tmp_path / "page.html").tasks == run.tasks
    assert check_trace_text((tmp_path / "trace.json").read_text(encoding="utf-8")) == []
    assert "Flame graph" in (tmp_path / "page.html").read_text(encoding="utf-8")


# --------------------------------------------------------------------------
# With the real collectors of the fine metrics and the stack samples


def spin(seconds):
    """Burn CPU in this very function, part of it inside a metered block."""
    from localsched.metrics import meter

    with meter("I/O"):
        end = time.thread_time() + seconds / 2
        while time.thread_time() < end:
            pass
    end = time.thread_time() + seconds / 2
    while time.thread_time() < end:
        pass
    return seconds


@pytest.mark.parametrize("name", ["threads", "processes"])
def test_performance_report_with_fine_metrics_and_samples(name, tmp_path):
    import localsched.multiprocessing as lmp
    from localsched.threaded import get as tget

    get = tget if name == "threads" else lmp.get
    dsk = {("spin-1a2b3c4d", i): (spin, 0.1) for i in range(4)}
    dsk["total-9f8e7d6c"] = (sum, list(dsk))
    path, trace_path = tmp_path / "r.html", tmp_path / "t.json"
    with localsched.performance_report(str(path), trace=str(trace_path),
                                       interval=0.005) as report:
        assert get(dsk, "total-9f8e7d6c", num_workers=2) == pytest.approx(0.4)
    data = report.data
    activities = {a for (_, g, a, unit) in data.metrics if g == "spin" and unit == "seconds"}
    assert {"thread-cpu", "I/O"} <= activities
    metered = [r for r in data.activities if r.activity == "I/O"]
    assert sorted(r.key for r in metered) == sorted(k for k in dsk if k[0] == "spin-1a2b3c4d")
    # the samples account for the spin tasks' time (each sample stands for
    # the seconds since the sampler's previous look, however loaded the machine)
    sampled = sum(s.seconds for s in data.samples if s.group == "spin")
    ran = sum(t.end_time - t.start_time for t in data.tasks if t.key[0] == "spin-1a2b3c4d")
    assert sampled == pytest.approx(ran, rel=0.25), (sampled, ran)
    spin_tree = data.stack_tree(group="spin")
    assert "spin" in [c["name"] for c in spin_tree["children"]]
    # the report's tree is the sampler's
    from localsched.diagnostics.collectors.sampler import tree

    def shape(node):
        return (node["name"], node["count"], sorted(shape(c) for c in node["children"]))

    assert shape(spin_tree) == shape(tree(data.samples, group="spin"))
    # the trace nests each metered block inside its task's slice
    assert check_trace_text(trace_path.read_text(encoding="utf-8")) == []
    events = json.loads(trace_path.read_text(encoding="utf-8"))["traceEvents"]
    tasks = {e["name"]: e for e in events if e.get("cat") == "task"}
    for e in (e for e in events if e["ph"] == "X" and e["name"] == "I/O"):
        task = tasks[e["args"]["key"]]
        assert task["tid"] == e["tid"]
        assert task["ts"] - 1e-3 <= e["ts"] and \
            e["ts"] + e["dur"] <= task["ts"] + task["dur"] + 1e-3
    page = path.read_text(encoding="utf-8")
    assert "No fine metrics were recorded" not in page and "No stack samples" not in page


def test_real_report_opens_in_chromium_and_switches_the_flame_graph(chromium, tmp_path):
    from localsched.threaded import get

    dsk = {("spin-1a2b3c4d", i): (spin, 0.1) for i in range(4)}
    path = tmp_path / "real.html"
    with localsched.performance_report(str(path), interval=0.005) as report:
        get(dsk, list(dsk), num_workers=2)
    result = open_in_chromium(path, wait_for=BOKEH_RENDERED, evaluate=FLIP_FLAME,
                              executable=chromium)
    assert result.errors == [] and result.ready
    assert "spin" in result.value["options"]
    assert result.value["tasks"] == len(report.data.tasks) == 4
    assert "I/O" in result.dom and "thread-cpu" in result.dom


def test_performance_report_without_metrics_or_samples():
    with localsched.performance_report(None, samples=False, metrics=False) as plain:
        pass
    assert [type(p).__name__ for p in plain.profilers] == \
        ["ResourceProfiler", "Profiler", "CacheProfiler"]


def test_json_time_columns_are_exact_ticks():
    times = [T0 + i / 7 for i in range(100)]
    run = RunData(tasks=[TaskData(("x-1a2b3c4d", i), None, t, t + 1e-6, 1)
                         for i, t in enumerate(times)])
    column = run.to_dict()["tasks"]["start"]
    assert set(column) == {"base", "q", "k"} and column["base"] == T0
    assert [r.start_time for r in RunData.from_json(run.to_json()).tasks] == times


def test_performance_report_on_processes_hands_back_no_more_results(tmp_path):
    from localsched.diagnostics import performance_report

    from ..collectors.test_cache import _handed_back

    _handed_back(tmp_path, "warm", [])
    baseline = _handed_back(tmp_path, "plain", [])
    with performance_report(filename=str(tmp_path / "report.html")):
        observed = _handed_back(tmp_path, "observed", None)
    assert observed == baseline


def test_the_report_shows_the_accounting_as_a_bar_and_a_table_of_100_percent(tmp_path):
    from localsched.diagnostics import performance_report
    from localsched.diagnostics.figures.accounting import accounting_html, plot_accounting
    from localsched.threaded import get

    dsk = {("a", i): (sum, [i, 1]) for i in range(50)}
    dsk.update({("b", i): (sum, [("a", i), ("a", (i + 1) % 50)]) for i in range(50)})
    with performance_report(filename=str(tmp_path / "r.html")) as report:
        get(dsk, [("b", i) for i in range(50)], num_workers=2)
    metrics = report.data.metrics
    fig = plot_accounting(metrics)
    shares = [r.data_source.data[r.name][0] for r in fig.renderers]
    assert sum(shares) == pytest.approx(100.0)
    assert {r.name for r in fig.renderers} >= {"thread-cpu", "idle"}
    table = accounting_html(metrics)
    assert "<b>100%</b>" in table and "scheduler (caller)" in table
    # the table is the bar's legend: each activity in the colour of its bar
    for r in fig.renderers:
        swatch = f"background:{r.glyph.fill_color}'></span>{r.name}<"
        assert swatch in table, r.name
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Where the worker-seconds went" in page
