"""Render the memory panel of the memory-budget guide's worked example
(``docs/guides/memory-budget.md``): the example recorded with
performance_report, its memory panel drawn as the report draws it, alone
on a page opened in headless Chromium, saved as budget.png.

    .venv/bin/python docs/_static/gallery/make_budget.py

With a localsched whose schedulers take ``memory_limit=`` (issue 34) the
example runs as the guide writes it.  Without, a stand-in callback plays
the budget's part so that the panel can be drawn: it spills results to a
real ``SpillStore`` (real disk writes and reads, real timings) when what it
counts as held crosses the target, reads them back before a task that
needs them, and leaves the record at ``state.outcome.memory`` as the
scheduler does -- but it frees no memory (the values stay in the cache);
regenerate the picture once the budget is in.
"""

from __future__ import annotations

import inspect
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path[:0] = [ROOT]  # (the tests' browser driver: tests.support.browser)

import dask  # noqa: E402
import dask.array as da  # noqa: E402

import localsched  # noqa: E402
from localsched.callbacks import Callback  # noqa: E402
from localsched.diagnostics.report import performance_report  # noqa: E402
from localsched.run.budget_record import BudgetRecord  # noqa: E402
from localsched.run.spill import SpillStore  # noqa: E402

LIMIT = 200_000_000


class StandInBudget(Callback):
    """Plays the scheduler's budget for the picture (see the module note)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def _start_state(self, dsk, state):
        from dask.sizeof import sizeof

        self.sizeof = sizeof
        self.record = BudgetRecord(self.limit, int(0.6 * self.limit), int(0.8 * self.limit))
        self.store = SpillStore()
        self.ids: dict = {}
        self.spilled: dict = {}  # key -> bytes
        self.order: list = []  # cached keys, oldest first
        state.outcome.memory = self.record

    def _held(self, state) -> int:
        cache = state["cache"]
        return sum(self.sizeof(v) for k, v in list(cache.items()) if k not in self.spilled)

    def _pretask(self, key, dsk, state):
        for dep in state["dependencies"].get(key, ()):
            if dep in self.spilled:
                t0 = time.time()
                self.store.get(self.ids[dep])
                n = self.spilled.pop(dep)
                self.store.drop(self.ids[dep])
                self.record.events.append((t0, time.time(), "disk-read", dep, n))

    def _posttask(self, key, result, dsk, state, worker_id):
        self.order.append(key)
        held = self._held(state)
        cache = state["cache"]
        while held > self.record.target:
            victim = next((k for k in self.order if k in cache and k not in self.spilled
                           and k != key), None)
            if victim is None:
                break
            t0 = time.time()
            n = self.store.put(self.ids.setdefault(victim, len(self.ids)), cache[victim])
            self.record.events.append((t0, time.time(), "disk-write", victim, n))
            self.spilled[victim] = n
            held -= self.sizeof(cache[victim])
        self.record.timeline.append((time.time(), held, self.store.spilled_bytes))

    def _finish(self, dsk, state, errored):
        self.store.close()


def example(page: str):
    """The guide's example, its report written to ``page``; its RunData."""
    x = da.random.random((6_000, 6_000), chunks=(1_000, 1_000))  # 288 MB
    anomaly = x - x.mean()  # all of x waits for the mean
    budget = "memory_limit" in inspect.signature(localsched.get).parameters
    with performance_report(page, title="A computation within a memory budget") as report:
        if budget:
            with dask.config.set({"localsched.memory.spill": True}):
                dask.compute(anomaly.std(), scheduler=localsched.get, memory_limit=LIMIT)
        else:
            with StandInBudget(LIMIT):
                dask.compute(anomaly.std(), scheduler=localsched.get)
    return report.data


def panel_page(run, path: str) -> None:
    """The report's memory panel alone, as the report draws it, in one page."""
    from bokeh.embed import file_html
    from bokeh.models import Range1d
    from bokeh.resources import INLINE

    from localsched.diagnostics.figures.base import group_colors
    from localsched.diagnostics.figures.memory import plot_held
    from localsched.diagnostics.reporting.naming import groups_of

    t0 = min(t.start_time for t in run.tasks)
    span = max(t.end_time for t in run.tasks) - t0
    colors = group_colors(set(groups_of(t.key for t in run.tasks)))
    fig = plot_held(run, run.memory_peak(), Range1d(0.0, span), t0, colors)
    with open(path, "w", encoding="utf-8") as f:
        f.write(file_html(fig, resources=INLINE, title="memory panel"))


def main() -> None:
    from tests.support.browser import open_in_chromium

    workdir = tempfile.mkdtemp()
    run = example(os.path.join(workdir, "report.html"))
    page = os.path.join(workdir, "panel.html")
    panel_page(run, page)
    shot = os.path.join(workdir, "panel.png")
    result = open_in_chromium(page, width=1000, screenshot=shot, timeout=120,
                              wait_for="window.Bokeh && Object.keys(Bokeh.index).length > 0"
                              " && Object.values(Bokeh.index).every((v) => v.has_finished())")
    assert not result.errors, result.errors
    from PIL import Image, ImageChops

    image = Image.open(shot).convert("RGB")
    # (the page's white margin below the figure goes)
    box = ImageChops.difference(image, Image.new("RGB", image.size, "white")).getbbox()
    bottom = min(image.height, box[3] + 8) if box else image.height
    image.crop((0, 0, image.width, bottom)).save(os.path.join(HERE, "budget.png"), optimize=True)


if __name__ == "__main__":
    main()
