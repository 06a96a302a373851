"""The task stream: one lane per worker, a rectangle per task coloured by its
group; tasks still running drawn in lanes of their own ("running") from their
start to now, since a task's worker is known only when it ends.

Each page streams only the rectangles added to the Feed since its cursor
(``source.stream(new, rollover=length)``), as numpy columns; the Feed has
already merged tiny neighbours and bursts, so the browser keeps the last
``length`` rectangles and the sum of what was merged into them.
"""

from __future__ import annotations

import time

import numpy as np
from bokeh.models import ColumnDataSource, DataRange1d, FixedTicker, HoverTool, Range1d
from bokeh.plotting import figure

from .component import PAGE_WIDTH, Component, lean, short_datetime_axis

__all__ = ["TaskStream"]

#: Running tasks drawn at most (the oldest first).
MAX_RUNNING = 64
#: Seconds between redraws of the running bars: at most every
#: RUNNING_REDRAW[0] while they change, and every RUNNING_REDRAW[1] (their
#: right ends grow) while the same tasks run.
RUNNING_REDRAW = (0.5, 1.0)
COLUMNS = ("left", "right", "bottom", "top", "color", "label", "group", "count", "duration")


def _empty() -> dict:
    return {k: [] for k in COLUMNS}


class TaskStream(Component):
    name = "task-stream"
    title = "Task Stream"
    period = 0.1

    def __init__(self, feed, context=None, length: int = 2000):
        super().__init__(feed, context)
        self.length = length
        self.cursor = 0
        self.run_number = None
        self.lanes_shown: tuple = (-1, -1)
        self._running_keys: list = []
        self._running_drawn = 0.0
        now = time.time() * 1000
        # A transparent seed row gives the auto ranges something to start from.
        seed = {"left": [now - 1000], "right": [now], "bottom": [-0.4], "top": [0.4],
                "color": ["rgba(0,0,0,0)"], "label": [""], "group": [""], "count": [0],
                "duration": [0.0]}
        self.source = ColumnDataSource(seed)
        self.running = ColumnDataSource(_empty())
        fig = figure(title="Task stream", width=PAGE_WIDTH, height=300,
                     x_axis_type="datetime", y_range=Range1d(-0.6, 1.6),
                     x_range=DataRange1d(range_padding=0.01), tools="xpan,xwheel_zoom,reset",
                     toolbar_location="above", name="task_stream_figure")
        fig.quad(left="left", right="right", bottom="bottom", top="top", color="color",
                 line_color="color", line_alpha=0.5, alpha=0.9, source=self.source,
                 name="task_stream")
        fig.quad(left="left", right="right", bottom="bottom", top="top", color="color",
                 alpha=0.35, line_color="black", line_dash="dashed", source=self.running,
                 name="task_stream_running")
        fig.add_tools(HoverTool(tooltips=[("task", "@label"), ("group", "@group"),
                                          ("tasks", "@count"), ("seconds", "@duration{0.000}")]))
        self.ticker = FixedTicker(ticks=[])
        fig.yaxis.ticker = self.ticker
        # (the y range is set here when lanes come: an automatic range would
        # have the browser send its new bounds after every update)
        short_datetime_axis(fig)
        self.root = lean(fig, grids="x")

    def _reset(self, run_number) -> None:
        """A new computation: start from its first rectangle."""
        self.run_number = run_number
        self.cursor = self.feed.run_rect_start
        self.source.data = _empty()

    def update(self) -> None:
        feed = self.feed
        feed.update()
        with feed.lock:
            run = feed.run
            if run is None:
                return
            if run.number != self.run_number:
                self._reset(run.number)
            rects, self.cursor = feed.rects_since(self.cursor)
            nlanes = len(feed.lanes)
            running = sorted(feed.running.items(), key=lambda kv: kv[1][0])[:MAX_RUNNING]
            colors = feed.colors
            now = feed.clock()
        if rects:
            self.source.stream(_columns(rects[-self.length:]), rollover=self.length)
        self._label_lanes(nlanes)
        # Running bars are redrawn when the running tasks change (at most
        # every half second), else once a second: each redraw is a message.
        shown = [k for k, _ in running]
        since = now - self._running_drawn
        if (shown and since >= RUNNING_REDRAW[1]) or (shown != self._running_keys and
                                                      since >= RUNNING_REDRAW[0]):
            self._running_keys, self._running_drawn = shown, now
            self.running.data = _running_columns(running, nlanes, colors, now)

    def _label_lanes(self, nlanes: int) -> None:
        """Lane labels and the y range, changed only when a worker comes
        (the "running" lane is always above the workers')."""
        if nlanes == self.lanes_shown[0]:
            return
        self.lanes_shown = (nlanes, 1)
        labels: dict = {i: f"worker {i}" for i in range(nlanes)}
        labels[nlanes] = "running"
        # (mutated, never replaced: a new model makes bokeh walk the document)
        self.ticker.ticks = list(range(nlanes + 1))
        self.root.yaxis[0].major_label_overrides = labels
        self.root.y_range.update(start=-0.6, end=nlanes + 0.6)


def _columns(rects: list) -> dict:
    """Every column a numpy array: bokeh sends numbers as binary buffers and
    an array of strings as one list, where a list of strings costs it a
    call per string."""
    n = len(rects)
    lanes, lefts, rights, group, label, count, color = zip(*rects, strict=True) if n else \
        ((),) * 7
    lane = np.fromiter(lanes, float, n)
    left = np.fromiter(lefts, float, n)
    right = np.fromiter(rights, float, n)
    return {"left": left * 1000, "right": right * 1000, "bottom": lane - 0.4,
            "top": lane + 0.4, "color": np.array(color, dtype=str),
            "label": np.array(label, dtype=str), "group": np.array(group, dtype=str),
            "count": np.fromiter(count, np.int64, n), "duration": right - left}


def _running_columns(running: list, nlanes: int, colors: dict, now: float) -> dict:
    """Running tasks stacked in the lanes above the workers' (thin bars)."""
    cols = _empty()
    n = len(running)
    for i, (key, (start, group)) in enumerate(running):
        y = nlanes + i / max(n, 1) * 0.8 - 0.4
        cols["left"].append(start * 1000)
        cols["right"].append(now * 1000)
        cols["bottom"].append(y)
        cols["top"].append(y + 0.8 / max(n, 1))
        cols["color"].append(colors.get(group, "#888"))
        cols["label"].append(f"{key} (running)")
        cols["group"].append(group)
        cols["count"].append(1)
        cols["duration"].append(now - start)
    return {k: np.array(v, dtype=str) if k in ("color", "label", "group") else np.asarray(v)
            for k, v in cols.items()}
