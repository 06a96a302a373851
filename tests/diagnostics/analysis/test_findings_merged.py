"""Runs merged into one report (``RunData.side_by_side``, ``localsched
report a.json b.json``; issue #36, item 5): each run is read in its own
window -- the time between merged runs is nobody's idle time -- and the
``busy`` finding hears every run's load, not the first's alone.
"""

from __future__ import annotations

import time

import localsched
from localsched.command.cli import main
from localsched.diagnostics.collectors.records import TaskData
from localsched.diagnostics.report import RunData, performance_report


def spin(i, n):
    s = 0
    for k in range(n):
        s += k * i
    return s


def recorded(path, computations=1, between=0.0):
    """A saved run of ``computations`` computations of 8 tasks on 2 threads,
    the caller doing ``between`` seconds of its own work (a sleep: what it
    waits on) before each one after the first."""
    with performance_report(None, samples=False, json=str(path)):
        for c in range(computations):
            if c:
                time.sleep(between)
            dsk = {("parse", i): (spin, i, 100_000) for i in range(8)}
            localsched.get(dsk, list(dsk), num_workers=2)
    return RunData.load_json(str(path))


def kinds(run):
    return [f.kind for f in run.findings()]


def test_the_time_between_merged_runs_is_not_idle(tmp_path):
    runs = [recorded(tmp_path / f"run{i}.json") for i in range(3)]
    assert "idle" not in kinds(runs[0])
    # (recorded apart: 5 s between them once merged; on today's main those
    # seconds were the caller's, "idle")
    runs = [r.shifted(100.0 * i) for i, r in enumerate(runs)]
    merged = RunData.side_by_side(runs, names=["a", "b", "c"], gap=5.0)
    assert "idle" not in kinds(merged), [str(f) for f in merged.findings()]
    assert merged.summary().efficiency <= 1.0


def test_the_report_of_merged_runs_says_no_idle_between_them(tmp_path, capsys):
    paths = [tmp_path / f"run{i}.json" for i in range(2)]
    for p in paths:
        recorded(p)
    out = tmp_path / "merged.html"
    assert main(["report", *map(str, paths), "-o", str(out)]) == 0
    capsys.readouterr()
    assert "on the caller" not in out.read_text(encoding="utf-8")


def test_a_merged_runs_own_caller_time_is_still_found(tmp_path):
    # the second run waited 0.6 s on its caller between its two computations:
    # merged, that is still said, as a share of the runs' own recordings
    quiet = recorded(tmp_path / "a.json")
    waiting = recorded(tmp_path / "b.json", computations=2, between=0.6)
    assert "idle" in kinds(waiting)
    merged = RunData.side_by_side([quiet, waiting.shifted(100.0)], gap=5.0)
    idle = [f for f in merged.findings() if f.kind == "idle"]
    assert idle and "on the caller" in idle[0].title
    assert 0.5 <= idle[0].seconds < 2.0, str(idle[0])


def synthetic(start, others):
    """A run of 10 tasks on 2 workers over 1 s from ``start``, its load meter
    saying other processes used ``others`` cores of 2."""
    tasks = [TaskData(("work", i), None, start + 0.2 * (i // 2), start + 0.2 * (i // 2) + 0.2,
                      i % 2) for i in range(10)]
    load = {"cores": 2, "seconds": 1.0, "machine_cpu": 2.0 + others if others else 2.0,
            "own_cpu": 2.0, "caller_cpu": 0.01, "native_cpu": 0.0, "cpu_wait": None,
            "steal": 0.0}
    return RunData(tasks=tasks, walls=[(start, start + 1.0)],
                   meta={"load": load, "started": start, "finished": start + 1.0})


def test_busy_hears_every_merged_runs_load():
    quiet, busy = synthetic(100.0, 0.0), synthetic(500.0, 1.8)
    assert "busy" not in kinds(quiet) and "busy" in kinds(busy)
    # the busy run second: its load is heard (today's main read the first's only)
    assert "busy" in kinds(RunData.side_by_side([quiet, busy]))
    assert "busy" in kinds(RunData.side_by_side([busy, quiet]))
    assert "busy" not in kinds(RunData.side_by_side([quiet, synthetic(900.0, 0.0)]))
