"""The screenshot gallery: the live page mid-run and the report of a real
multi-group session, as a user sees them in Chromium.  By default the PNGs
go to the test's temporary directory (checked there: the working tree stays
clean); ``make gallery`` (``LOCALSCHED_WRITE_GALLERY=1``) writes them to
``docs/_static/gallery/``, which the docs show (commit them when they change).

What a user reads is checked in the page itself at the moment of the
screenshot: busy workers while tasks run, the summary strip agreeing with
progress per group, the fine-metrics bars named, no flame label wider than
its frame, the report's flame graph attributing its time to task groups.
The live page is shot on a run held half-way (its tasks wait for an event
the test sets after the screenshot), so the moment does not depend on the
machine's speed.  (Chromium's one-shot ``--screenshot`` captures a Bokeh server page blank:
the tab is driven over the DevTools protocol, tests/support/live_tab.py.)
"""

from __future__ import annotations

import os
import pathlib
import re
import threading
import time

import pytest

from localsched.callbacks import Callback
from localsched.diagnostics import Dashboard, FineMetrics, SampleProfiler

try:
    from tests.support.live_tab import LiveTab
except ImportError:
    from tests.support.live_tab import LiveTab  # type: ignore[no-redef]

GALLERY = pathlib.Path(__file__).resolve().parents[3] / "docs" / "_static" / "gallery"


@pytest.fixture
def gallery(tmp_path) -> pathlib.Path:
    """Where the screenshots go: docs/_static/gallery with
    ``LOCALSCHED_WRITE_GALLERY=1`` (``make gallery``), else a temporary directory."""
    if os.environ.get("LOCALSCHED_WRITE_GALLERY", "") not in ("", "0"):
        GALLERY.mkdir(parents=True, exist_ok=True)
        return GALLERY
    return tmp_path

DOC_READY = ("window.Bokeh && Bokeh.documents.length > 0 && "
             "Bokeh.documents[0].get_model_by_name('task_stream') !== null")
BOKEH_RENDERED = ("window.Bokeh && Object.keys(Bokeh.index).length > 0"
                  " && Object.values(Bokeh.index).every((view) => view.has_finished())")

#: What the page shows at one moment (one evaluation: one state of its document).
PAGE_STATE = r"""
(() => {
  const doc = Bokeh.documents[0];
  const col = (d, k) => d instanceof Map ? d.get(k) : d[k];
  const groups = doc.get_model_by_name('progress_done').data_source.data;
  const fine = doc.get_model_by_name('fine_metrics');
  const flame = doc.get_model_by_name('flame_labels').data_source.data;
  const fig = doc.get_model_by_name('flame_graph');
  const overrides = fine.left[0].major_label_overrides;
  // (the strip as shown: its element, which the page writes without a model change)
  const strip = Bokeh.index[doc.get_model_by_name('summary').id].markup_el.innerHTML;
  return {summary: strip,
          labels: Array.from(col(groups, 'label')),
          fine_names: overrides instanceof Map ? Array.from(overrides.values())
                                               : Object.values(overrides),
          fine_groups: Array.from(col(fine.renderers[0].data_source.data, 'group')),
          flame: {label: Array.from(col(flame, 'label')), name: Array.from(col(flame, 'name')),
                  left: Array.from(col(flame, 'left')), right: Array.from(col(flame, 'right'))},
          flame_px: fig.inner_width};
})()
"""


def _cells(text: str) -> dict:
    return dict(re.findall(r"<span style=.color:#777.>([^<]+)</span> <b>([^<]*)</b>", text))


def _parts() -> list:
    """Arrays, a bag and a dataframe groupby: one computation's collections."""
    import dask.array as da
    import dask.bag as db
    import pandas as pd

    try:
        import dask.dataframe as dd
    except ImportError:  # (no pyarrow)
        dd = None
    x = da.random.random((500, 500), chunks=(125, 125))
    y = (x @ x.T + x.mean(axis=0)).sum(axis=1)
    words = db.from_sequence(range(20_000), npartitions=40).map(
        lambda i: f"w{i % 97}").frequencies().topk(5, key=1)
    parts = [y.sum(), words]
    if dd is not None:
        frame = pd.DataFrame({"k": [i % 13 for i in range(40_000)],
                              "v": [float(i) for i in range(40_000)]})
        df = dd.from_pandas(frame, npartitions=20)
        parts.append(df.assign(w=df.v * 2).groupby("k").w.mean())
    return parts


def _held_run(n_tasks: int, entered: threading.Event, release: threading.Event) -> list:
    """One computation of ``_parts`` (``n_tasks`` tasks) that stops half-way
    until ``release``: two ``store`` tasks need every result of the parts
    and wait for ``release`` (``entered`` is set when one has started: every
    other task of the parts is done then), and ``n_tasks`` ``publish`` tasks
    wait for them.  The page then shows a run about half done, a worker
    busy, for as long as the test looks: no race with the run."""
    import dask

    def gather(*results):
        return len(results)

    def store(i, gathered):
        entered.set()
        if not release.wait(300):
            raise TimeoutError("the test never released the run")
        return i

    def publish(stored, i):
        return i

    # (one delayed holds the parts: each delayed that took the collections
    # themselves would get its own copy of their tasks)
    gathered = dask.delayed(gather, pure=False)(*_parts())
    stores = [dask.delayed(store, pure=False)(i, gathered) for i in range(2)]
    return [dask.delayed(publish, pure=False)(stores, i) for i in range(n_tasks)]


