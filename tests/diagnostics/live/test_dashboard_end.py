"""How a dashboard's page ends, and how it sits in a notebook.

A tab left open when the program (or ``close()``) ends the dashboard gets
one last update: the run's last numbers, "finished" (or "stopped" for a run
cut short), and a line saying the page no longer updates -- with the
report's path under ``localsched profile --dashboard`` -- never a frozen
"running".  In a notebook the frame is as wide as the cell and the link is
shown once.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

import localsched
from localsched.diagnostics import Dashboard
from localsched.diagnostics.live.summary import summary_html

try:
    from tests.support.live_tab import LiveTab
except ImportError:
    from tests.support.live_tab import LiveTab  # type: ignore[no-redef]

DOC_READY = ("window.Bokeh && Bokeh.documents.length > 0 && "
             "Bokeh.documents[0].get_model_by_name('summary') !== null")
STRIP = ("(() => { const m = Bokeh.documents[0].get_model_by_name('summary');"
         " const v = Bokeh.index[m.id]; return v ? v.markup_el.innerText : m.text; })()")
UNDER = "Bokeh.documents[0].get_model_by_name('summary_findings').text"
#: The strip as shown and the line under it, read in one go: a page applies
#: an update between two evaluations (one read after the other could pair
#: the strip before the last update with the line after it).
END_STATE = f"[{STRIP}, {UNDER}]"
#: The strip's Div's own text: what its view shows when it renders again
#: (the ticks write only its DOM).
STRIP_MODEL = "Bokeh.documents[0].get_model_by_name('summary').text"
RUNNING = {"done": 44, "total": 201, "running": 2, "erred": 0, "elapsed": 1.5, "eta": 3.0,
           "eta_note": None, "rate": 30.0, "workers": 2, "busy": 2, "status": "running",
           "run": 1, "cluster_dashboard": None}


def test_the_strip_of_an_ended_dashboard_never_says_running():
    live = summary_html(RUNNING)
    assert "running" in live and "in flight" in live and "ETA" in live
    ended = summary_html(RUNNING, ended="the program ended")
    assert "stopped" in ended and "running" not in ended and "ETA" not in ended
    assert "44 / 201" in ended
    idle = summary_html({**RUNNING, "status": "idle"}, ended="the program ended")
    assert "the program ended" in idle


def test_a_notebook_frame_fits_its_cell_and_the_link_shows_once():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        dash = Dashboard()
    try:
        page = dash._repr_html_()
        shown = out.getvalue() + re.sub(r"<[^>]+>", "", page)  # (what a person reads)
        assert shown.count(dash.link) == 1, shown
        assert "1050" not in page and "width:100%" in page
        quiet = Dashboard(quiet=True)
        try:
            assert re.sub(r"<[^>]+>", "", quiet._repr_html_()).count(quiet.link) == 1
        finally:
            quiet.close()
    finally:
        dash.close()


def _the_end(tab, within: float = 60.0) -> tuple:
    """The strip and the line under it once the page has applied the last
    update (the server wrote it before it stopped; the browser applies it
    when its event loop gets to it)."""
    deadline = time.monotonic() + within
    while True:
        strip, under = tab.evaluate(END_STATE)
        if "no longer updates" in under or time.monotonic() > deadline:
            return strip, under
        time.sleep(0.05)


@pytest.mark.timeout(300)
def test_an_open_page_shows_the_end_of_a_closed_dashboard(chromium_path, monkeypatch):
    """The strip's ticks write its DOM, not its Div, whose text kept the
    page's first state ("not recording"): a view rendered again showed
    that.  The Div's own text now follows each change of state.  The
    run's findings are on the page before it stops updating (not a frozen
    "computing")."""
    import threading

    from localsched.diagnostics.live import dash as dash_module
    from localsched.diagnostics.live import findings as findings_module

    # (the bound on waiting for a stalled tab, not a speed: a loaded machine
    # may take seconds to schedule the server's thread)
    monkeypatch.setattr(dash_module, "END_TIMEOUT", 120.0)
    # The run's analysis is still under way when the dashboard ends (as a
    # big run's is when a script ends right after it): held until then.
    ending = threading.Event()
    end_pages, run_findings = dash_module._end_pages, findings_module.run_findings

    def _ending(*args, **kwargs):
        ending.set()
        return end_pages(*args, **kwargs)

    def _held_findings(log):
        ending.wait(120)
        return run_findings(log)

    monkeypatch.setattr(dash_module, "_end_pages", _ending)
    monkeypatch.setattr(findings_module, "run_findings", _held_findings)
    dash = Dashboard(quiet=True)
    graph = {("t", i): (abs, -i) for i in range(8)}
    graph["total"] = (sum, list(graph))
    try:
        with LiveTab(dash.link, wait_for=DOC_READY, executable=chromium_path) as tab:
            assert tab.ready
            with dash:
                result = [localsched.get(graph, "total", num_workers=2)]
            assert dash.recorder.runs and dash.recorder.runs[-1].finished
            dash.close(ended="the script ended: this page no longer updates; "
                             "its report: /somewhere/report.html")
            strip, under = _the_end(tab)
            rendered_again = tab.evaluate(STRIP_MODEL)
        assert tab.errors == [], tab.errors
    finally:
        dash.close()
    assert result == [28]
    assert "no longer updates" in under, (under, strip)  # (the last update arrived)
    assert "finished" in rendered_again and "9 / 9" in rendered_again, rendered_again
    assert "finished" in strip and "9 / 9" in strip, strip
    assert "no longer updates" in under and "/somewhere/report.html" in under, under
    assert "computing" not in under.lower() and "finding" in under.lower(), under


@pytest.mark.timeout(300)
def test_a_page_left_open_when_the_script_exits_says_finished(tmp_path, chromium_path):
    """``LOCALSCHED_DASHBOARD=1 python script.py``: the program's exit gives
    the open page its last update."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import sys
        import localsched
        print("ready", flush=True)
        sys.stdin.readline()  # (the test's tab is open)
        graph = {("t", i): (abs, -i) for i in range(6)}
        graph["total"] = (sum, list(graph))
        print("total", localsched.get(graph, "total"), flush=True)
    """), encoding="utf-8")
    env = {**os.environ, "LOCALSCHED_DASHBOARD": "1", "PYTHONPATH": os.getcwd()}
    env.pop("LOCALSCHED_DASHBOARD_OWNER", None)
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path)
    try:
        link = proc.stdout.readline().split("localsched dashboard: ")[-1].strip()
        assert link.startswith("http://"), link
        assert proc.stdout.readline().strip() == "ready"
        with LiveTab(link, wait_for=DOC_READY, executable=chromium_path) as tab:
            assert tab.ready
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "total 15"
            assert proc.wait(120) == 0, proc.stderr.read()
            strip, under = _the_end(tab)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    assert "finished" in strip and "7 / 7" in strip, strip
    assert "the program ended" in under, under


def test_profile_dashboard_ends_its_page_with_the_report_path(tmp_path):
    from localsched.command import cli

    class FakeDash:
        link = "http://127.0.0.1:1/status"
        ended = None

        def close(self, ended=None):
            self.ended = ended

    dash = FakeDash()
    args = cli.build_parser().parse_args(["profile", "job.py"])
    cli._serve_until_interrupted(args, dash, str(tmp_path / "report.html"))
    assert "no longer updates" in dash.ended and str(tmp_path / "report.html") in dash.ended


def test_the_rate_counts_from_the_run_start_not_from_the_first_look():
    """A page's first look at a run that already finished 44 tasks in its
    first second (one long batch) reads 44 tasks/s, not 0.0 for another second."""
    from localsched.diagnostics.live.feed import Feed
    from localsched.diagnostics.live.recorder import Recorder, RunLog

    recorder = Recorder()
    log = RunLog([("t", i) for i in range(201)])
    log.started = 1000.0
    recorder.runs.append(log)
    now = [1001.0]
    feed = Feed(recorder, clock=lambda: now[0])
    log.ends = [(("t", i), 1000.0, 1000.9, i % 2) for i in range(44)]
    p = feed.progress()
    assert (p["status"], p["done"], p["rate"]) == ("running", 44, 44.0)
    now[0] = 1001.5  # (no batch ended since: the rate goes on, lower)
    assert 0 < feed.progress()["rate"] < 44.0
