"""Saved runs that are malformed or crafted: one clear error naming the file
and what is wrong, never a raw traceback; and a small file never makes a
huge page, trace or load."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tracemalloc

import pytest

from localsched.diagnostics.collectors.records import (
    ActivityData,
    CacheData,
    FailedTaskData,
    InterruptedTaskData,
    ResourceData,
    SampleData,
    TaskData,
    TransferData,
)
from localsched.diagnostics.report import RunData, RunFileError
from localsched.diagnostics.runs import codec, runcheck

T0 = 1.7e9


def sample_run() -> RunData:
    """A run with every record list filled (long enough for tick columns)."""
    stack = (("job.py", 3, "main"), ("job.py", 9, "load"))
    return RunData(
        tasks=[TaskData((f"load-{i % 3}", i), None, T0 + i, T0 + i + 0.5, i % 2)
               for i in range(20)],
        failed=[FailedTaskData("bad", "(f, 1)", T0, T0 + 1, 0, "ValueError", "no")],
        interrupted=[InterruptedTaskData("cut", None, T0, T0 + 2, 1)],
        transfers=[TransferData(("load-0", 0), 0, T0, T0 + 0.1, T0 + 0.5, T0 + 0.6)],
        resources=[ResourceData(T0 + i / 4, 100.0 + i, 50.0) for i in range(20)],
        cache=[CacheData(("load-1", 1), None, 8.0, T0 + 1, T0 + 3)],
        metrics={(("span",), "load", "thread-cpu", "seconds"): 1.5},
        activities=[ActivityData(("load-1", 1), "I/O", T0 + 1, T0 + 1.2, 1)],
        samples=[SampleData(T0 + i / 10, 0, "load", stack, 0.1) for i in range(20)],
        walls=[(T0, T0 + 25)],
        meta={"title": "sample"},
    )


def good() -> dict:
    return sample_run().to_dict()


def edit(path_in_data, value):
    """A malformed copy of the sample run: ``value`` at ``path_in_data``
    (a tuple of keys/indices; ``DELETE`` removes it)."""
    data = good()
    *parents, last = path_in_data
    node = data
    for p in parents:
        node = node[p]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return data


DELETE = object()


def deep(n):
    value: list = []
    for _ in range(n):
        value = [value]
    return value


#: name -> (file text, words the error must contain)
MALFORMED = {
    "empty": ("", "neither a localsched run"),
    "truncated": (json.dumps(good())[:300], "cut short"),
    "not-json": ("{tasks: 1}", "not valid JSON"),
    "a-list": ("[1, 2]", "neither a localsched run"),
    "other-format": (json.dumps({"format": "other"}), "not a localsched run"),
    "version-text": (json.dumps(edit(("version",), "1")), "version"),
    "version-newer": (json.dumps(edit(("version",), 99)), "newer"),
    "version-negative": (json.dumps(edit(("version",), -1)), "version"),
    "meta-list": (json.dumps(edit(("meta",), [1])), "meta"),
    "cache-metric-number": (json.dumps(edit(("cache_metric",), 3)), "cache_metric"),
    "no-tasks": (json.dumps(edit(("tasks",), DELETE)), "tasks: missing"),
    "no-keys": (json.dumps(edit(("keys",), DELETE)), "keys: missing"),
    "no-task-start": (json.dumps(edit(("tasks", "start"), DELETE)), "tasks.start: missing"),
    "tasks-a-list": (json.dumps(edit(("tasks",), [])), "tasks: expected an object"),
    "keys-an-object": (json.dumps(edit(("keys",), {})), "keys: expected a list"),
    "key-code-text": (json.dumps(edit(("tasks", "key", 0), "0")), "tasks.key[0]"),
    "key-code-out": (json.dumps(edit(("tasks", "key", 3), 10 ** 6)), "tasks.key[3]"),
    "key-code-negative": (json.dumps(edit(("tasks", "key", 3), -1)), "tasks.key[3]"),
    "key-code-float": (json.dumps(edit(("tasks", "key", 3), 0.0)), "tasks.key[3]"),
    "key-code-bool": (json.dumps(edit(("tasks", "key", 3), True)), "tasks.key[3]"),
    "worker-code-out": (json.dumps(edit(("failed", "worker", 0), 99)), "failed.worker[0]"),
    "column-lengths": (json.dumps(edit(("failed", "exc_type"), [])), "failed.exc_type"),
    "time-text": (json.dumps(edit(("failed", "start", 0), "noon")), "failed.start[0]"),
    "time-nan": (json.dumps(edit(("failed", "start", 0), {"float": "nan"})),
                 "failed.start[0]"),
    "time-null": (json.dumps(edit(("failed", "end", 0), None)), "failed.end[0]"),
    "time-huge": (json.dumps(edit(("failed", "end", 0), 1e300)), "failed.end[0]"),
    "time-bigint": ('{"format":"localsched-run","version":1,"x":' + "9" * 5000 + "}",
                    "not valid JSON"),
    "ticks-bad-q": (json.dumps(edit(("tasks", "start", "q"), 0)), "tasks.start"),
    "ticks-no-k": (json.dumps(edit(("tasks", "start", "k"), DELETE)), "tasks.start"),
    "ticks-huge-k": (json.dumps(edit(("tasks", "start", "k", 2), 2 ** 80)), "tasks.start.k[2]"),
    "ticks-float-k": (json.dumps(edit(("tasks", "start", "k", 2), 1.5)), "tasks.start.k[2]"),
    "mem-negative": (json.dumps(edit(("resources", "mem", "base"), -5.0)), "resources.mem"),
    "metric-negative": (json.dumps(edit(("cache", "metric", 0), -1)), "cache.metric[0]"),
    "cpu-nan": (json.dumps(edit(("resources", "cpu", "base"), {"float": "nan"})),
                "resources.cpu"),
    "seconds-negative": (json.dumps(edit(("samples", "seconds"), [-0.5] * 20)),
                         "samples.seconds[0]"),
    "free-time-huge": (json.dumps(edit(("cache", "free_time", 0), -1e200)),
                       "cache.free_time[0]"),
    "message-number": (json.dumps(edit(("failed", "message", 0), 7)), "failed.message[0]"),
    "repr-number": (json.dumps(edit(("task_reprs", 0), 5)), "task_reprs[0]"),
    "key-bytes-not-hex": (json.dumps(edit(("keys", 0), {"bytes": "zz"})), "keys[0]"),
    "key-unknown-object": (json.dumps(edit(("keys", 0), {"what": 1})), "keys[0]"),
    "key-too-deep": (json.dumps(edit(("keys", 0), deep(100))), "nested more than"),
    "json-too-deep": ('{"format":"localsched-run","version":1,"keys":' + "[" * 100_000
                      + "]" * 100_000 + "}", "nested too deeply"),
    "frame-short": (json.dumps(edit(("frames", 0), ["job.py", 3])), "frames[0]"),
    "stack-code-out": (json.dumps(edit(("stacks", 0, 1), 50)), "stacks[0][1]"),
    "sample-stack-out": (json.dumps(edit(("samples", "stack", 0), 9)), "samples.stack[0]"),
    "metrics-row-short": (json.dumps(edit(("metrics", 0), [[], "g", "a"])), "metrics[0]"),
    "metrics-value-text": (json.dumps(edit(("metrics", 0, 4), "1")), "metrics[0][4]"),
    "walls-three": (json.dumps(edit(("walls", 0), [1.0, 2.0, 3.0])), "walls[0]"),
    "walls-not-list": (json.dumps(edit(("walls",), 5)), "walls"),
    "page-without-data": ("<html><body>hello</body></html>", "neither"),
    "page-cut-short": ('<html><script type="application/json" id="localsched-data">{"form',
                       "cut short"),
}


def test_the_sample_run_itself_loads(tmp_path):
    path = tmp_path / "good.json"
    sample_run().save_json(path)
    run = RunData.load_json(path)
    assert run.tasks == sample_run().tasks and run.samples == sample_run().samples


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_file_is_one_clear_error_naming_it(tmp_path, name):
    text, words = MALFORMED[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RunFileError) as info:
        RunData.load_json(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert words in message, message
    assert "\n" not in message and len(message) < 400, message


def test_bytes_that_are_not_utf8_name_the_file(tmp_path):
    path = tmp_path / "latin.json"
    path.write_bytes(b'{"format": "localsched-run", "x": "caf\xe9"}')
    with pytest.raises(RunFileError, match=r"latin\.json: not UTF-8 text"):
        RunData.load_json(path)


def test_the_checker_knows_this_format_version():
    assert runcheck._VERSION == codec.VERSION and runcheck._FORMAT == codec.FORMAT


def test_from_dict_checks_too():
    with pytest.raises(RunFileError, match="run data: tasks.key"):
        RunData.from_dict(edit(("tasks", "key", 0), -3))


def test_cli_report_of_malformed_files_is_one_line_each(tmp_path):
    for name in ("truncated", "key-code-negative", "json-too-deep", "time-bigint"):
        (tmp_path / f"{name}.json").write_text(MALFORMED[name][0], encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "localsched.command.cli", "report",
                               f"{name}.json"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode != 0
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"localsched: {name}.json: "), lines
        assert not (tmp_path / "report.html").exists()


# -- crafted files: a few bytes per record standing for a long text or a deep stack


def empty_run() -> dict:
    return RunData().to_dict()


def zeros(n, base=T0):
    return {"base": base, "q": 1.0, "k": [0] * n}


def shared_key(n=5_000, length=5_000) -> dict:
    """Every task shares one long key and one long task text."""
    data = empty_run()
    data.update(keys=["k" * length], workers=[1], task_reprs=["t" * length])
    data["tasks"] = {"key": [0] * n, "task": [0] * n, "start": zeros(n),
                     "end": zeros(n, T0 + 1), "worker": [0] * n}
    data["cache"] = {"key": [0] * n, "task": [0] * n, "metric": zeros(n, 8.0),
                     "cache_time": zeros(n, T0 + 1), "free_time": zeros(n, T0 + 2)}
    return data


def shared_stack(n=20_000, depth=3_000) -> dict:
    """Every sample shares one deep stack."""
    data = empty_run()
    data.update(keys=["a"], workers=[1], task_reprs=[None], sample_groups=["a"],
                frames=[["job.py", 1, "f" * 40]], stacks=[[0] * depth])
    data["tasks"] = {"key": [0], "task": [0], "start": [T0], "end": [T0 + 1], "worker": [0]}
    data["samples"] = {"time": zeros(n), "worker": [0] * n, "group": [0] * n,
                       "stack": [0] * n, "seconds": zeros(n, 0.01)}
    return data


def shared_shallow_stack(n=20_000) -> dict:
    """Many samples of one stack just under the frame budget: loads, and the
    trace writes it within its own budget."""
    depth = (runcheck.EXPANSION * 200_000) // n
    data = shared_stack(n, depth)
    data["frames"] = [["/" + "d" * 150 + ".py", 1, "g" * 150]]
    return data


def write(tmp_path, name, data) -> tuple:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    return path, path.stat().st_size


def test_a_stack_shared_by_many_samples_is_refused_quickly(tmp_path):
    path, size = write(tmp_path, "stack", shared_stack())
    tracemalloc.start()
    try:
        with pytest.raises(RunFileError, match="stack frames referenced by the samples"):
            RunData.load_json(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * size  # (the parsed JSON, not the stacks expanded)


@pytest.mark.parametrize("craft", [shared_key, shared_shallow_stack])
def test_outputs_of_a_crafted_file_stay_within_a_small_multiple_of_it(tmp_path, craft):
    path, size = write(tmp_path, craft.__name__, craft())
    tracemalloc.start()
    try:
        run = RunData.load_json(path)
        loaded = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert loaded < 40 * size
    run.to_html(tmp_path / "r.html", mode="cdn")  # (cdn: no bokeh inline, its ~5 MB constant)
    run.to_chrome_trace(tmp_path / "t.json")
    page, trace = (tmp_path / "r.html").stat().st_size, (tmp_path / "t.json").stat().st_size
    assert page < 64 * size + 1_000_000, (page, size)
    assert trace < 64 * size + 1_000_000, (trace, size)


def test_long_texts_are_cut_where_repeated_but_kept_in_the_json(tmp_path):
    run = RunData.from_dict(shared_key(n=50, length=5_000))
    trace = run.to_chrome_trace()
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert all(len(n) <= runcheck.TEXT_LIMIT for n in names)
    again = RunData.from_json(run.to_json())
    assert again.tasks[0].key == "k" * 5_000  # the data itself is exact


def test_an_unknown_size_survives_a_round_trip():
    run = sample_run()
    run.cache.append(CacheData("x", None, math.nan, T0, T0 + 1))
    again = RunData.from_json(run.to_json())
    assert math.isnan(again.cache[-1].metric)


def test_an_older_page_is_read_back(tmp_path):
    path = tmp_path / "r.html"
    sample_run().to_html(path, mode="cdn")
    assert RunData.load_json(path).tasks == sample_run().tasks


def test_a_deep_shared_stack_built_in_memory_renders_within_bounds(tmp_path):
    # (from_dict has no file size to bound it: the renderers' own limits hold)
    data = shared_stack(n=5_000, depth=3_000)
    size = len(json.dumps(data, separators=(",", ":")))
    run = RunData.from_dict(data)
    trace = run.to_chrome_trace(tmp_path / "t.json")
    assert (tmp_path / "t.json").stat().st_size < 64 * size + 1_000_000
    stacks = [e for e in trace["traceEvents"] if e.get("cat") == "sample"]
    depth = trace["otherData"]["stack_frames_per_sample"]
    assert len(stacks) == 5_000 and 1 <= depth < 3_000
    assert all(len(e["args"]["stack"]) == depth for e in stacks)
    assert stacks[0]["args"]["outer_frames_left_out"] == 3_000 - depth
    run.to_html(tmp_path / "r.html", mode="cdn")
    assert (tmp_path / "r.html").stat().st_size < 64 * size + 1_000_000
