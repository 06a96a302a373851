"""Each finding's documented threshold, tested on both sides with records
made by hand (the rules read records only, so a run is easy to describe)."""

from __future__ import annotations

import pytest

from localsched.diagnostics.analysis import rules
from localsched.diagnostics.collectors.records import (
    CacheData,
    GraphData,
    SampleData,
    TaskData,
    TransferData,
)
from localsched.diagnostics.runs.rundata import RunData
from tests.support.platform_marks import needs_schedstat


def kinds(run) -> set:
    return {f.kind for f in run.findings()}


def independent(tasks, workers=2, **meta):
    """A run of the given tasks, independent of each other, in one computation."""
    keys = [t.key for t in tasks]
    lo = min(t.start_time for t in tasks)
    hi = max(t.end_time for t in tasks)
    graph = GraphData(keys, [()] * len(keys), list(range(len(keys))), lo, hi, workers)
    return RunData(tasks=tasks, graphs=[graph], walls=[(lo, hi)], meta=dict(meta))


def back_to_back(n, duration, gap, worker=1, group="inc", t0=0.0):
    out, t = [], t0
    for i in range(n):
        out.append(TaskData((group, i), None, t, t + duration, worker))
        t += duration + gap
    return out


@pytest.mark.parametrize("share, expected", [(0.20, False), (0.30, True)])
def test_overhead_share(share, expected):
    # gap / (gap + duration) == share, on tasks far shorter than SHORT_TASK
    duration = 0.001
    gap = duration * share / (1 - share)
    run = independent(back_to_back(200, duration, gap), workers=1)
    assert ("overhead" in kinds(run)) is expected


def test_overhead_needs_short_tasks():
    run = independent(back_to_back(40, 0.05, 0.05), workers=1)  # 50 % gaps, 50 ms tasks
    assert "overhead" not in kinds(run)


@pytest.mark.parametrize("factor, expected", [(2.5, False), (3.5, True)])
def test_straggler_factor(factor, expected):
    tasks = [TaskData(("part", i), None, 0.0, 0.1, i % 2) for i in range(19)]
    tasks.append(TaskData(("part", 19), None, 0.0, 0.1 * factor, 1))
    assert ("straggler" in kinds(RunData(tasks=tasks))) is expected


def test_straggler_needs_a_few_not_many():
    tasks = [TaskData(("part", i), None, 0.0, 0.1 if i % 3 else 1.0, 1) for i in range(30)]
    assert "straggler" not in kinds(RunData(tasks=tasks))


def chain_run(chain_share):
    """A 2-task chain taking ``chain_share`` of the wall, beside parallel work."""
    wall = 1.0
    step = chain_share * wall / 2
    tasks = [TaskData("a", None, 0.0, step, 1), TaskData("b", None, step, 2 * step, 1)]
    tasks.append(TaskData("c", None, wall - 0.2, wall, 2))  # independent work, late
    keys = ["a", "b", "c"]
    graph = GraphData(keys, [(), (0,), ()], [0, 1, 2], 0.0, wall, 2)
    return RunData(tasks=tasks, graphs=[graph], walls=[(0.0, wall)])


@pytest.mark.parametrize("share, expected", [(0.4, False), (0.6, True)])
def test_critical_path_share(share, expected):
    run = chain_run(share)
    found = [f for f in run.findings() if f.kind == "critical-path"]
    assert bool(found) is expected
    if expected:
        assert run.critical_path().keys == ["a", "b"]


def test_a_chain_made_long_by_one_task_is_no_critical_path():
    # (beside CPU hogs, a tree of 1,024 tiny adds: one 'inc' preempted for
    # 190 ms made a chain of 11 tasks "84 %" of the run -- "split the work
    # of 'inc'"; one long task is a straggler's matter, held back when busy)
    tasks, keys, deps = [], [], []
    t = 0.0
    for i in range(11):
        d = 0.19 if i == 0 else 0.0005
        tasks.append(TaskData(("inc" if i == 0 else "add", i), None, t, t + d, 1))
        keys.append(tasks[-1].key)
        deps.append((i - 1,) if i else ())
        t += d
    tasks.append(TaskData(("side", 0), None, 0.0, 0.01, 2))
    keys.append(("side", 0))
    deps.append(())
    graph = GraphData(keys, deps, list(range(len(keys))), 0.0, t, 2)
    run = RunData(tasks=tasks, graphs=[graph], walls=[(0.0, t)])
    assert "critical-path" not in kinds(run), [str(f) for f in run.findings()]
    # (the same chain with its time spread over its tasks: a chain)
    spread = [r._replace(start_time=i * t / 11, end_time=(i + 1) * t / 11)
              for i, r in enumerate(tasks[:11])] + tasks[11:]
    run = RunData(tasks=spread, graphs=[graph], walls=[(0.0, t)])
    assert "critical-path" in kinds(run), [str(f) for f in run.findings()]


