"""The what-if replay against real runs: record on 1 worker, predict 2,
run on 2.  Tasks sleep (they leave the GIL and the cores to each other), so
two threads really run two at a time on a loaded machine, and they are long
next to the scheduler's microseconds of overhead: what is compared is the
graph's shape, which load does not change.  Load does stretch the naps
themselves (a sleeper waits for a core to wake on), differently in each
run: a prediction for the second run is scaled by the work the two runs
measured (``pace``) before it is compared with the second run's wall."""

from __future__ import annotations

import time

import pytest

import localsched
from localsched.diagnostics.collectors.records import GraphData, TaskData
from localsched.diagnostics.report import performance_report
from localsched.diagnostics.runs.rundata import RunData


def nap(x, seconds):
    time.sleep(seconds)
    return x


def recorded(dsk, keys, workers):
    with performance_report(None, samples=False) as report:
        localsched.get(dsk, keys, num_workers=workers)
    return report.data


def wall_of(run) -> float:
    (start, finish), = run.walls
    return finish - start


def pace(run, reference) -> float:
    """How much longer ``run``'s tasks took than ``reference``'s, the same
    tasks (1.0: as long; beside CPU hogs the runs' naps differ by 20 %)."""
    def work(r):
        return sum(t.end_time - t.start_time for t in r.tasks)

    return work(run) / work(reference)


def test_an_embarrassingly_parallel_graph_on_two_workers_within_20_percent():
    dsk = {("nap", i): (nap, i, 0.1) for i in range(16)}
    one = recorded(dsk, list(dsk), 1)
    predicted = one.simulate(workers=2)
    assert predicted == pytest.approx(wall_of(one) / 2, rel=0.1)
    two = recorded(dsk, list(dsk), 2)
    assert predicted * pace(two, one) == pytest.approx(wall_of(two), rel=0.2)


def test_where_a_chain_dominates_two_workers_within_25_percent_of_the_critical_path():
    dsk = {("step", 0): (nap, 0, 0.08)}
    for i in range(1, 10):
        dsk[("step", i)] = (nap, ("step", i - 1), 0.08)
    dsk.update({("side", i): (nap, i, 0.05) for i in range(6)})
    one = recorded(dsk, list(dsk), 1)
    predicted = one.simulate(workers=2)
    cp = one.critical_path()
    assert cp.keys == [("step", i) for i in range(10)]
    assert predicted == pytest.approx(cp.seconds, rel=0.25)
    two = recorded(dsk, list(dsk), 2)
    assert predicted * pace(two, one) == pytest.approx(wall_of(two), rel=0.25)
    assert two.critical_path().seconds == pytest.approx(cp.seconds * pace(two, one),
                                                        rel=0.25)


def test_the_replay_follows_localscheds_ready_stack():
    # a -> b and c independent; on one worker the order is a, b, c (the branch
    # just advanced continues first), so the replay on 1 worker is their sum
    tasks = [TaskData("a", None, 0.0, 1.0, 1), TaskData("b", None, 1.0, 2.0, 1),
             TaskData("c", None, 2.0, 5.0, 1)]
    graph = GraphData(["a", "b", "c"], [(), (0,), ()], [0, 1, 2], 0.0, 5.0, 1)
    run = RunData(tasks=tasks, graphs=[graph])
    assert run.simulate(workers=1) == pytest.approx(5.0)
    assert run.simulate(workers=2) == pytest.approx(3.0)
    assert run.simulate(workers=16) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="at least 1"):
        run.simulate(workers=0)


def test_the_measured_per_task_overhead_is_replayed():
    # one worker, each next task started 0.5 s after the previous ended although ready
    tasks = [TaskData(("x", i), None, 1.5 * i, 1.5 * i + 1.0, 1) for i in range(4)]
    graph = GraphData([t.key for t in tasks], [()] * 4, [0, 1, 2, 3], 0.0, 5.5, 1)
    run = RunData(tasks=tasks, graphs=[graph])
    assert run.simulate(workers=1) == pytest.approx(5.5)
    assert run.simulate(workers=4) == pytest.approx(1.0)
    assert run.analysis()["what_if"]["overhead"] == pytest.approx(0.5)
