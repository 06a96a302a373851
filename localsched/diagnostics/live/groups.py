"""Progress per task group: one row per group, done / running / erred of total."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure

from .component import PAGE_WIDTH, Component, changed, lean

__all__ = ["GroupProgress", "MAX_GROUPS"]

MAX_GROUPS = 30
RUNNING_COLOR = "#f2c12e"
ERRED_COLOR = "#d62728"
ROW_PIXELS = 20


def _height(rows: int) -> int:
    return 50 + ROW_PIXELS * max(rows, 1)


class GroupProgress(Component):
    name = "progress"
    title = "Progress"
    #: (the summary strip above it gives the totals every 0.1 s)
    period = 0.5

    def __init__(self, feed, context=None):
        super().__init__(feed, context)
        self.source = ColumnDataSource(self._data())
        fig = figure(title="Progress per task group", width=PAGE_WIDTH, height=_height(1),
                     x_range=Range1d(0, 1.0), y_range=Range1d(MAX_GROUPS, -1),
                     tools="", toolbar_location=None, name="progress")
        fig.quad(left=0, right="done", bottom="bottom", top="top", color="color",
                 source=self.source, alpha=0.85, name="progress_done")
        fig.quad(left="done", right="running", bottom="bottom", top="top",
                 color=RUNNING_COLOR, source=self.source, alpha=0.85)
        fig.quad(left="running", right="erred", bottom="bottom", top="top",
                 color=ERRED_COLOR, source=self.source, alpha=0.85)
        fig.quad(left="erred", right=1.0, bottom="bottom", top="top", color="#e8e8e8",
                 source=self.source, alpha=0.6)
        fig.text(x=0.005, y="y", text="label", source=self.source, text_font_size="12px",
                 text_baseline="middle")
        fig.add_tools(HoverTool(tooltips=[("group", "@name"), ("done", "@n_done"),
                                          ("running", "@n_running"), ("erred", "@n_erred"),
                                          ("total", "@n_total")]))
        self.root = lean(fig, x_axis=False, y_axis=False, grids="")

    def _data(self) -> dict:
        cols: dict = {k: [] for k in ("name", "y", "bottom", "top", "done", "running", "erred",
                                      "n_done", "n_running", "n_erred", "n_total", "label",
                                      "color")}
        with self.feed.lock:
            items = list(self.feed.groups.items())[:MAX_GROUPS]
            colors = self.feed.colors
        for i, (g, c) in enumerate(items):
            total = max(c.total, c.done + c.running + c.erred, 1)
            done = c.done / total
            running = done + c.running / total
            erred = running + c.erred / total
            cols["name"].append(g)
            cols["y"].append(i)
            cols["bottom"].append(i - 0.4)
            cols["top"].append(i + 0.4)
            cols["done"].append(done)
            cols["running"].append(running)
            cols["erred"].append(erred)
            cols["n_done"].append(c.done)
            cols["n_running"].append(c.running)
            cols["n_erred"].append(c.erred)
            cols["n_total"].append(c.total)
            extra = f", {c.erred} erred" if c.erred else ""
            cols["label"].append(f"{g}  {c.done}/{c.total}{extra}")
            cols["color"].append(colors.get(g, "#888"))
        for k in ("y", "bottom", "top", "done", "running", "erred"):
            cols[k] = np.asarray(cols[k], dtype=float)
        for k in ("n_done", "n_running", "n_erred", "n_total"):
            cols[k] = np.asarray(cols[k], dtype=np.int64)
        for k in ("name", "label", "color"):  # (one list for bokeh, not a call per string)
            cols[k] = np.array(cols[k], dtype=str)
        return cols

    def update(self) -> None:
        self.feed.update()
        data = self._data()
        n = len(data["name"])
        if self.root.y_range.start != max(n, 1) - 0.5:
            self.root.y_range.start = max(n, 1) - 0.5
            self.root.y_range.end = -0.5
            self.root.height = _height(n)
        changed(self.source, data)
