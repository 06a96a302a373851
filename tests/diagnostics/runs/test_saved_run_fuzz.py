"""Crafted and malformed saved runs, every section a reader uses: each file
either loads and every reader (the analysis, the findings, the memory peak,
``save_json``, the trace, ``compare``'s split) answers it correctly, or it is
one clear ``RunFileError`` naming the file and the field -- never a raw
traceback; and what a file costs to read and analyse stays proportional to
its size (a task repeated in a graph's ``order`` or ``deps`` once cost
seconds and hundreds of MB for a 17 KB file)."""

from __future__ import annotations

import copy
import json
import math
import tracemalloc

import pytest

from localsched.diagnostics.analysis.comparison import split_side_by_side
from localsched.diagnostics.collectors.records import (
    ActivityData,
    CacheData,
    FailedTaskData,
    GraphData,
    InterruptedTaskData,
    ResourceData,
    SampleData,
    TaskData,
    TransferData,
)
from localsched.diagnostics.report import RunData, RunFileError

T0 = 1.7e9


def base_run() -> RunData:
    """Six tasks in one computation (a chain of two, a fan-in), sizes in
    bytes, a side-by-side mark: every section a reader uses is filled."""
    keys = [("a", i) for i in range(4)] + ["b", "c"]
    tasks = [TaskData(k, None, T0 + i, T0 + i + 1.0, i % 2) for i, k in enumerate(keys)]
    cache = [CacheData(k, None, 1e6, T0 + i + 1.0, T0 + 7.0) for i, k in enumerate(keys)]
    graph = GraphData(keys, [(), (), (), (), (0, 1, 2, 3), (4,)], [0, 1, 2, 3, 4, 5],
                      T0, T0 + 7.0, 2, T0 - 0.5)
    stack = (("job.py", 3, "main"), ("job.py", 9, "load"))
    return RunData(tasks=tasks, cache=cache, cache_metric="bytes", graphs=[graph],
                   walls=[(T0, T0 + 7.0)],
                   failed=[FailedTaskData("bad", "(f, 1)", T0, T0 + 1, 0, "ValueError", "no")],
                   interrupted=[InterruptedTaskData("cut", None, T0, T0 + 2, 1)],
                   transfers=[TransferData("b", 0, T0 + 4, T0 + 4.1, T0 + 5, T0 + 5.1)],
                   resources=[ResourceData(T0 + i, 100.0 + i, 50.0) for i in range(3)],
                   metrics={(("span",), "a", "thread-cpu", "seconds"): 1.5,
                            (("span",), "a", "thread-noncpu", "seconds"): 0.5},
                   activities=[ActivityData(("a", 1), "I/O", T0 + 1, T0 + 1.2, 1)],
                   samples=[SampleData(T0 + i / 10, 0, "a", stack, 0.01) for i in range(3)],
                   meta={"title": "base", "started": T0 - 1, "finished": T0 + 8,
                         "scheduler": "threads", "sample_interval": 0.01,
                         "gil_waits": {"a": [3, 1, 0.002]},
                         "runs": [{"name": "one", "start": T0},
                                  {"name": "two", "start": T0 + 4}]})


def base() -> dict:
    return json.loads(base_run().to_json())


DELETE = object()


def edit(*changes) -> dict:
    """The base run's JSON with ``(path, value)`` changes (``DELETE`` removes)."""
    data = base()
    for path, value in changes:
        *parents, last = path
        node = data
        for p in parents:
            node = node[p]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return data


NAN, INF = {"float": "nan"}, {"float": "inf"}
G = ("graphs", 0)