def _mid_run(state: dict) -> bool:
    """Whether the page shows a run between 30 % and 80 % done, with a
    worker busy and the flame graph labelled: the moment the gallery shows."""
    cells = _cells(state["summary"])
    if not cells.get("run", "").endswith("running") or "tasks" not in cells:
        return False
    done, total = (int(n.replace(",", "")) for n in cells["tasks"].split(" / "))
    return (0.3 * total < done < 0.8 * total
            and cells.get("workers busy", "0").startswith(("1", "2"))
            and any(state["flame"]["label"]))


def _check_live_page(state: dict) -> None:
    cells = _cells(state["summary"])
    assert cells["run"].endswith("running"), cells
    busy, workers = map(int, cells["workers busy"].split(" / "))
    assert 0 < busy <= workers == 2, cells
    done, total = (int(n.replace(",", "")) for n in cells["tasks"].split(" / "))
    shown = sum(int(label.split()[-1].split("/")[0]) for label in state["labels"])
    assert shown == done and 0 < done < total, (cells, state["labels"])
    groups = list(dict.fromkeys(state["fine_groups"]))
    assert groups and all(any(name.rstrip("\u2026") in g for g in groups)
                          for name in state["fine_names"]), state["fine_names"]
    flame, px = state["flame"], state["flame_px"]
    assert any(flame["label"]), "the flame graph has labels"
    for label, left, right in zip(flame["label"], flame["left"], flame["right"], strict=True):
        assert len(label) * 5.5 <= (right - left) * px + 1, (label, right - left)


@pytest.mark.timeout(600)
def test_gallery_live_page_mid_run(chromium_path, gallery):
    pytest.importorskip("dask.array")
    import dask

    import localsched.threaded

    dash = Dashboard(quiet=True)
    entered, release = threading.Event(), threading.Event()
    failure: list = []

    def run():
        # two finished runs first (fine metrics and samples are of finished
        # runs), then one held half-way (``_held_run``)
        sizes: list = []
        try:
            with dash, FineMetrics(), SampleProfiler(interval=0.01):
                for _ in range(2):
                    with Callback(start=lambda dsk: sizes.append(len(dsk))):
                        dask.compute(*_parts(), scheduler=localsched.threaded.get,
                                     num_workers=2)
                dask.compute(*_held_run(sizes[-1], entered, release),
                             scheduler=localsched.threaded.get, num_workers=2)
        except BaseException as exc:  # noqa: B036 -- reported below
            failure.append(exc)
        finally:
            entered.set()  # (a failure before the held run: the test stops waiting)

    worker = threading.Thread(target=run)
    try:
        with LiveTab(dash.link, wait_for=DOC_READY, executable=chromium_path,
                     width=1100, height=1500) as tab:
            assert tab.ready
            worker.start()
            entered.wait(400)
            assert not failure, failure
            assert entered.is_set(), "the held run never started"
            # the run stays where it is until released: wait for the page to
            # show it (its strip refreshes several times a second, the flame
            # graph every 5 s), then read it in one evaluation
            deadline = time.monotonic() + 120
            state = tab.evaluate(PAGE_STATE)
            while not _mid_run(state) and time.monotonic() < deadline:
                time.sleep(0.1)
                state = tab.evaluate(PAGE_STATE)
            assert _mid_run(state), state
            tab.screenshot(gallery / "dashboard-status.png", full_page=True)
            _check_live_page(state)
            tab.close_tab()
        assert tab.errors == [], tab.errors
    finally:
        release.set()
        if worker.is_alive():
            worker.join(300)
        dash.close()
    assert not failure, failure


@pytest.mark.timeout(600)
def test_gallery_report_of_a_multi_group_session(chromium_path, tmp_path, gallery):
    pytest.importorskip("dask.array")
    from tests.support.real_session import run_session

    data = run_session(2, title="gallery: arrays, a bag, a dataframe groupby")
    groups = {s.group for s in data.samples if s.group}
    assert len(groups) >= 5 and data.metrics
    path = tmp_path / "report.html"
    data.to_html(path)
    with LiveTab(path.as_uri(), wait_for=BOKEH_RENDERED, executable=chromium_path,
                 width=1300, height=1200) as tab:
        assert tab.ready
        flame = tab.evaluate(r"""(() => {
          const s = Bokeh.documents[0].get_model_by_name('flame').data_source.data;
          const col = (k) => s instanceof Map ? s.get(k) : s[k];
          return {name: Array.from(col('name')), depth: Array.from(col('depth')),
                  share: Array.from(col('share')), where: Array.from(col('where'))};
        })()""")
        tab.screenshot(gallery / "report.png", full_page=True)
    assert tab.errors == [], tab.errors
    # the "all" flame graph's first row names the task groups, and they hold
    # the time sampled in tasks (C code included)
    first_row = [(n, s) for n, d, s, w in zip(flame["name"], flame["depth"], flame["share"],
                                               flame["where"], strict=True)
                 if d == 1 and w == "task group"]
    assert {n for n, _ in first_row} & groups
    assert sum(s for n, s in first_row if n in groups) > 0.5
    assert os.path.getsize(gallery / "report.png") > 50_000
