"""SampleProfiler: finds planted hot code in the right task group, on every
scheduler; its queries over plain SampleData records; its thread's life."""

from __future__ import annotations

import threading
import time

import pytest

from localsched.diagnostics import SampleData, SampleProfiler
from localsched.diagnostics.collectors.sampler import totals, tree

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module


def hot_loop(seconds):
    """Burn CPU in this very function (what the sampler must find)."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1
    return x > 0


def cold(seconds):
    time.sleep(seconds)
    return True


def test_finds_the_planted_hot_function_in_its_group(scheduler):
    name, get = scheduler
    dsk = {("hot", 0): (hot_loop, 0.3), ("cold", 0): (cold, 0.1)}
    with SampleProfiler(interval=0.005) as sp:
        assert get(dsk, list(dsk)) == (True, True)
    samples = sp.results
    assert samples and all(isinstance(s, SampleData) for s in samples)
    by_group = sp.totals(by="group")
    assert by_group.get("hot", 0) >= 10, by_group
    # Where the hot group's time went: in hot_loop (the innermost frame).
    hot_functions = totals([s for s in samples if s.group == "hot"], by="function")
    top = next(iter(hot_functions))
    assert top[2] == "hot_loop" and top[0] == __file__
    # Stacks start at the task's function: the scheduler's frames are cut.
    t = sp.tree(group="hot")
    assert [c["name"] for c in t["children"]] == ["hot_loop"]
    assert t["children"][0]["count"] == t["count"] == by_group["hot"]
    cold_tree = sp.tree(group="cold")
    assert cold_tree["count"] == 0 or cold_tree["children"][0]["name"] == "cold"
    # Samples name their worker: the thread ident, or the worker process's pid.
    if name == "processes":
        assert {s.worker_id for s in samples if s.group == "hot"} != {threading.get_ident()}
    # In seconds, each sample stands for the time since the sampler's previous look.
    assert all(s.seconds is not None and s.seconds > 0 for s in samples)


def test_sampler_thread_runs_only_during_computations_and_is_joined():
    from localsched.threaded import get

    sp = SampleProfiler(interval=0.005)
    started = threading.Event()
    release = threading.Event()

    def task():
        started.set()
        release.wait(10)
        return 1

    names = lambda: {t.name for t in threading.enumerate()}  # noqa: E731
    with sp:
        assert "localsched-sampler" not in names()
        done = []
        caller = threading.Thread(target=lambda: done.append(get({"t": (task,)}, "t")))
        caller.start()
        assert started.wait(10)
        assert "localsched-sampler" in names()
        release.set()
        caller.join(10)
        assert done == [1]
        assert "localsched-sampler" not in names()
    # Passed per call, it samples that computation only.
    sp2 = SampleProfiler(interval=0.005)
    get({("hot", 1): (hot_loop, 0.1)}, ("hot", 1), callbacks=[sp2])
    assert sp2.totals(by="group").get("hot", 0) > 0
    assert "localsched-sampler" not in names()


def test_a_fake_clock_stamps_samples_and_windows_select_them():
    from localsched.local import get_sync

    ticks = iter(range(1000, 100000))
    sp = SampleProfiler(interval=0.002, timer=lambda: float(next(ticks)))
    with sp:
        get_sync({("hot", 0): (hot_loop, 0.1)}, ("hot", 0))
    times = [s.time for s in sp.results]
    first = times[0]  # (the profiler read the clock once when the computation started)
    assert first in (1000.0, 1001.0)
    assert times == [first + t for t in range(len(times))]
    n = len(times)
    assert n >= 5
    assert sp.totals(by="group", start=first, stop=first + 3) == {"hot": 3}
    assert sp.tree(start=first + n - 2)["count"] == 2


SAMPLES = [
    SampleData(1.0, 1, "load", (("a.py", 1, "main"), ("a.py", 9, "parse"))),
    SampleData(2.0, 1, "load", (("a.py", 1, "main"), ("a.py", 9, "parse"))),
    SampleData(3.0, 2, "load", (("a.py", 1, "main"), ("b.py", 4, "read"))),
    SampleData(4.0, 2, "sum", (("c.py", 3, "total"),)),
    SampleData(5.0, 2, "sum", ()),
]


def spin(seconds):
    """Pure Python for ``seconds`` of wall time: running all along, holding
    the GIL but for the interpreter's switches (what the sampler waits for)."""
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        x += 1
    return x > 0