#: name -> (the file's data, words its error must contain)
REFUSED = {
    # graphs
    "graphs-not-a-list": (edit((("graphs",), {"keys": []})), "graphs"),
    "graph-not-an-object": (edit(((*G,), [1, 2])), "graphs[0]"),
    "graph-no-keys": (edit(((*G, "keys"), DELETE)), "graphs[0].keys"),
    "graph-keys-text": (edit(((*G, "keys"), "abc")), "graphs[0].keys"),
    "graph-key-out": (edit(((*G, "keys", 2), 99)), "graphs[0].keys[2]"),
    "graph-key-negative": (edit(((*G, "keys", 2), -1)), "graphs[0].keys[2]"),
    "graph-key-float": (edit(((*G, "keys", 2), 1.0)), "graphs[0].keys[2]"),
    "graph-key-repeated": (edit(((*G, "keys", 2), 1)), "graphs[0].keys[2]"),
    "graph-no-deps": (edit(((*G, "deps"), DELETE)), "graphs[0].deps"),
    "graph-deps-short": (edit(((*G, "deps"), [[], []])), "graphs[0].deps"),
    "graph-deps-entry-number": (edit(((*G, "deps", 4), 3)), "graphs[0].deps[4]"),
    "graph-dep-out": (edit(((*G, "deps", 4, 0), 6)), "graphs[0].deps[4][0]"),
    "graph-dep-negative": (edit(((*G, "deps", 4, 0), -2)), "graphs[0].deps[4][0]"),
    "graph-dep-bool": (edit(((*G, "deps", 5, 0), True)), "graphs[0].deps[5][0]"),
    "graph-dep-text": (edit(((*G, "deps", 5, 0), "4")), "graphs[0].deps[5][0]"),
    "graph-dep-repeated": (edit(((*G, "deps", 4), [0, 1, 0])), "graphs[0].deps[4][2]"),
    "graph-dep-on-itself": (edit(((*G, "deps", 5), [5])), "graphs[0].deps[5]"),
    "graph-cycle": (edit(((*G, "deps", 0), [5])), "cycle"),
    "graph-order-text": (edit(((*G, "order"), "012345")), "graphs[0].order"),
    "graph-order-out": (edit(((*G, "order", 1), 6)), "graphs[0].order[1]"),
    "graph-order-negative": (edit(((*G, "order", 1), -1)), "graphs[0].order[1]"),
    "graph-order-repeated": (edit(((*G, "order", 5), 4)), "graphs[0].order[5]"),
    "graph-started-missing": (edit(((*G, "started"), DELETE)), "graphs[0].started"),
    "graph-started-nan": (edit(((*G, "started"), NAN)), "graphs[0].started"),
    "graph-started-text": (edit(((*G, "started"), "noon")), "graphs[0].started"),
    "graph-finished-inf": (edit(((*G, "finished"), INF)), "graphs[0].finished"),
    "graph-finished-before-start": (edit(((*G, "finished"), T0 - 5)), "graphs[0].finished"),
    "graph-submitted-nan": (edit(((*G, "submitted"), NAN)), "graphs[0].submitted"),
    "graph-workers-negative": (edit(((*G, "workers"), -2)), "graphs[0].workers"),
    "graph-workers-float": (edit(((*G, "workers"), 2.5)), "graphs[0].workers"),
    "graph-workers-huge": (edit(((*G, "workers"), 10 ** 30)), "graphs[0].workers"),
    "graph-workers-text": (edit(((*G, "workers"), "2")), "graphs[0].workers"),
    # meta
    "meta-nan": ('{"format":"localsched-run","version":1,"meta":NaN}', "meta"),
    "meta-runs-text": (edit((("meta", "runs"), "one,two")), "meta.runs"),
    "meta-runs-entry-number": (edit((("meta", "runs", 1), 5)), "meta.runs[1]"),
    "meta-runs-start-text": (edit((("meta", "runs", 1, "start"), "later")),
                             "meta.runs[1].start"),
    "meta-runs-start-nan": (edit((("meta", "runs", 1, "start"), NAN)), "meta.runs[1].start"),
    "meta-runs-start-missing": (edit((("meta", "runs", 0, "start"), DELETE)),
                                "meta.runs[0].start"),
    "meta-runs-start-huge": (edit((("meta", "runs", 0, "start"), 1e300)),
                             "meta.runs[0].start"),
    "meta-runs-name-list": (edit((("meta", "runs", 0, "name"), [1])), "meta.runs[0].name"),
    "meta-started-nan": (edit((("meta", "started"), NAN)), "meta.started"),
    "meta-started-text": (edit((("meta", "started"), "noon")), "meta.started"),
    "meta-finished-inf": (edit((("meta", "finished"), INF)), "meta.finished"),
    "meta-title-number": (edit((("meta", "title"), 5)), "meta.title"),
    "meta-scheduler-list": (edit((("meta", "scheduler"), ["threads"])), "meta.scheduler"),
    "meta-dashboard-number": (edit((("meta", "dashboard"), 8787)), "meta.dashboard"),
    "meta-interval-nan": (edit((("meta", "sample_interval"), NAN)), "meta.sample_interval"),
    "meta-interval-negative": (edit((("meta", "sample_interval"), -1)),
                               "meta.sample_interval"),
    "meta-gil-waits-list": (edit((("meta", "gil_waits"), [1, 2])), "meta.gil_waits"),
    "meta-gil-waits-short": (edit((("meta", "gil_waits", "a"), [3])), "meta.gil_waits.a"),
    "meta-gil-waits-text": (edit((("meta", "gil_waits", "a"), ["3", 1, 0.0])),
                            "meta.gil_waits.a"),
    "meta-gil-waits-negative": (edit((("meta", "gil_waits", "a"), [3, -1, 0.0])),
                                "meta.gil_waits.a"),
    # huge counts and bad numbers elsewhere
    "cache-time-inf": (edit((("cache", "cache_time", 0), INF)), "cache.cache_time[0]"),
    "literal-nan-time": (json.dumps(edit((("tasks", "start", 2), math.nan))),
                         "tasks.start[2]"),
}


