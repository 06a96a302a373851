"""The report of runs merged side by side (``localsched report a.json
b.json``) says what ``localsched compare a.json b.json`` says (issue #36,
items 4-5): the same verdict -- regression, inconclusive, a slower machine,
a failed run -- from the same measures (CPU seconds at the same machine
speed), and no share of the recording above 100 %.
"""

from __future__ import annotations

import html
import re

import pytest

import localsched
from localsched.command.cli import main
from localsched.diagnostics.analysis.comparison import compare, split_side_by_side
from localsched.diagnostics.collectors.records import FailedTaskData, TaskData
from localsched.diagnostics.report import RunData, performance_report

T0 = 1_700_000_000.0


def measured(path, start, busy=None, speed=None, failed=False, **cpu_seconds):
    """A saved run recorded at ``start``: each group's CPU seconds (its task
    seconds too), the speed probe's seconds and the others' cores."""
    tasks, metrics = [], {}
    for group, seconds in cpu_seconds.items():
        tasks += [TaskData((group, i), None, start + i * seconds / 10,
                           start + (i + 1) * seconds / 10, i % 2) for i in range(10)]
        metrics[((), group, "thread-cpu", "seconds")] = seconds
    meta: dict = {"started": start, "finished": start + 3.0}
    if speed is not None:
        meta["speed"] = {"probe": "python-loop", "seconds": speed, "samples": 40}
    if busy is not None:
        meta["header"] = {"load": {"others_cores": busy}}
    bad = [FailedTaskData(("parse", 99), None, start, start + 0.1, 1, "ValueError", "x")] \
        if failed else []
    RunData(tasks=tasks, failed=bad, metrics=metrics, walls=[(start, start + 2.5)],
            meta=meta).save_json(str(path))
    return str(path)


CASES = {
    # the same code on a machine 80 % slower (the probe says so): no regression
    "slower machine": (dict(speed=100e-6, parse=1.0, load=0.5),
                       dict(speed=180e-6, parse=1.8, load=0.9), 0, "no regression"),
    # twice the work, the machine unchanged
    "regression": (dict(speed=100e-6, parse=1.0, load=0.5),
                   dict(speed=100e-6, parse=2.0, load=0.5), 1, "REGRESSION"),
    # busy, no probe: +70 % may be the neighbours
    "inconclusive": (dict(busy=2.0, parse=1.0), dict(busy=2.0, parse=1.7), 3, "inconclusive"),
    # an after-run with a failed task
    "failed": (dict(speed=100e-6, parse=1.0), dict(speed=100e-6, failed=True, parse=1.0), 1,
               "FAILED"),
}


def _summary(c) -> tuple:
    return (c.status, [r.group for r in c.regressions], [r.group for r in c.inconclusive],
            c.problems, c.faster, [(r.group, r.measure, round(r.machine, 3),
                                    round(r.before, 6), round(r.after, 6)) for r in c.groups])


@pytest.mark.parametrize("case", list(CASES))
def test_the_merged_report_says_what_compare_says(tmp_path, capsys, case):
    before, after, status, word = CASES[case]
    a = measured(tmp_path / "a.json", T0, **before)
    b = measured(tmp_path / "b.json", T0 + 600.0, **after)
    assert main(["compare", a, b]) == status
    printed = capsys.readouterr().out
    assert word in printed, printed
    # the merged run's parts compare as the files do ...
    direct = compare(RunData.load_json(a), RunData.load_json(b))
    merged = RunData.side_by_side([RunData.load_json(a), RunData.load_json(b)],
                                  names=["a.json", "b.json"])
    parts = split_side_by_side(merged)
    assert _summary(compare(parts[0], parts[1])) == _summary(direct)
    # ... and the page of the merged runs shows that verdict and the measures
    page = tmp_path / "both.html"
    assert main(["report", a, b, "-o", str(page)]) == 0
    capsys.readouterr()
    text = html.unescape(html.unescape(page.read_text(encoding="utf-8")))  # (bokeh's, ours)
    assert direct.verdict() in text
    assert word in text
    if case == "slower machine":
        assert "+80%" in text and "machine" in text  # (how much slower b's machine was)
    # (saved and merged again: the merged page's data still compares the same)
    again = split_side_by_side(RunData.load_json(str(page)))
    assert _summary(compare(again[0], again[1])) == _summary(direct)


def spin(i, n):
    s = 0
    for k in range(n):
        s += k * i
    return s


def two_computations(path):
    """A recording of two computations with the caller's own work between them."""
    dsk = {("parse", i): (spin, i, 100_000) for i in range(4)}
    with performance_report(None, samples=False, json=str(path)):
        localsched.get(dsk, list(dsk), num_workers=2)
        spin(1, 300_000)  # (the caller's own work)
        localsched.get(dsk, list(dsk), num_workers=2)
    return str(path)


def test_a_merged_reports_shares_never_exceed_the_whole(tmp_path, capsys):
    runs = [two_computations(tmp_path / f"run{i}.json") for i in range(3)]
    page = tmp_path / "merged.html"
    assert main(["report", *runs, "-o", str(page)]) == 0
    capsys.readouterr()
    merged = RunData.load_json(str(page))
    titles = [f.title for f in merged.findings()]
    shares = [float(s) for t in titles for s in re.findall(r"(\d+(?:\.\d+)?)\s*%", t)]
    assert all(s <= 100.0 for s in shares), titles
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert not [s for s in re.findall(r"(\d{3,})% of the recording", text) if int(s) > 100]


def timed(path, start, parse, during, outside):
    """One group's run at ``start``: tasks for 0.2 s, the speed probe's
    timings ``during`` them and ``outside`` them (its timeline)."""
    sums = [during if (k + 0.5) * 0.01 < 0.2 else outside for k in range(100)]
    speed = {"probe": "python-loop", "seconds": sum(sums) / 100, "samples": 100,
             "timeline": {"start": start, "width": 0.01, "sums": sums, "counts": [1] * 100}}
    tasks = [TaskData(("parse", i), None, start, start + 0.2, i % 2) for i in range(10)]
    RunData(tasks=tasks, metrics={((), "parse", "thread-cpu", "seconds"): parse},
            walls=[(start, start + 1.0)],
            meta={"speed": speed, "started": start, "finished": start + 1.0}
            ).save_json(str(path))
    return str(path)


def test_merged_runs_keep_the_machines_speed_while_their_tasks_ran(tmp_path, capsys):
    a = timed(tmp_path / "a.json", T0, 1.0, 100e-6, 100e-6)
    b = timed(tmp_path / "b.json", T0 + 3600.0, 1.8, 180e-6, 80e-6)
    direct = compare(RunData.load_json(a), RunData.load_json(b))
    assert direct.status == 0
    merged = RunData.side_by_side([RunData.load_json(a), RunData.load_json(b)])
    parts = split_side_by_side(merged)
    assert _summary(compare(parts[0], parts[1])) == _summary(direct)
