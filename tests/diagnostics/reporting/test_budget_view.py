"""What a memory budget shows (issue 34, item 5): fine metrics
``disk-write``/``disk-read`` per task group, the report's memory panel with
the budget, its thresholds and the bytes spilled, the budget saved in the
run's JSON and checked on load, the live dashboard's memory against the
budget, and the findings: ``memory`` says which ``memory_limit`` would have
held a run without one, ``spill`` says when spilling cost a large share.

The budget itself is the scheduler's (``state.outcome.memory``); here a
callback puts a made-up :class:`BudgetRecord` there at ``start_state``, as
the scheduler does, so that these tests need no budget to run.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from localsched.callbacks import Callback
from localsched.diagnostics import FineMetrics, Profiler
from localsched.diagnostics.collectors.metrics import CALLER
from localsched.diagnostics.collectors.records import CacheData, TaskData
from localsched.diagnostics.report import performance_report
from localsched.diagnostics.runs.rundata import RunData, RunFileError
from localsched.local import get_sync
from localsched.run.budget_record import BudgetRecord

MB = 1_000_000


def make_block(i):
    return np.ones(1_000_000)  # 8 MB


def total(*blocks):
    return sum(float(b.sum()) for b in blocks)


def _graph(n=6):
    dsk = {("make", i): (make_block, i) for i in range(n)}
    dsk["total"] = (total, *[("make", i) for i in range(n)])
    return dsk


class FakeBudget(Callback):
    """Puts a BudgetRecord at ``state.outcome.memory`` as a budget would:
    ``make`` results spilled and read back, the timeline around the run."""

    def __init__(self, spilled_keys=(("make", 0), ("make", 1))):
        super().__init__()
        self.spilled_keys = list(spilled_keys)
        self.record: BudgetRecord | None = None

    def _start_state(self, dsk, state):
        t = time.time()
        events = []
        for i, key in enumerate(self.spilled_keys):
            events.append((t + 0.001 * i, t + 0.001 * i + 0.0005, "disk-write", key, 8 * MB))
            events.append((t + 0.01 + 0.001 * i, t + 0.0105 + 0.001 * i, "disk-read", key,
                           8 * MB))
        self.record = BudgetRecord(
            limit=40 * MB, target=24 * MB, pause=32 * MB,
            timeline=[(t, 0, 0), (t + 0.002, 30 * MB, 16 * MB), (t + 0.02, 8 * MB, 0)],
            events=events, paused_seconds=0.25)
        state.outcome.memory = self.record


# -- fine metrics -------------------------------------------------------------------

def test_fine_metrics_disk_write_and_read_per_task_group():
    with FineMetrics() as fm, FakeBudget():
        get_sync(_graph(), "total")
    by = fm.by("group", "activity", unit="bytes")
    assert by[("make", "disk-write")] == 16 * MB and by[("make", "disk-read")] == 16 * MB
    count = fm.by("group", "activity", unit="count")
    assert count[("make", "disk-write")] == 2 and count[("make", "disk-read")] == 2
    seconds = fm.by("group", "activity", unit=CALLER)
    assert seconds[("make", "disk-write")] == pytest.approx(0.001, abs=1e-6)
    assert seconds[("make", "disk-read")] == pytest.approx(0.001, abs=1e-6)
    # worker-seconds still add up to wall x workers: the disk is the caller's
    assert "disk-write" not in fm.by("activity")


def test_no_budget_adds_no_disk_metrics():
    with FineMetrics() as fm:
        get_sync(_graph(), "total")
    assert not [k for k in fm.metrics if k[2] in ("disk-write", "disk-read")]


# -- records, JSON --------------------------------------------------------------------

def test_profiler_and_run_data_keep_the_budget_and_json_round_trips(tmp_path):
    with performance_report(None) as report, FakeBudget() as fake:
        get_sync(_graph(), "total")
    run = report.data
    assert run.budgets == [fake.record]
    path = tmp_path / "run.json"
    run.save_json(str(path))
    again = RunData.from_json(path.read_text())
    assert again.budgets == run.budgets
    assert again.budgets[0].events[0][3] == ("make", 0)  # keys keep their type
    shifted = run.shifted(10.0) if hasattr(run, "shifted") else None
    if shifted is not None:
        assert shifted.budgets[0].timeline[0][0] == run.budgets[0].timeline[0][0] + 10.0


def test_run_without_budget_saves_none_and_older_json_loads():
    with Profiler() as prof:
        get_sync(_graph(2), "total")
    run = RunData.from_profilers([prof])
    assert run.budgets == []
    data = json.loads(run.to_json())
    data.pop("budgets", None)  # a file saved before budgets were kept
    assert RunData.from_json(json.dumps(data)).budgets == []


def test_a_malformed_budget_in_a_file_is_refused_with_its_place():
    run = RunData(tasks=[TaskData("a", None, 0.0, 1.0, 1)],
                  budgets=[BudgetRecord(10, 6, 8, [(0.0, 1, 0)], [(0.0, 0.5, "disk-write",
                                                                     "a", 4)], 0.0)])
    data = json.loads(run.to_json())
    data["budgets"][0]["limit"] = "lots"
    with pytest.raises(RunFileError, match=r"budgets\[0\]"):
        RunData.from_json(json.dumps(data))


# -- the report's memory panel --------------------------------------------------------

def _budget_run(with_sizes=True) -> RunData:
    tasks = [TaskData(("make", i), None, 100.0 + i, 100.5 + i, 1) for i in range(4)]
    cache = [CacheData(("make", i), None, 8e6, 100.5 + i, 104.0) for i in range(4)]
    budget = BudgetRecord(limit=20 * MB, target=12 * MB, pause=16 * MB,
                          timeline=[(100.0, 0, 0), (102.0, 16 * MB, 8 * MB),
                                    (104.0, 0, 0)],
                          events=[(102.0, 102.2, "disk-write", ("make", 1), 8 * MB),
                                  (103.0, 103.1, "disk-read", ("make", 1), 8 * MB)],
                          paused_seconds=0.0)
    return RunData(tasks=tasks, cache=cache if with_sizes else [],
                   cache_metric="bytes" if with_sizes else "tasks", budgets=[budget])


@pytest.mark.parametrize("with_sizes", [True, False])
def test_memory_panel_draws_the_budget_thresholds_and_spilled_bytes(with_sizes):
    from bokeh.models import Range1d

    from localsched.diagnostics.figures.memory import plot_held

    run = _budget_run(with_sizes)
    fig = plot_held(run, run.memory_peak(), Range1d(0, 5), 100.0, {})
    assert fig is not None
    names = {r.name for r in fig.renderers}
    assert {"budget-limit", "budget-pause", "budget-target", "spilled"} <= names
    limit = next(r for r in fig.renderers if r.name == "budget-limit")
    assert list(limit.data_source.data["y0"]) == [20 * MB]
    spilled = next(r for r in fig.renderers if r.name == "spilled")
    assert max(spilled.data_source.data["y"]) == 8 * MB


def test_memory_panel_without_budget_is_unchanged():
    from bokeh.models import Range1d

    from localsched.diagnostics.figures.memory import plot_held

    run = _budget_run()
    run.budgets = []
    fig = plot_held(run, run.memory_peak(), Range1d(0, 5), 100.0, {})
    assert not {r.name for r in fig.renderers} & {"budget-limit", "spilled"}
    run.cache = []
    assert plot_held(run, None, Range1d(0, 5), 100.0, {}) is None


def test_report_page_shows_the_budget(tmp_path):
    path = tmp_path / "report.html"
    _budget_run().to_html(str(path))
    page = path.read_text()
    assert "budget-limit" in page and "spilled" in page


# -- findings -------------------------------------------------------------------------

def test_spill_finding_when_spilling_took_a_large_share():
    tasks = [TaskData(("make", i), None, 100.0 + i, 100.5 + i, 1) for i in range(4)]
    events = []
    for i in range(4):
        events.append((100.5 + i, 100.9 + i, "disk-write", ("make", i), 64 * MB))
        events.append((103.6, 103.7, "disk-read", ("make", i), 64 * MB))
    run = RunData(tasks=tasks, walls=[(100.0, 104.0)],
                  budgets=[BudgetRecord(100 * MB, 60 * MB, 80 * MB,
                                        [(100.0, 0, 0), (104.0, 0, 0)], events, 0.5)])
    found = {f.kind: f for f in run.findings()}
    assert "spill" in found, [str(f) for f in run.findings()]
    f = found["spill"]
    assert f.groups == ["make"] and f.seconds == pytest.approx(2.0)
    assert "256 MB" in f.title and "memory_limit" in f.fix
    assert "chunks" in f.fix and "persist" in f.fix


def test_no_spill_finding_when_spilling_was_cheap():
    run = _budget_run()
    assert "spill" not in {f.kind for f in run.findings()}


def test_memory_finding_without_budget_says_which_memory_limit_would_hold_the_run():
    with performance_report(None) as report:
        get_sync(_graph(12), "total")
    found = {f.kind: f for f in report.data.findings()}
    assert "memory" in found
    fix = found["memory"].fix
    assert "memory_limit=" in fix
    # the peak is 12 x 8 MB held for 'total' (its inputs) plus its output
    assert "96 MB" in found["memory"].title or "96" in fix


def test_memory_finding_with_a_budget_does_not_suggest_one():
    with performance_report(None) as report, FakeBudget():
        get_sync(_graph(12), "total")
    found = {f.kind: f for f in report.data.findings()}
    assert "memory_limit=" not in found.get("memory", type("F", (), {"fix": ""})).fix


# -- the live dashboard ---------------------------------------------------------------

def test_live_memory_view_shows_memory_against_the_budget():
    from localsched.diagnostics.live import Dashboard
    from localsched.diagnostics.live.memory import MemoryByGroup

    d = Dashboard(memory=True, quiet=True)
    try:
        with d, FakeBudget():
            get_sync(_graph(3), "total")
        view = MemoryByGroup(d.feed, d)
        title = view.root.title.text
        assert "budget 40.0 MB" in title and "spilled" in title, title
        (limit,) = view.root.select(name="budget-limit")
        assert limit.visible and limit.location == 40.0
        assert list(view.source.data["group"][:2]) == ["(all held)", "(spilled)"]
    finally:
        d.close()


def test_live_memory_view_without_budget_hides_the_budget():
    from localsched.diagnostics.live import Dashboard
    from localsched.diagnostics.live.memory import MemoryByGroup

    d = Dashboard(memory=True, quiet=True)
    try:
        with d:
            get_sync(_graph(3), "total")
        view = MemoryByGroup(d.feed, d)
        (limit,) = view.root.select(name="budget-limit")
        assert not limit.visible and "budget" not in view.root.title.text
        assert "(all held)" not in view.source.data["group"]
    finally:
        d.close()


# -- a spilled result is not held while it is on disk -------------------------------

def test_spilled_results_are_not_held_while_on_disk():
    run = _budget_run()  # 4 x 8 MB held until 104.0; ('make', 1) on disk 102.2-103.0
    assert run.memory_peak().bytes == 32e6  # at 103.5: all four in memory again
    run.budgets[0].events[:] = [(101.0, 101.2, "disk-write", ("make", 0), 8 * MB)]
    peak = run.memory_peak()  # ('make', 0) never read back: off from 101.2 on
    assert peak.bytes == 24e6 and peak.by_group == {"make": 24e6}


# -- the workers' wait while the scheduler spilled is not scheduling overhead --------

def test_workers_waiting_for_spills_are_not_an_overhead_finding():
    from tests.diagnostics.analysis.test_findings_thresholds import back_to_back, independent

    duration = 0.001
    gap = duration * 0.5 / (1 - 0.5)  # 50 % gaps on 1 ms tasks: an overhead finding...
    run = independent(back_to_back(200, duration, gap), workers=1)
    assert "overhead" in {f.kind for f in run.findings()}
    t = run.tasks
    events = [(a.end_time, b.start_time, "disk-write", a.key, MB)  # ...that spilling made
              for a, b in zip(t, t[1:], strict=False)]
    run.budgets = [BudgetRecord(100 * MB, 60 * MB, 80 * MB,
                                [(t[0].start_time, 0, 0), (t[-1].end_time, 0, 0)], events, 0.0)]
    found = {f.kind for f in run.findings()}
    assert "overhead" not in found and "spill" in found


def test_memory_finding_counts_only_results_in_memory_at_the_peak():
    tasks = [TaskData(("make", i), None, 100.0 + 0.1 * i, 100.1 + 0.1 * i, 1) for i in range(8)]
    tasks.append(TaskData("total", None, 102.0, 103.0, 1))
    cache = [CacheData(("make", i), None, 16e6, 100.1 + 0.1 * i, 103.0) for i in range(8)]
    events = [(100.11 + 0.1 * i, 100.12 + 0.1 * i, "disk-write", ("make", i), 16 * MB)
              for i in range(4)]  # (each spilled just after it was made)
    events += [(101.9, 102.0, "disk-read", ("make", i), 16 * MB) for i in range(4)]
    run = RunData(tasks=tasks, cache=cache, cache_metric="bytes", walls=[(100.0, 103.0)],
                  budgets=[BudgetRecord(200 * MB, 120 * MB, 160 * MB,
                                        [(100.0, 0, 0), (103.0, 0, 0)], events, 0.0)])
    found = {f.kind: f for f in run.findings()}
    assert found["memory"].title.startswith("At the peak 128 MB")
    assert "8 results" in found["memory"].title
    run.budgets[0].events[4:] = []  # never read back: 4 stay on disk
    found = {f.kind: f for f in run.findings()}
    assert found["memory"].title.startswith("At the peak 64 MB")
    assert "4 results" in found["memory"].title