def write(tmp_path, name, data) -> tuple:
    path = tmp_path / f"{name}.json"
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    path.write_text(text, encoding="utf-8")
    return path, len(text)


def read_everything(run: RunData, tmp_path) -> dict:
    """What every reader of a run makes of it (``localsched report`` without
    bokeh's page: ``analysis`` is what the page shows)."""
    analysis = run.analysis()
    run.save_json(tmp_path / "again.json")
    run.to_chrome_trace(tmp_path / "trace.json")
    split_side_by_side(run)
    return analysis


def test_the_base_run_loads_and_reads(tmp_path):
    path, _ = write(tmp_path, "base", base())
    run = RunData.load_json(path)
    analysis = read_everything(run, tmp_path)
    assert analysis["critical_path"]["seconds"] == pytest.approx(3.0)  # ('a', 3) -> b -> c
    assert run.memory_peak().bytes == 6e6


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_malformed_section_is_one_clear_error(tmp_path, name):
    data, words = REFUSED[name]
    path, _ = write(tmp_path, name, data)
    with pytest.raises(RunFileError) as info:
        RunData.load_json(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert words in message, message
    assert "\n" not in message and len(message) < 400, message
    assert "Error:" not in message, message  # (not a gap in the check)


# -- accepted edges: the right answer ---------------------------------------------


@pytest.mark.parametrize("never", [None, NAN, INF])
def test_results_never_freed_are_held_to_the_end(tmp_path, never):
    """``free_time`` null, NaN or infinite: held until the run's last record."""
    data = base()
    data["cache"]["free_time"] = [never] * 6
    path, _ = write(tmp_path, "never", data)
    run = RunData.load_json(path)
    analysis = read_everything(run, tmp_path)
    peak = run.memory_peak()
    assert peak.bytes == 6e6 and sum(peak.by_group.values()) == 6e6
    assert peak.by_group == {"a": 4e6, "b": 1e6, "c": 1e6}
    assert analysis["memory_peak"]["bytes"] == 6e6
    assert isinstance(run.findings(), list)
    times, series = _held(run)
    assert all(math.isfinite(t) for t in times) and times[-1] == T0 + 7


def _held(run):
    from localsched.diagnostics.analysis.memory import held_over_time

    return held_over_time(run)


def test_one_result_never_freed_among_freed_ones(tmp_path):
    data = base()
    data["cache"]["free_time"] = [T0 + 2.0, None, T0 + 4.0, T0 + 5.0, T0 + 6.0, T0 + 7.0]
    run = RunData.load_json(write(tmp_path, "one", data)[0])
    # first 3 held at T0 + 4: ('a', 1) never freed, ('a', 2) and ('a', 3)
    peak = run.memory_peak()
    assert (peak.time, peak.bytes, peak.by_group) == (T0 + 4, 3e6, {"a": 3e6})
    read_everything(run, tmp_path)


def test_unknown_and_infinite_sizes_count_as_unknown(tmp_path):
    data = base()
    data["cache"]["metric"] = [NAN, INF, 1e6, 1e6, 1e6, 1e6]
    run = RunData.load_json(write(tmp_path, "sizes", data)[0])
    assert run.memory_peak().bytes == 4e6
    read_everything(run, tmp_path)


def test_a_graph_without_order_and_one_without_workers_read(tmp_path):
    data = edit(((*G, "order"), None), ((*G, "workers"), None), ((*G, "submitted"), None))
    run = RunData.load_json(write(tmp_path, "plain", data)[0])
    assert read_everything(run, tmp_path)["critical_path"]["seconds"] == pytest.approx(3.0)


def test_the_checker_accepts_what_localsched_writes_of_an_empty_run(tmp_path):
    run = RunData.load_json(write(tmp_path, "empty", json.loads(RunData().to_json()))[0])
    read_everything(run, tmp_path)


# -- cost proportional to the file's size ---------------------------------------------


def repeated_order(n: int) -> dict:
    """One task repeated ``n`` times in ``order`` and its deps ``n`` long:
    n * n work for a reader that walks each."""
    data = base()
    data["keys"] += [f"k{i}" for i in range(n)]
    g = data["graphs"][0]
    g["keys"] += list(range(6, 6 + n))
    g["deps"] += [[] for _ in range(n)]
    g["deps"][5] = [4] + list(range(6, 6 + n))
    g["order"] = [0, 1, 2, 3, 4] + [5] * n
    return data


def repeated_deps(n: int) -> dict:
    data = base()
    data["graphs"][0]["deps"][5] = [4] * n
    data["graphs"][0]["order"] = [0, 1, 2, 3, 4] + [5] * n
    return data


def many_graphs_and_transfers(n: int) -> dict:
    """``n`` computations and ``n`` transfers: each computation once summed
    every transfer (n * n)."""
    run = base_run()
    run.graphs = [GraphData(["x"], [()], [0], T0 + i, T0 + i + 0.5, 1) for i in range(n)]
    run.tasks = [TaskData("x", None, T0 + i, T0 + i + 0.1, 0) for i in range(n)]
    run.transfers = [TransferData("x", 0, T0 + i, T0 + i + 0.01, T0 + i + 0.02,
                                  T0 + i + 0.03) for i in range(n)]
    run.cache = []
    run.meta.pop("runs")
    return json.loads(run.to_json())


def many_groups(n: int) -> dict:
    """``n`` results each of its own group: the memory chart once masked
    every record per group (n * n)."""
    run = base_run()
    run.cache = [CacheData(f"g{i}-x", None, 10.0, T0 + i * 1e-3, T0 + i * 1e-3 + 0.5)
                 for i in range(n)]
    return json.loads(run.to_json())


@pytest.mark.parametrize("craft", [repeated_order, repeated_deps, many_graphs_and_transfers,
                                   many_groups])
def test_reading_costs_in_proportion_to_the_file(tmp_path, craft):
    """Memory: the peak while loading and analysing stays within a multiple
    of the file's size; work: the same file at 4x the size costs at most
    about 4x the counted steps (calls and lines traced)."""
    import sys

    def cost(n):
        path, size = write(tmp_path, f"{craft.__name__}-{n}", craft(n))
        steps = [0]

        def count(frame, event, arg):
            steps[0] += 1
            return count

        tracemalloc.start()
        sys.settrace(count)
        try:
            try:
                run = RunData.load_json(path)
            except RunFileError:
                run = None
            if run is not None:
                run.analysis()
                _held(run)
        finally:
            sys.settrace(None)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return size, steps[0], peak

    small, big = cost(500), cost(2_000)
    assert big[2] < 60 * big[0] + 2_000_000, big
    growth = big[1] / max(small[1], 1)
    assert growth < 1.5 * big[0] / small[0], (small, big)


def test_a_fuzzed_family_never_tracebacks(tmp_path):
    """Every field of the base run replaced by each of a set of wrong values:
    a clear RunFileError or a run every reader answers."""
    wrong = [None, -1, 0, 1.5, 10 ** 30, "x", [], {}, [-1], [10 ** 6], NAN, INF,
             {"float": "-inf"}, [None], True]
    data = base()
    paths = list(_leaves(data))
    count = 0
    for path in paths:
        for value in wrong:
            bad = copy.deepcopy(data)
            node = bad
            for p in path[:-1]:
                node = node[p]
            node[path[-1]] = value
            count += 1
            try:
                run = RunData.from_json(json.dumps(bad), f"case{count}")
            except RunFileError as exc:
                assert str(exc).startswith(f"case{count}: ") and "Error:" not in str(exc), \
                    (path, value, str(exc))
                continue
            try:
                read_everything(run, tmp_path)
            except Exception as exc:  # noqa: BLE001 -- the point: none escapes
                raise AssertionError(f"{path} = {value!r}: {type(exc).__name__}: {exc}") \
                    from exc
    assert count > 500


def _leaves(node, path=()):
    """Every path into ``node`` (containers and their leaves), skipping the
    ``analysis`` (never read back)."""
    if path:
        yield path
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "analysis" and not path:
                continue
            yield from _leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:3]):
            yield from _leaves(v, (*path, i))


def test_keys_that_decode_equal_count_one_task(tmp_path):
    """``"b"`` and ``{"repr": "b"}`` are one key once read: its task counts once."""
    data = base()
    data["keys"].append({"repr": "b"})
    g = data["graphs"][0]
    g["keys"].append(len(data["keys"]) - 1)
    g["deps"].append([4])
    g["order"].append(6)
    run = RunData.load_json(write(tmp_path, "twice", data)[0])
    assert read_everything(run, tmp_path)["critical_path"]["seconds"] == pytest.approx(3.0)
    from localsched.diagnostics.analysis.graphs import computations

    assert computations(run)[0].keys == computations(base_run())[0].keys  # (6, not 7)
