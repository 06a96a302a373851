"""Render the findings panel of a report for the docs: a small script whose
workloads each have a known cause, recorded with performance_report, the
page opened in headless Chromium and the top of it saved as findings.png.

    .venv/bin/python docs/_static/gallery/make_findings.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import localsched
from localsched.diagnostics.report import performance_report

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path[:0] = [ROOT]  # (the tests' workloads and browser: tests.*)

# The workloads with a known cause are the findings tests' own.
from tests.diagnostics.analysis.test_findings import inc, make_block, nap, py_loop, total  # noqa: E402


def main() -> None:
    from tests.support.browser import open_in_chromium

    page = os.path.join(tempfile.mkdtemp(), "report.html")
    with performance_report(page, title="Findings on a script with known causes"):
        tiny = {("inc", i): (inc, i) for i in range(20_000)}
        localsched.get(tiny, list(tiny), num_workers=2)
        time.sleep(0.5)  # the script's own work between computations
        loops = {("py-loop", i): (py_loop, 1_000_000) for i in range(16)}
        localsched.get(loops, list(loops), num_workers=2)
        dsk = {("make", i): (make_block, i) for i in range(12)}
        dsk["total"] = (total, *[("make", i) for i in range(12)])
        dsk.update({("part", i): (nap, i, 0.6 if i == 5 else 0.02) for i in range(20)})
        localsched.get(dsk, ["total", *[("part", i) for i in range(20)]], num_workers=2)
    shot = os.path.join(tempfile.mkdtemp(), "page.png")
    result = open_in_chromium(page, width=1100, screenshot=shot, timeout=120,
                              wait_for="window.Bokeh && Object.keys(Bokeh.index).length > 0"
                              " && Object.values(Bokeh.index).every((v) => v.has_finished())")
    assert not result.errors, result.errors
    from PIL import Image

    image = Image.open(shot)
    image.crop((0, 0, image.width, min(image.height, 760))).save(
        os.path.join(HERE, "findings.png"), optimize=True)
    if os.environ.get("LOCALSCHED_WHOLE_PAGE"):  # (the whole page, to look at)
        image.save(os.environ["LOCALSCHED_WHOLE_PAGE"])


if __name__ == "__main__":
    main()
