"""Fine metrics per task group and activity (thread CPU, non-CPU, the user's
``metrics.meter`` labels, serialization ...), from the FineMetrics callbacks
active beside the Dashboard (of their finished computations): one stacked
bar per task group, named on the y axis (shortened; the hover has it whole),
the time outside tasks (``NO_GROUP``) last, not ranked among the groups."""

from __future__ import annotations

from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, Range1d
from bokeh.plotting import figure

from ..reporting.aggregate import NO_GROUP
from ..reporting.naming import shorten
from .component import PAGE_WIDTH, Component, changed, lean

__all__ = ["FineMetricsView"]

ACTIVITY_COLORS = {"thread-cpu": "#1f77b4", "thread-noncpu": "#ff7f0e", "serialize": "#2ca02c",
                   "deserialize": "#98df8a", "transfer": "#9467bd", "queued": "#c5b0d5",
                   "idle": "#cccccc", "scheduler": "#8c564b"}
OTHER_COLORS = ("#e377c2", "#bcbd22", "#17becf", "#7f7f7f", "#aec7e8", "#ffbb78")
MAX_GROUPS = 20
EMPTY_HEIGHT = 90
#: Characters of a group's name on the axis.
AXIS_CHARS = 30
ROW_PIXELS = 22


class FineMetricsView(Component):
    name = "fine-metrics"
    title = "Fine Metrics"
    period = 1.0

    def __init__(self, feed, context=None):
        super().__init__(feed, context)
        self.source = ColumnDataSource({k: [] for k in ("left", "right", "bottom", "top",
                                                        "color", "group", "activity",
                                                        "seconds")})
        fig = figure(title="Fine metrics: seconds per task group and activity",
                     width=PAGE_WIDTH // 2, height=260, y_range=Range1d(MAX_GROUPS, -1),
                     tools="", toolbar_location=None, name="fine_metrics")
        fig.quad(left="left", right="right", bottom="bottom", top="top", color="color",
                 source=self.source, legend_field="activity")
        fig.add_tools(HoverTool(tooltips=[("group", "@group"), ("activity", "@activity"),
                                          ("seconds", "@seconds{0.000}")]))
        fig.legend.location = "bottom_right"
        fig.legend.label_text_font_size = "9px"
        self.ticker = FixedTicker(ticks=[])
        fig.yaxis.ticker = self.ticker
        fig.yaxis.major_label_text_font_size = "10px"
        fig.xaxis.axis_label = "seconds"
        self.root = lean(fig, grids="x")
        self.update()

    def update(self) -> None:
        totals: dict = {}
        for fm in self.context.diagnostics("FineMetrics") if self.context else ():
            for (group, activity), seconds in fm.by("group", "activity").items():
                totals[group, activity] = totals.get((group, activity), 0.0) + seconds
        by_group: dict = {}
        for (group, activity), seconds in totals.items():
            name = NO_GROUP if group is None else str(group)
            by_group.setdefault(name, []).append((activity, seconds))
        order = sorted(by_group, key=lambda g: (g == NO_GROUP,
                                                -sum(s for _, s in by_group[g])))[:MAX_GROUPS]
        cols: dict = {k: [] for k in self.source.data}
        others: dict = {}
        for i, g in enumerate(order):
            left = 0.0
            for activity, seconds in sorted(by_group[g]):
                color = ACTIVITY_COLORS.get(activity) or others.setdefault(
                    activity, OTHER_COLORS[len(others) % len(OTHER_COLORS)])
                for k, v in (("left", left), ("right", left + seconds), ("bottom", i - 0.4),
                             ("top", i + 0.4), ("color", color), ("group", g),
                             ("activity", activity), ("seconds", seconds)):
                    cols[k].append(v)
                left += seconds
        height = max(160, 90 + ROW_PIXELS * len(order)) if order else EMPTY_HEIGHT
        if self.root.height != height:
            self.root.height = height
        names = {i: shorten(g, AXIS_CHARS)
                 for i, g in enumerate(order)}
        if names != self.root.yaxis[0].major_label_overrides:
            self.ticker.ticks = list(names)
            self.root.yaxis[0].major_label_overrides = names
        if not order:
            self.root.title.text = "Fine metrics: none yet (add FineMetrics(); per finished run)"
        else:
            self.root.title.text = "Fine metrics: seconds per task group and activity"
            self.root.y_range.start = len(order) - 0.5
            self.root.y_range.end = -0.5
        changed(self.source, cols)