@pytest.mark.parametrize("interval", [0.001, 0.01])
@pytest.mark.parametrize("where", ["threads", "processes"])
def test_a_one_second_spin_reads_one_second(where, interval):
    import importlib

    get = importlib.import_module({"threads": "localsched.threaded",
                                   "processes": "localsched.multiprocessing"}[where]).get
    get({"warm": (cold, 0.0)}, "warm", num_workers=1)  # (the worker is up)
    with SampleProfiler(interval=interval) as sp:
        assert get({("spin", 0): (spin, 1.0)}, ("spin", 0), num_workers=1) is True
    seconds = sp.totals(by="group", unit="seconds")["spin"]
    # Within 10 %, and at the edges at most one sampler period more or less
    # (a loaded machine stretches the periods; each sample says its own).
    period = max(s.seconds for s in sp.results if s.group == "spin")
    assert abs(seconds - 1.0) <= 0.10 + period, (seconds, period, sp.totals(by="group"))


def test_two_profilers_at_two_intervals_both_read_the_time():
    from localsched.multiprocessing import get

    get({"warm": (cold, 0.0)}, "warm", num_workers=1)
    with SampleProfiler(interval=0.01) as coarse, SampleProfiler(interval=0.002) as fine:
        assert get({("spin", 0): (spin, 0.5)}, ("spin", 0), num_workers=1) is True
    for sp in (coarse, fine):
        seconds = sp.totals(by="group", unit="seconds")["spin"]
        assert seconds == pytest.approx(0.5, rel=0.10), (sp.interval, seconds)


def test_each_profiler_counts_only_the_computations_it_watches():
    from localsched.threaded import get

    both = threading.Barrier(2)

    def together(seconds):
        both.wait(10)  # both computations are running now
        return spin(seconds)

    profilers = {"left": SampleProfiler(interval=0.005), "right": SampleProfiler(interval=0.005)}
    out: dict = {}

    def run(name):
        out[name] = get({(name, 0): (together, 0.3)}, (name, 0), num_workers=1,
                        callbacks=[profilers[name]])

    callers = [threading.Thread(target=run, args=(n,)) for n in profilers]
    for t in callers:
        t.start()
    for t in callers:
        t.join(30)
    assert out == {"left": True, "right": True}
    for name, sp in profilers.items():
        assert set(sp.totals(by="group")) - {None} == {name}, (name, sp.totals(by="group"))


def test_totals_in_seconds_weigh_each_sample_by_its_time():
    samples = [SampleData(1.0, 1, "load", (), 0.010), SampleData(1.02, 1, "load", (), 0.020),
               SampleData(1.03, 1, "sum", (), 0.005)]
    assert totals(samples, by="group", unit="seconds") == pytest.approx(
        {"load": 0.030, "sum": 0.005})
    assert totals(samples, by="group") == {"load": 2, "sum": 1}


def test_totals_by_function_and_group():
    assert totals(SAMPLES, by="group") == {"load": 3, "sum": 2}
    assert totals(SAMPLES, by="function") == {("a.py", 9, "parse"): 2, ("b.py", 4, "read"): 1,
                                              ("c.py", 3, "total"): 1}
    assert totals(SAMPLES, by="function", inclusive=True)[("a.py", 1, "main")] == 3
    assert totals(SAMPLES, by="group", start=2.0, stop=4.0) == {"load": 2}
    with pytest.raises(ValueError, match="by must be"):
        totals(SAMPLES, by="line")


def test_tree_is_the_agreed_nested_format():
    # (SAMPLES do not say their seconds: each stands for the interval)
    t = tree(SAMPLES, group="load", interval=0.01)
    assert t == {
        "name": "all", "filename": "", "line": 0, "count": 3, "seconds": 0.03, "children": [
            {"name": "main", "filename": "a.py", "line": 1, "count": 3, "seconds": 0.03,
             "children": [
                {"name": "parse", "filename": "a.py", "line": 9, "count": 2, "seconds": 0.02,
                 "children": []},
                {"name": "read", "filename": "b.py", "line": 4, "count": 1, "seconds": 0.01,
                 "children": []},
            ]},
        ]}
    assert tree(SAMPLES)["count"] == 5  # an empty stack counts at the root
    assert tree([])["children"] == []


