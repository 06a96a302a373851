"""The analysis on saved runs: the JSON carries it, a run saved before it
existed reads as "not measured" (never an error), runs merged side by side
compare in the report."""

from __future__ import annotations

import json
import os
import time

import pytest

import localsched
from localsched.diagnostics.report import RunData, performance_report

BEFORE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                      "run-before-analysis.json")


def nap(x, seconds=0.01):
    time.sleep(seconds)
    return x


def test_a_run_saved_before_the_analysis_reads_as_not_measured(tmp_path):
    run = RunData.load_json(BEFORE)
    assert run.graphs == [] and run.tasks
    assert run.critical_path() is None
    assert run.simulate(workers=2) is None
    peak = run.memory_peak()  # (sizes and lifetimes were saved then already)
    assert peak is not None and peak.by_group and peak.bytes > 0
    assert isinstance(run.findings(), list)
    analysis = run.analysis()
    assert analysis["critical_path"] is None and analysis["what_if"] is None
    again = RunData.from_json(run.to_json())
    assert again.graphs == [] and json.loads(run.to_json())["analysis"]["what_if"] is None
    run.to_html(str(tmp_path / "report.html"))
    assert "Findings" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_the_json_keeps_the_graph_and_carries_the_analysis(tmp_path):
    dsk = {("a", 0): (nap, 0), ("b", 0): (nap, ("a", 0)), ("c", 0): (nap, ("b", 0))}
    path = tmp_path / "run.json"
    with performance_report(None, samples=False, json=str(path)) as report:
        localsched.get(dsk, [("c", 0)], num_workers=2)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["analysis"]["critical_path"]["keys"] == [["a", 0], ["b", 0], ["c", 0]]
    assert set(saved["analysis"]["what_if"]["workers"]) == {"1", "2", "4", "8", "16"}
    again = RunData.load_json(str(path))
    assert again.graphs == report.data.graphs
    assert again.critical_path() == report.data.critical_path()
    assert again.simulate(workers=2) == pytest.approx(report.data.simulate(workers=2))


def test_an_analysis_field_absent_or_odd_is_ignored_on_read(tmp_path):
    data = json.loads(open(BEFORE, encoding="utf-8").read())
    data["analysis"] = {"something": "newer"}
    data["graphs"] = []
    run = RunData.from_dict(data)
    assert run.critical_path() is None


def spin(i, n):
    s = 0
    for k in range(n):
        s += k * i
    return s


def test_the_report_of_runs_side_by_side_shows_the_comparison(tmp_path):
    runs = []
    # (CPU seconds, judged loaded or not: see compare.  Runs long enough for
    # the speed probe to time them: a before-run of 50 ms of CPU had 3-5
    # timings, and the report named no regression 1 time in 4 runs)
    for steps in (400_000, 1_600_000):
        dsk = {("load", i): (spin, i, 120_000) for i in range(4)}
        dsk.update({("parse", i): (spin, i, steps) for i in range(4)})
        with performance_report(None, samples=False) as report:
            localsched.get(dsk, list(dsk), num_workers=2)
        runs.append(report.data)
    merged = RunData.side_by_side(runs, names=["before", "after"])
    from localsched.diagnostics.analysis.comparison import compare, split_side_by_side

    parts = split_side_by_side(merged)
    assert [len(p.tasks) for p in parts] == [8, 8]
    comparison = compare(parts[0], parts[1])
    assert [r.group for r in comparison.regressions] == ["parse"]
    out = tmp_path / "merged.html"
    merged.to_html(str(out))
    page = out.read_text(encoding="utf-8")
    assert "compared with" in page and "REGRESSION" in page
