"""The gallery: screenshots of the real report and the real dashboard.

The documentation and the README show pictures of what localsched draws;
none is made by hand.  These tests run the bundled demo's workload, open the
performance report it writes and the live dashboard that watched it in
headless Chromium, check that each page rendered with no console error, and
take the screenshot.  By default the PNGs go to a temporary directory (the
tests check them and leave the working tree alone); with
``LOCALSCHED_WRITE_GALLERY=1`` they are written to ``docs/_static/gallery/``,
where the site and the README pick them up::

    LOCALSCHED_WRITE_GALLERY=1 .venv/bin/python -m pytest tests/test_gallery.py
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest
from browser import open_in_chromium, require_chromium
from live_tab import LiveTab

GALLERY = Path(__file__).resolve().parent.parent / "docs" / "_static" / "gallery"

BOKEH_RENDERED = (
    "window.Bokeh && Object.keys(Bokeh.index).length > 0"
    " && Object.values(Bokeh.index).every((view) => view.has_finished())"
)
DOC_READY = ("window.Bokeh && Bokeh.documents.length > 0 && "
             "Bokeh.documents[0].get_model_by_name('task_stream') !== null")
STREAM_LENGTH = ("(() => { const m = Bokeh.documents[0].get_model_by_name('task_stream');"
                 " return m ? m.data_source.data.left.length : -1; })()")


@pytest.fixture
def gallery(tmp_path) -> Path:
    if os.environ.get("LOCALSCHED_WRITE_GALLERY", "") not in ("", "0"):
        GALLERY.mkdir(parents=True, exist_ok=True)
        return GALLERY
    return tmp_path


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG, read from its header."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def demo_workload():
    from localsched.demo import blocked_workload

    return blocked_workload(blocks=4, block_size=200)


@pytest.mark.timeout(600)
def test_report_screenshot(gallery, tmp_path):
    chromium = require_chromium()
    import localsched

    report_path = tmp_path / "report.html"
    total, ok = demo_workload()
    with localsched.performance_report(str(report_path), title="localsched demo"):
        assert localsched.compute(total, ok)[1]
    shot = gallery / "report.png"
    result = open_in_chromium(report_path, wait_for=BOKEH_RENDERED, width=1280,
                              screenshot=shot, executable=chromium, timeout=300)
    assert result.ready and result.errors == []
    width, height = png_size(shot)
    assert width >= 1000 and height >= 800, (width, height)
    # The top of the page (summary, task stream, resources, cache) for the
    # README and the front page, where the whole page would be too tall.
    from PIL import Image  # bokeh's own dependency

    with Image.open(shot) as full:
        full.crop((0, 0, width, min(height, 1150))).save(gallery / "report-top.png")
    assert png_size(gallery / "report-top.png") == (width, min(height, 1150))


@pytest.mark.timeout(600)
def test_dashboard_screenshot(gallery):
    chromium = require_chromium()
    import localsched
    from localsched.diagnostics import Dashboard, FineMetrics, SampleProfiler

    dash = Dashboard()
    try:
        total, ok = demo_workload()
        with dash, FineMetrics(), SampleProfiler(interval=0.005):
            assert localsched.compute(total, ok)[1]
        with LiveTab(dash.link, wait_for=DOC_READY, executable=chromium, width=1280,
                     height=1000) as tab:
            assert tab.ready, "the dashboard never built its Bokeh document"
            deadline = time.monotonic() + 60
            while tab.evaluate(STREAM_LENGTH) <= 0 and time.monotonic() < deadline:
                time.sleep(0.2)  # the page takes in the finished run at its own pace
            assert tab.evaluate(STREAM_LENGTH) > 0, "the task stream stayed empty"
            shot = gallery / "dashboard.png"
            tab.screenshot(shot)
            tab.close_tab()
        assert tab.errors == []
        width, height = png_size(shot)
        assert width >= 1000 and height >= 600, (width, height)
    finally:
        dash.close()
