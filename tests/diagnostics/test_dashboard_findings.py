"""The dashboard's summary of a finished run lists its findings."""

from __future__ import annotations

import time

from localsched.diagnostics.live import Dashboard
from localsched.diagnostics.live.feed import Feed
from localsched.diagnostics.live.summary import Summary
from localsched.threaded import get


def nap(x, seconds):
    time.sleep(seconds)
    return x


def test_a_finished_run_shows_its_findings_under_the_summary():
    dsk = {("step", 0): (nap, 0, 0.05)}
    for i in range(1, 8):
        dsk[("step", i)] = (nap, ("step", i - 1), 0.05)
    dash = Dashboard(quiet=True)
    try:
        with dash:
            get(dsk, ("step", 7), num_workers=2)
        feed = Feed(dash.recorder)
        feed.update(force=True)
        summary = Summary(feed, dash)
        summary.update()
        text = summary.text + summary.findings.text
        assert "finished" in text and "Findings" in text
        assert "critical-path" in text and "more workers would not" in text
        before = summary.findings.text
        summary.findings.text = "(not recomputed)"
        summary.update()
        assert summary.findings.text == "(not recomputed)"  # (once per finished run)
        assert before
    finally:
        dash.close()
