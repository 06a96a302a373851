"""The README's picture: the first screen of the real report of the demo.

The documentation and the README show pictures of what localsched draws;
none is made by hand.  ``tests/diagnostics/reporting/test_gallery_pages.py`` writes the
report and the live page whole; this test runs the bundled demo as ``make
demo`` does (``localsched demo``), opens the performance report it writes
in headless Chromium, checks that it rendered with no console error, and
keeps the top of the page (findings, summary, task stream, resources) as
``report-top.png``, the picture of the README and the front page.  By
default the PNG goes to a temporary directory (the test checks it and
leaves the working tree alone); ``make gallery`` (``LOCALSCHED_WRITE_GALLERY=1``)
writes it to ``docs/_static/gallery/``.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.browser import open_in_chromium, require_chromium

GALLERY = Path(__file__).resolve().parent.parent / "docs" / "_static" / "gallery"

BOKEH_RENDERED = (
    "window.Bokeh && Object.keys(Bokeh.index).length > 0"
    " && Object.values(Bokeh.index).every((view) => view.has_finished())"
)


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


@pytest.mark.timeout(600)
def test_report_first_screen(gallery, tmp_path):
    """The report ``make demo`` writes (``localsched demo``, its defaults)."""
    chromium = require_chromium()
    report_path = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "localsched.command.cli", "demo", "--no-progress",
                           "-o", str(report_path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=500)
    assert proc.returncode == 0, proc.stderr
    shot = tmp_path / "report.png"
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