def memory_run(mb, results=12, workers=2):
    size = mb * 1e6 / results
    cache = [CacheData(("make", i), None, size, 0.1 * i, 2.0) for i in range(results)]
    tasks = [TaskData(("make", i), None, 0.1 * i - 0.05, 0.1 * i, 1) for i in range(results)]
    tasks.append(TaskData("total", None, 1.9, 2.0, 1))
    return RunData(tasks=tasks, cache=cache, cache_metric="bytes",
                   graphs=[GraphData([t.key for t in tasks], [()] * len(tasks), None,
                                     -0.05, 2.0, workers)])


@pytest.mark.parametrize("mb, expected", [(24, False), (40, True)])
def test_memory_bytes(mb, expected):
    found = [f for f in memory_run(mb).findings() if f.kind == "memory"]
    assert bool(found) is expected
    if expected:
        assert found[0].groups == ["make"] and "'total'" in found[0].title


def test_memory_needs_more_than_the_working_set():
    assert "memory" not in kinds(memory_run(100, results=6, workers=2))  # < 4 per worker


def transfer_run(share):
    tasks, transfers = [], []
    for i in range(20):
        t0 = i * 0.1
        tasks.append(TaskData(("load", i), None, t0, t0 + 0.05, 100 + i % 2))
        travel = 0.05 * share / (1 - share)
        transfers.append(TransferData(("load", i), 100 + i % 2, t0 - travel, t0, t0 + 0.05,
                                      t0 + 0.05))
    run = independent(tasks)
    run.transfers = transfers
    return run


@pytest.mark.parametrize("share, expected", [(0.15, False), (0.25, True)])
def test_transfer_share(share, expected):
    assert ("transfer" in kinds(transfer_run(share))) is expected


def test_no_transfer_finding_on_threads():
    run = transfer_run(0.5)
    run.transfers = []
    run.activities = []
    assert "transfer" not in kinds(run)


@pytest.mark.parametrize("caller, expected", [(0.15, False), (0.30, True)])
def test_idle_caller_share(caller, expected):
    # two computations of 0.5 s each; the caller's own time between them
    tasks = [TaskData("a", None, 0.0, 0.5, 1), TaskData("b", None, 0.5 + caller,
                                                        1.0 + caller, 1)]
    graphs = [GraphData(["a"], [()], [0], 0.0, 0.5, 1),
              GraphData(["b"], [()], [0], 0.5 + caller, 1.0 + caller, 1)]
    run = RunData(tasks=tasks, graphs=graphs, walls=[(0.0, 0.5), (0.5 + caller, 1.0 + caller)],
                  meta={"started": 0.0, "finished": 1.0 + caller})
    assert ("idle" in kinds(run)) is expected
    assert rules.IDLE_CALLER_SECONDS <= 0.3


@pytest.mark.parametrize("idle_share, expected", [(0.15, False), (0.35, True)])
def test_idle_few_ready_share(idle_share, expected):
    # 4 workers: one long task, and short ones that end early; then three
    # workers have nothing to run (no chain: every task is independent)
    wall = 1.0
    short = wall - idle_share * wall * 4 / 3
    tasks = [TaskData(("load", i), None, 0.0, short, i) for i in range(1, 4)]
    tasks.append(TaskData("parse", None, 0.0, wall, 0))
    run = independent(tasks, workers=4)
    found = [f for f in run.findings() if f.kind == "idle"]
    assert bool(found) is expected
    if expected:
        assert found[0].groups[0] == "parse"


def gil_run(stretch, on_time=0.0, workers=2):
    tasks = [TaskData(("py", i), None, 0.0, 1.0, i % 2) for i in range(4)]
    samples = []
    for i in range(100):
        seconds = 0.01 if i < on_time * 100 else 0.01 * stretch
        samples.append(SampleData(i * 0.01, i % 2, "py", (("f.py", 1, "loop"),), seconds))
    run = independent(tasks, workers=workers, sample_interval=0.01)
    run.samples = samples
    return run


@pytest.mark.parametrize("stretch, expected", [(1.6, False), (2.0, True)])
def test_gil_stretch(stretch, expected):
    assert ("gil" in kinds(gil_run(stretch))) is expected


@pytest.mark.parametrize("on_time, expected", [(0.05, True), (0.15, False)])
def test_gil_on_time_looks(on_time, expected):
    assert ("gil" in kinds(gil_run(3.0, on_time))) is expected


def test_gil_needs_threads_with_several_workers():
    assert "gil" not in kinds(gil_run(3.0, workers=1))
    run = gil_run(3.0)
    run.transfers = [TransferData(("py", 0), 1, -0.1, 0.0, 1.0, 1.0)]  # processes
    assert "gil" not in kinds(run)


def test_finding_fields_and_order():
    run = chain_run(0.9)
    run.tasks.append(TaskData(("part", 0), None, 0.0, 0.01, 1))
    found = run.findings()
    assert [f.kind for f in found] == ["critical-path"]
    f = found[0]
    assert f.title and f.fix and f.seconds == pytest.approx(0.9) and f.groups
    assert set(f.as_dict()) == {"kind", "title", "seconds", "groups", "fix"}


