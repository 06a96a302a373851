"""The dashboard in real headless Chromium while a dask session runs.

A computation with many task groups (a dask array, a bag and a dataframe)
runs on localsched's threads while a tab shows ``/status``: the task
stream's data source in the page must grow, the page must log no errors, and
a screenshot is written (to ``$LOCALSCHED_SCREENSHOT_DIR`` if set, else the
test's tmp_path) for a person to look at.  Closing the tab must end its
session within a couple of seconds.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request

import pytest

from localsched.diagnostics import Dashboard, SampleProfiler

try:
    from tests.support.live_tab import LiveTab
except ImportError:
    from tests.support.live_tab import LiveTab  # type: ignore[no-redef]

STREAM_LENGTH = ("(() => { const m = Bokeh.documents[0].get_model_by_name('task_stream');"
                 " return m ? m.data_source.data.left.length : -1; })()")
STREAM_GROUPS = ("Array.from(new Set(Bokeh.documents[0]"
                 ".get_model_by_name('task_stream').data_source.data.group))")
DOC_READY = ("window.Bokeh && Bokeh.documents.length > 0 && "
             "Bokeh.documents[0].get_model_by_name('task_stream') !== null")


def _dask_session(stop: threading.Event):
    """A real multi-group dask workload, repeated until ``stop`` (several
    computations, so the page sees new runs start)."""
    import dask
    import dask.array as da
    import dask.bag as db
    import pandas as pd

    import localsched.threaded

    try:  # (dask.dataframe needs pyarrow)
        import dask.dataframe as dd
    except ImportError:
        dd = None

    def work():
        x = da.random.random((1200, 1200), chunks=(200, 200))
        y = (x @ x.T + x.mean(axis=0)).sum(axis=1)
        bag = db.from_sequence(range(20_000), npartitions=40)
        words = bag.map(lambda i: f"w{i % 97}").frequencies().topk(5, key=1)
        frame = pd.DataFrame({"k": [i % 13 for i in range(40_000)],
                              "v": [float(i) for i in range(40_000)]})
        if dd is None:
            return dask.compute(y.sum(), words, scheduler=localsched.threaded.get)
        df = dd.from_pandas(frame, npartitions=20)
        agg = df.assign(w=df.v * 2).groupby("k").w.mean()
        return dask.compute(y.sum(), words, agg, scheduler=localsched.threaded.get)

    results = []
    while not stop.is_set():
        results.append(work())
    return results


def _progress(dash) -> dict:
    with urllib.request.urlopen(dash.link.replace("/status", "/json/progress.json")) as r:
        return json.loads(r.read())


@pytest.mark.timeout(300)
def test_status_page_live_in_chromium(tmp_path, chromium_path):
    pytest.importorskip("dask.array")
    shots = os.environ.get("LOCALSCHED_SCREENSHOT_DIR") or str(tmp_path)
    dash = Dashboard(quiet=True, memory=True)
    stop = threading.Event()
    outcome: dict = {}

    def run():
        try:
            with dash, SampleProfiler(interval=0.01):
                outcome["results"] = _dask_session(stop)
        except BaseException as exc:  # noqa: B036 -- reported by the test below
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    try:
        with LiveTab(dash.link, wait_for=DOC_READY, executable=chromium_path) as tab:
            assert tab.ready, "the page never built its Bokeh document"
            assert dash.connections() == 1
            worker.start()
            lengths, groups = [], []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                lengths.append(tab.evaluate(STREAM_LENGTH))
                groups = tab.evaluate(STREAM_GROUPS)
                progress = _progress(dash)
                # well into a computation, the page has seen it grow and has
                # drawn tasks of several groups (the page lags the run by its
                # update pacing, more so on a loaded machine: wait, up to the deadline)
                if progress["status"] == "running" and progress["done"] > progress["total"] / 2 \
                        and len(lengths) > 3 and lengths[-1] > lengths[-3] > 0 \
                        and len([g for g in groups if g]) >= 4:
                    break
                time.sleep(0.25)
            # the stream grows while the computation runs
            assert any(b > a > 0 for a, b in zip(lengths, lengths[1:], strict=False)), lengths
            tab.screenshot(os.path.join(shots, "dashboard-status.png"))
            summary = tab.evaluate("Bokeh.index[Bokeh.documents[0].get_model_by_name('summary')"
                                   ".id].markup_el.innerHTML")
            tab.close_tab()
            # the closed tab's session goes (the reaper looks every 0.5 s; the
            # 30 s are for a loaded machine, not a bound on the reaper)
            gone = time.monotonic() + 30
            while dash.sessions() and time.monotonic() < gone:
                time.sleep(0.05)
            assert dash.sessions() == 0, "the closed tab's session was not reaped"
        assert tab.errors == [], tab.errors
        # (the strip as read a moment after the screenshot: the run may have
        # ended meanwhile, and a finished run's strip says "took", no ETA)
        assert "tasks" in summary and ("ETA" in summary or "took" in summary), summary
        # many groups of a real dask session, coloured apart
        assert len([g for g in groups if g]) >= 4, groups
    finally:
        stop.set()
        if worker.is_alive():
            worker.join(120)
        dash.close()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["results"]
