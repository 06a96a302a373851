"""Progress per task group: one row per group, done / running / erred of total,
redrawn with every take-in of the finished tasks (the snapshot the summary
strip's counts come from, so the two agree), only the columns that changed."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure

from .component import PAGE_WIDTH, Component, changed, inline, lean

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
    #: (every full update: drawn from the take-in the summary strip shows)
    period = 0.1

    def __init__(self, feed, context=None):
        super().__init__(feed, context)
        self.source = ColumnDataSource(self._data())
        fig = figure(title="Progress per task group", width=PAGE_WIDTH, height=_height(1),
                     x_range=Range1d(0, 1.0), y_range=Range1d(MAX_GROUPS, -1),
                     tools="", toolbar_location=None, name="progress")
        for left, right, color, alpha in ((0, "done", "color", 0.85),
                                          ("done", "running", RUNNING_COLOR, 0.85),
                                          ("running", "erred", ERRED_COLOR, 0.85),
                                          ("erred", 1.0, "#e8e8e8", 0.6)):
            fig.hbar(y="y", left=left, right=right, height=0.8, color=color, alpha=alpha,
                     source=self.source, name="progress_done" if right == "done" else None)
        fig.text(x=0.005, y="y", text="label", source=self.source, text_font_size="12px",
                 text_baseline="middle")
        fig.add_tools(HoverTool(tooltips=[("group", "@name"), ("tasks", "@detail")]))
        self.root = lean(fig, x_axis=False, y_axis=False, grids="")

    def _data(self) -> dict:
        """One row per group: where its done / running / erred bars end (as
        fractions of its total, inline numbers) and its label strings."""
        with self.feed.lock:
            items = list(self.feed.groups.items())[:MAX_GROUPS]
            colors = self.feed.colors
            # (done: taken in, and ended with records on their way, as the strip counts)
            rows = [(g, c.done + c.ended, c.running, c.erred, c.total) for g, c in items]
        counts = np.array([(done, running, erred, max(total, done + running + erred, 1))
                           for _, done, running, erred, total in rows],
                          dtype=float).reshape(-1, 4)
        ends = np.cumsum(counts[:, :3], axis=1) / counts[:, 3:]
        labels, details = [], []
        for g, done, running, erred, total in rows:
            extra = f", {erred} erred" if erred else ""
            labels.append(f"{g}  {done}/{total}{extra}")
            details.append(f"{done} done, {running} running, {erred} erred of {total}")
        return {"name": np.array([g for g, _ in items], dtype=str),
                "y": inline(np.arange(len(items))), "done": inline(ends[:, 0]),
                "running": inline(ends[:, 1]), "erred": inline(ends[:, 2]),
                "label": np.array(labels, dtype=str), "detail": np.array(details, dtype=str),
                "color": np.array([colors.get(g, "#888") for g, _ in items], dtype=str)}

    def update(self) -> None:
        self.feed.update()
        data = self._data()
        n = len(data["name"])
        if self.root.y_range.start != max(n, 1) - 0.5:
            self.root.y_range.start = max(n, 1) - 0.5
            self.root.y_range.end = -0.5
            self.root.height = _height(n)
        changed(self.source, data)