@pytest.mark.parametrize("contended, expected", [(0.4, False), (0.6, True)])
def test_gil_measured_waits(contended, expected):
    # the sampler's measured waits for the GIL decide, whatever its lateness
    run = gil_run(1.0, on_time=1.0)  # (every look on time: the lateness says nothing)
    run.meta["gil_waits"] = {"py": [100, int(contended * 100), contended * 0.5]}
    assert ("gil" in kinds(run)) is expected
    loaded = gil_run(3.0)  # (every look late, as on a busy machine)
    loaded.meta["gil_waits"] = {"py": [100, int(contended * 100), contended * 0.5]}
    assert ("gil" in kinds(loaded)) is expected


@needs_schedstat
def test_the_sampler_measures_its_waits_for_the_gil():
    from localsched.diagnostics.collectors.sampler import SampleProfiler, gil_waits_by_group
    from localsched.threaded import get

    def loop(n):
        total = 0
        for i in range(n):
            total += i
        return total

    with SampleProfiler(interval=0.005) as sp:
        get({("py", i): (loop, 300_000) for i in range(8)}, [("py", i) for i in range(8)],
            num_workers=2)
    looks = sp.gil_waits
    assert looks and all(seconds >= 0 for _, seconds in looks)
    by_group = gil_waits_by_group(sp.results, looks)
    assert set(by_group) == {"py"} and by_group["py"][0] == len(
        [s for s in sp.results if s.group == "py"])


def test_overhead_is_judged_per_computation():
    # tiny tasks with large gaps in one computation, long busy tasks in another
    tiny = back_to_back(200, 0.0005, 0.0005, group="inc")
    long = [TaskData(("work", i), None, 10.0 + i, 11.0 + i, 1) for i in range(20)]
    graphs = [GraphData([t.key for t in tiny], [()] * 200, list(range(200)), 0.0,
                        tiny[-1].end_time, 1),
              GraphData([t.key for t in long], [()] * 20, list(range(20)), 10.0, 30.0, 1)]
    run = RunData(tasks=tiny + long, graphs=graphs)
    found = [f for f in run.findings() if f.kind == "overhead"]
    assert found and found[0].groups == ["inc"]


# -- overhead's second cause: a library's fixed cost per call (percall) ---------------

PANDAS = ("/venv/lib/python3.11/site-packages/pandas/core/frame.py", 600, "__getitem__")
WORKER = ("/venv/lib/python3.11/site-packages/localsched/worker.py", 10, "run")


def per_call(tasks=200, cpu=0.001, looks=40, inside=1.0, size=20_000.0):
    """``tasks`` tasks of 'clean' (each on one of 'load', inputless) with
    ``cpu`` seconds of CPU each, the sampler's ``looks`` at them (``inside``
    of them in pandas, the rest in the user's code), results of ``size``
    bytes."""
    from localsched.diagnostics.analysis.facts import Facts
    from localsched.diagnostics.analysis.percall import fixed_cost

    keys = [("load", i) for i in range(tasks)] + [("clean", i) for i in range(tasks)]
    deps = [()] * tasks + [(i,) for i in range(tasks)]
    run_tasks = [TaskData(k, None, 0.002 * i, 0.002 * i + cpu, i % 2)
                 for i, k in enumerate(keys)]
    graph = GraphData(keys, deps, list(range(2 * tasks)), 0.0, 0.004 * tasks + cpu, 2)
    user = ("/home/me/job.py", 5, "clean")
    samples = [SampleData(0.01 * i, i % 2, "clean",
                          (WORKER, user, PANDAS) if i < inside * looks else (WORKER, user),
                          0.01) for i in range(looks)]
    cache = [CacheData(k, None, size, 0.0, 1.0) for k in keys]
    run = RunData(tasks=run_tasks, graphs=[graph], walls=[(0.0, 0.004 * tasks + cpu)],
                  samples=samples, cache=cache, cache_metric="bytes",
                  metrics={((), "clean", "thread-cpu", "seconds"): cpu * tasks,
                           ((), "load", "thread-cpu", "seconds"): 0.0001 * tasks})
    return [f for f in fixed_cost(Facts(run)) if "fixed cost" in f.title]


def test_fixed_cost_per_call_thresholds():
    from localsched.diagnostics.analysis import percall

    found = per_call()
    assert found and "pandas" in found[0].title and "job.py" in found[0].title
    assert "the 200 pieces of 'load' as about" in found[0].fix
    # tasks of FIXED_TASK of CPU or more: the work, not the fixed cost
    assert per_call(cpu=percall.FIXED_TASK * 0.9) and not per_call(cpu=percall.FIXED_TASK)
    # inside the library at FIXED_LIBRARY_SHARE of the looks, or not
    share = percall.FIXED_LIBRARY_SHARE
    assert per_call(inside=share) and not per_call(inside=share - 0.05)
    # at least FIXED_MIN_SAMPLES looks
    n = percall.FIXED_MIN_SAMPLES
    assert per_call(looks=n) and not per_call(looks=n - 1)
    # the fixed part (beyond the bytes moved at VECTOR_RATE) FIXED_SHARE of the CPU
    moved = 0.001 * (1 - percall.FIXED_SHARE) * percall.VECTOR_RATE  # (result + input)
    assert per_call(size=0.95 * moved / 2) and not per_call(size=1.05 * moved / 2)
