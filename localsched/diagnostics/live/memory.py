"""Bytes held per task group: results in the scheduler's cache now, by group.

Measured only when the Dashboard measures results (``Dashboard(memory=True)``):
the hook then takes each result's size, and the keys its end released.

Under a memory budget (``memory_limit=``) the view shows memory against
it, measured or not: two bars first, ``(all held)`` and ``(spilled)``, the
budget's own counts (its record, ``state.outcome.memory``, read as the run
goes), with the limit, pause and target as lines across, and the title
says the figures.
"""

from __future__ import annotations

from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Span
from bokeh.plotting import figure

from .component import PAGE_WIDTH, Component, changed, lean

__all__ = ["MemoryByGroup"]

MAX_BARS = 30
EMPTY_HEIGHT = 90
HELD, SPILLED = "(all held)", "(spilled)"
#: (field, span name, color, dash) of the budget's lines
BUDGET_LINES = (("limit", "budget-limit", "#b2182b", "solid"),
                ("pause", "budget-pause", "#ef8a62", "dashed"),
                ("target", "budget-target", "#666666", "dotted"))


def _budget_now(run) -> tuple | None:
    """``(record, held, spilled)`` of the run's budget now, or None."""
    record = run.budget() if run is not None else None
    if record is None:
        return None
    timeline = record.timeline
    held, spilled = (timeline[-1][1], timeline[-1][2]) if timeline else (0, 0)
    return record, held, spilled


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
        self.lines = {}
        for field, name, color, dash in BUDGET_LINES:
            span = Span(location=0, dimension="width", line_color=color, line_dash=dash,
                        line_width=2, visible=False, name=name)
            fig.add_layout(span)
            self.lines[field] = span
        self.root = lean(fig, grids="y")
        self.update()

    def update(self) -> None:
        feed = self.feed
        feed.update()
        with feed.lock:
            measured = [(g, c.held) for g, c in feed.groups.items() if c.held >= 0]
            colors = dict(feed.colors)
            budget = _budget_now(feed.run)
        measured = sorted(measured, key=lambda gh: -gh[1])[:MAX_BARS]
        if not measured:
            self.root.title.text = "Bytes held per group: not measured (Dashboard(memory=True))"
        else:
            self.root.title.text = "Bytes held per task group (MB)"
        self._show_budget(budget, measured, colors)
        height = 260 if measured else EMPTY_HEIGHT
        if self.root.height != height:
            self.root.height = height
        groups = [g for g, _ in measured]
        if list(self.root.x_range.factors) != groups:
            self.root.x_range.factors = groups
        changed(self.source, {"group": groups, "mb": [h / 1e6 for _, h in measured],
                              "color": [colors.get(g, "#888") for g in groups],
                              "label": [f"{h / 1e6:,.2f} MB" for _, h in measured]})

    def _show_budget(self, budget, measured: list, colors: dict) -> None:
        """Put the budget's bars first, its lines across, its figures in the
        title (lines hidden without a budget)."""
        for field, span in self.lines.items():
            span.visible = budget is not None
            if budget is not None:
                span.location = getattr(budget[0], field) / 1e6
        if budget is None:
            return
        record, held, spilled = budget
        measured[:0] = [(HELD, held), (SPILLED, spilled)]
        colors[HELD], colors[SPILLED] = "#333333", "#7b3294"
        self.root.title.text = (f"Memory against the budget: held {held / 1e6:,.1f} MB of "
                                f"budget {record.limit / 1e6:,.1f} MB (pause "
                                f"{record.pause / 1e6:,.1f}, target {record.target / 1e6:,.1f}),"
                                f" spilled {spilled / 1e6:,.1f} MB; per task group (MB)")