def test_stacks_are_cut_below_the_scheduler():
    import os

    from localsched.worker import runtime

    pkg = os.path.dirname(os.path.dirname(runtime.__file__)) + "/"
    stack = [("threading.py", 1, "_bootstrap"), (pkg + "threaded.py", 2, "_worker"),
             (pkg + "core.py", 3, "run_batch"), (pkg + "graph.py", 4, "execute"),
             ("user.py", 5, "f"), (pkg + "core.py", 3, "get_async"), ("user.py", 9, "g")]
    assert runtime.trim_stack(stack) == (("user.py", 5, "f"), (pkg + "core.py", 3, "get_async"),
                                         ("user.py", 9, "g"))
    assert runtime.trim_stack([("x.py", 1, "f")]) == (("x.py", 1, "f"),)


def test_bad_interval_is_refused():
    with pytest.raises(ValueError, match="interval"):
        SampleProfiler(interval=0)
    with pytest.raises(ValueError, match="unit"):
        SampleProfiler().totals(unit="minutes")


def test_a_computation_failing_before_it_starts_leaves_the_sampler_sound():
    from localsched.threaded import get

    with SampleProfiler(interval=0.005) as sp:
        with pytest.raises(KeyError, match="not in the graph"):
            get({"a": 1}, "missing")
        assert get({("hot", 0): (hot_loop, 0.05)}, ("hot", 0)) is True
        assert not any(t.name == "localsched-sampler" for t in threading.enumerate())
    assert sp.totals(by="group").get("hot", 0) > 0


def wait_without_the_gil(seconds):
    """Sleep in short naps for ``seconds`` of wall time: the GIL is free, so
    the sampler looks on time (every ``interval``)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        time.sleep(0.0005)
    return True


def test_flame_widths_are_the_time_each_function_took_not_its_sample_count():
    from localsched.diagnostics.figures.flame import flame_rects
    from localsched.local import get_sync

    # `spin` holds the GIL for 0.9 s: the sampler gets to look about once
    # per switch interval (5 ms), not every 1 ms; `wait_without_the_gil`
    # runs 0.3 s with the GIL free, so it is looked at every ~1 ms.  Counted,
    # the waiting would be the wider frame; timed, spin is 3x wider.  (Two
    # computations: the sampler stops in between, so no look after one task
    # credits the other with time since its previous look.)
    with SampleProfiler(interval=0.001) as sp:
        assert get_sync({"spin-a": (spin, 0.9)}, "spin-a") is True
        assert get_sync({"wait-b": (wait_without_the_gil, 0.3)}, "wait-b") is True
    rects = flame_rects(sp.tree())
    widths = {n: r - lo for n, lo, r in zip(rects["name"], rects["left"], rects["right"],
                                            strict=True)}
    assert widths["spin"] / widths["wait_without_the_gil"] == pytest.approx(3.0, rel=0.15), \
        (widths, sp.totals(by="group"))
    seconds = dict(zip(rects["name"], rects["seconds"], strict=True))
    assert seconds["spin"] == pytest.approx(0.9, rel=0.10)
    assert seconds["wait_without_the_gil"] == pytest.approx(0.3, rel=0.15)
    # the tree, totals and the figure agree on the time
    by_function = {f[2]: v for f, v in sp.totals(by="function", unit="seconds").items()}
    assert sp.tree()["seconds"] == pytest.approx(sum(by_function.values()) + sum(
        s.seconds for s in sp.results if not s.stack))
    assert seconds["spin"] == pytest.approx(by_function["spin"])


def test_the_chrome_trace_gives_each_sample_the_seconds_it_stands_for():
    from localsched.diagnostics.collectors.records import TaskData
    from localsched.diagnostics.runs.rundata import RunData
    from localsched.diagnostics.runs.trace import chrome_trace

    f = ("m.py", 1, "f")
    run = RunData(tasks=[TaskData("x-1", None, 10.0, 11.0, 7)],
                  samples=[SampleData(10.3, 7, "x", (f,), 0.3),
                           SampleData(10.31, 7, "x", (f,), 0.01)])
    instants = [e for e in chrome_trace(run)["traceEvents"] if e["ph"] == "i"]
    assert [e["args"]["seconds"] for e in instants] == [0.3, 0.01]
