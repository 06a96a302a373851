"""Bytes held per task group: results in the scheduler's cache now, by group.

Measured only when the Dashboard measures results (``Dashboard(memory=True)``):
the hook then takes each result's size, and the keys its end released.
"""

from __future__ import annotations

from bokeh.models import ColumnDataSource, FactorRange, HoverTool
from bokeh.plotting import figure

from .component import PAGE_WIDTH, Component, changed, lean

__all__ = ["MemoryByGroup"]

MAX_BARS = 30
EMPTY_HEIGHT = 90


class MemoryByGroup(Component):
    name = "memory-by-group"
    title = "Memory by Group"
    period = 1.0

    def __init__(self, feed, context=None):
        super().__init__(feed, context)
        self.source = ColumnDataSource({"group": [], "mb": [], "color": [], "label": []})
        fig = figure(title="Bytes held per task group (MB)", width=PAGE_WIDTH // 2, height=260,
                     x_range=FactorRange(), tools="", toolbar_location=None,
                     name="memory_by_group")
        fig.vbar(x="group", top="mb", width=0.8, color="color", source=self.source)
        fig.add_tools(HoverTool(tooltips=[("group", "@group"), ("held", "@label")]))
        fig.xaxis.major_label_orientation = 0.6
        fig.y_range.start = 0
        self.root = lean(fig, grids="y")
        self.update()

    def update(self) -> None:
        feed = self.feed
        feed.update()
        with feed.lock:
            measured = [(g, c.held) for g, c in feed.groups.items() if c.held >= 0]
            colors = dict(feed.colors)
        measured = sorted(measured, key=lambda gh: -gh[1])[:MAX_BARS]
        if not measured:
            self.root.title.text = "Bytes held per group: not measured (Dashboard(memory=True))"
        else:
            self.root.title.text = "Bytes held per task group (MB)"
        height = 260 if measured else EMPTY_HEIGHT
        if self.root.height != height:
            self.root.height = height
        groups = [g for g, _ in measured]
        if list(self.root.x_range.factors) != groups:
            self.root.x_range.factors = groups
        changed(self.source, {"group": groups, "mb": [h / 1e6 for _, h in measured],
                              "color": [colors.get(g, "#888") for g in groups],
                              "label": [f"{h / 1e6:,.2f} MB" for _, h in measured]})
