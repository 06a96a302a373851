"""Runs merged side by side keep their accounting: no share of the
recording above 100 % (issue #36: a merged report said workers waited on
the caller for 306 % of the recording)."""

from __future__ import annotations

import re

from localsched.diagnostics.analysis.facts import Facts
from localsched.diagnostics.collectors.records import TaskData
from localsched.diagnostics.runs.rundata import RunData

T0 = 1_700_000_000.0


def _run(start: float) -> RunData:
    """A 10-second recording: the caller busy 1 s, a 2-second computation, the
    caller busy 4 s, a 3-second computation: the workers wait 50 %."""
    tasks = [TaskData(("inc", i), None, start + 1.0 + i, start + 2.0 + i, 1) for i in range(2)]
    tasks += [TaskData(("dec", i), None, start + 7.0 + i, start + 8.0 + i, 1) for i in range(3)]
    return RunData(tasks=tasks, walls=[(start + 1.0, start + 3.0), (start + 7.0, start + 10.0)],
                   meta={"started": start, "finished": start + 10.0})


def _shares(run) -> list:
    return [float(m) for f in run.findings() for m in re.findall(r"(\d+)% of the recording",
                                                                  f.title)]


def test_a_single_runs_caller_share():
    assert _shares(_run(T0)) == [50.0]


def test_merged_runs_never_exceed_the_whole_recording():
    runs = [_run(T0 + k * 3600.0) for k in range(3)]
    merged = RunData.side_by_side(runs, gap=0.1)
    facts = Facts(merged)
    assert facts.caller <= facts.block
    shares = _shares(merged)
    assert shares and all(s <= 100.0 for s in shares)
    assert 45.0 <= shares[0] <= 55.0  # each run's 50 %, not 3 x 40 %


def test_a_shifted_run_keeps_its_recording_times():
    moved = _run(T0).shifted(-100.0)
    assert (moved.meta["started"], moved.meta["finished"]) == (T0 - 100.0, T0 - 90.0)
    assert _shares(moved) == [50.0]
