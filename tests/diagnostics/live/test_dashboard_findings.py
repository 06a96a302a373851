"""The dashboard's summary of a finished run lists its findings: the
report's, from the same records, computed once off the event loop."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

from localsched.diagnostics.live import Dashboard
from localsched.diagnostics.live.feed import Feed
from localsched.diagnostics.live.findings import run_data
from localsched.diagnostics.live.recorder import RunLog
from localsched.diagnostics.live.summary import Summary
from localsched.diagnostics.runs.rundata import RunData
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
        # (computed off the page's thread, once: "computing" until then)
        assert feed.findings.wait(dash.recorder.runs[-1], timeout=60) is not None
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


def _get(dash, path: str, timeout: float = 30.0) -> bytes:
    base = dash.link.rsplit("/", 1)[0]
    with urllib.request.urlopen(base + path, timeout=timeout) as response:
        return response.read()


def _replayed(n: int) -> RunLog:
    """A finished run of ``n`` tasks on two workers, as the recorder keeps it."""
    keys = [("work", i) for i in range(n)]
    log = RunLog(keys)
    t0 = log.started
    log.ends = [(k, t0 + 1e-5 * i, t0 + 1e-5 * i + 8e-6, i % 2) for i, k in enumerate(keys)]
    log.finished = t0 + 1e-5 * n
    return log


def test_the_pages_answer_while_a_large_runs_findings_are_computed(monkeypatch):
    """The findings of a 300,000-task run are computed off the event loop:
    while the computation is provably under way (blocked inside it), the
    server answers /json/progress.json; every page then shares one result."""
    from localsched.diagnostics import analysis

    real = analysis.findings
    inside, release = threading.Event(), threading.Event()
    calls = []

    def held(run, *args, **kwargs):
        calls.append(len(run.tasks))
        inside.set()
        assert release.wait(120)
        return real(run, *args, **kwargs)

    monkeypatch.setattr(analysis, "findings", held)
    dash = Dashboard(quiet=True)
    pages: list = []
    try:
        log = _replayed(300_000)
        dash.recorder.runs.append(log)
        page = threading.Thread(target=lambda: pages.append(_get(dash, "/status")))
        page.start()
        assert inside.wait(60)  # the page asked for the findings: now computed
        progress = json.loads(_get(dash, "/json/progress.json"))
        assert not release.is_set() and progress["done"] == 300_000
        release.set()
        page.join(60)
        assert pages and not page.is_alive()
        found = dash.feed.findings.wait(log, timeout=120)
        assert found is not None
        _get(dash, "/status")  # a second page: the same findings, not recomputed
        assert calls == [300_000]
    finally:
        release.set()
        dash.close()


def test_the_dashboard_reads_the_records_the_report_reads():
    """A process run's transfers reach the dashboard's findings as they reach
    the report's (not hand-off overhead): one RunData, the same findings."""
    from localsched.diagnostics import Profiler
    from localsched.multiprocessing import get as mp_get

    dsk = {("make", i): (list, (range, 200_000)) for i in range(6)}
    dsk.update({("total", i): (sum, ("make", i)) for i in range(6)})
    dash = Dashboard(quiet=True)
    try:
        with dash, Profiler() as prof:
            mp_get(dsk, [("total", i) for i in range(6)], num_workers=2)
        log = dash.recorder.runs[-1]
        mine = run_data(log)
        theirs = RunData.from_profilers([prof])
        theirs.meta.update(mine.meta)  # (the machine's load as the dashboard read it)
        assert mine.transfers and len(mine.transfers) == len(theirs.transfers)
        assert {(t.key, t.send_start, t.receive_end) for t in mine.transfers} == \
            {(t.key, t.send_start, t.receive_end) for t in theirs.transfers}
        assert mine.graphs[0].submitted is not None
        kinds = [(f.kind, f.groups) for f in mine.findings()]
        assert kinds == [(f.kind, f.groups) for f in theirs.findings()]
        assert [f["kind"] for f in dash.feed.findings.wait(log, 60)] == [k for k, _ in kinds]
    finally:
        dash.close()


def test_the_dashboards_findings_read_the_machines_load_as_the_reports_do():
    """Each dashboard run measures the machine's load and BLAS's threads as
    a report does (``meta["load"]``, ``meta["blas"]``), so its findings say
    when the machine was busy and hold back what the load makes untrue."""
    from localsched.diagnostics.analysis import causes
    from localsched.diagnostics.analysis.facts import Facts

    dsk = {("part", i): (nap, i, 0.05) for i in range(4)}
    dash = Dashboard(quiet=True)
    try:
        with dash:
            get(dsk, list(dsk), num_workers=2)
        log = dash.recorder.runs[-1]
        run = run_data(log)
        load = run.meta["load"]
        assert set(load) >= {"cores", "seconds", "machine_cpu", "own_cpu", "native_cpu"}
        assert 0 < load["seconds"] and load["cores"] >= 1
        # (the same analysis of the same reading: other programs that took
        # 80 % of the cores while it ran make it a busy machine's run)
        log.load = dict(load, machine_cpu=load["own_cpu"] + 0.8 * load["cores"] *
                        load["seconds"])
        busy = run_data(log)
        assert causes.is_busy(Facts(busy))
        assert "busy" in [f["kind"] for f in dash.feed.findings.wait(log, 60)]
    finally:
        dash.close()
