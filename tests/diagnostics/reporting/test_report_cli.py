"""``localsched report`` of several saved runs, its title, and the one elapsed figure."""

from __future__ import annotations

from localsched.command import cli
from localsched.diagnostics.collectors.records import ResourceData, TaskData
from localsched.diagnostics.reporting.page import report_layout
from localsched.diagnostics.runs.rundata import RunData

T0 = 1_700_000_000.0


def _run(start: float, title: str) -> RunData:
    tasks = [TaskData((f"inc-{i}", i), None, start + 0.1 * i, start + 0.1 * i + 0.08, 1 + i % 2)
             for i in range(20)]
    return RunData(tasks=tasks, resources=[ResourceData(start + k, 100.0, 50.0)
                                           for k in range(3)],
                   walls=[(start, start + 2.0)], meta={"title": title})


def test_merged_runs_sit_side_by_side_without_the_time_between(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run(T0, "first").save_json(a)
    _run(T0 + 480.0, "second").save_json(b)  # eight minutes later
    out = tmp_path / "both.html"
    assert cli.main(["report", str(a), str(b), "-o", str(out), "--title", "Two runs"]) == 0
    merged = RunData.load_json(out)
    lo, hi = merged.bounds()
    assert hi - lo < 10.0  # two 2-second runs, not a 482-second axis
    assert [m["name"] for m in merged.meta["runs"]] == ["a.json", "b.json"]
    assert merged.meta["title"] == "Two runs"
    layout = report_layout(merged)
    assert layout.children[0].text.endswith(">Two runs</h1>")
    stream = layout.select_one({"name": "tasks"})
    assert max(stream.data_source.data["right"]) < 10.0
    # the summary's wall adds the runs' own walls, not the gap
    assert abs(merged.summary().wall - 4.0) < 1e-9


def test_title_is_on_the_page_not_only_the_tab(tmp_path):
    a = tmp_path / "a.json"
    _run(T0, "recorded title").save_json(a)
    out = tmp_path / "one.html"
    assert cli.main(["report", str(a), "-o", str(out), "--title", "Shown title"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "<title>Shown title</title>" in html
    assert "Shown title&lt;/h1&gt;" in html  # the heading Div, HTML-escaped in the JSON


def test_the_command_reports_the_wall_time_the_page_shows():
    run = _run(T0, "x")
    run.walls = [(T0, T0 + 1.1)]
    line = cli._elapsed_line(run, elapsed=3.19)
    assert line.startswith("20 tasks in 1.1 s of computation")
    assert "3.19s with start-up" in line
    assert cli._elapsed_line(run, elapsed=1.1) == "20 tasks in 1.1 s"
