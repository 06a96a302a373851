"""The task stream: one lane per worker, a rectangle per task coloured by its
group; tasks still running drawn in lanes of their own ("running") from their
start to now, since a task's worker is known only when it ends.

Each page streams only the rectangles added to the Feed since its cursor
(``source.stream(new, rollover=length)``); the Feed has already merged tiny
neighbours and bursts, so the browser keeps the last ``length`` rectangles
and the sum of what was merged into them.

What one update sends is kept small, since a page refreshes ten times a
second: the new rows only, in as few columns as the glyph needs (an
``hbar``: left, right, lane; the task count; the strings for colour and
hover), numbers inline in the message (``component.inline``: no binary
buffers, one message of three websocket frames).  The x range is the
server's, widened by half when the stream reaches its end: an automatic
range would have the browser send its new bounds back after every update.
Times are seconds since the computation started (its ``RunLog.started``):
ticks read 0, 0.5, 1 ... rather than clock times in milliseconds.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from bokeh.models import CategoricalColorMapper, ColumnDataSource, FixedTicker, HoverTool, Range1d
from bokeh.plotting import figure

from ..reporting.naming import printable
from .component import PAGE_WIDTH, Component, inline, lean
from .feed import FAILED_COLOR

__all__ = ["TaskStream", "COLUMNS"]

#: Running tasks drawn at most (the oldest first).
MAX_RUNNING = 64
#: Seconds between redraws of the running bars: at most every
#: RUNNING_REDRAW[0] while they change, and every RUNNING_REDRAW[1] (their
#: right ends grow) while the same tasks run.
RUNNING_REDRAW = (0.5, 1.0)
#: The columns a page receives per rectangle (``y``: the lane).
COLUMNS = ("left", "right", "y", "count", "group", "label")
CLEAR = "rgba(0,0,0,0)"
#: Lane thickness.
HEIGHT = 0.8
#: A finished run's x range: its span and this share of it on each side.
FIT_PAD = 0.02
#: The x range grows by this factor of what it shows when the stream reaches its end.
GROWTH = 1.5


def _empty(running: bool = False) -> dict:
    cols = {k: inline(()) for k in ("left", "right", "y")}
    cols["count"] = inline((), np.int32)
    cols.update({k: np.zeros(0, dtype=str) for k in ("group", "label")})
    if running:
        cols["height"] = inline(())
    return cols


class TaskStream(Component):
    name = "task-stream"
    title = "Task Stream"
    period = 0.1

    def __init__(self, feed, context=None, length: int = 2000):
        super().__init__(feed, context)
        self.length = length
        self.cursor = 0
        self.run_number = None
        #: Epoch seconds of the shown run's start: x is seconds since then.
        self.origin = 0.0
        self._fitted: int | None = None  # the run whose x range was fitted to its end
        self.lanes_shown: tuple = (-1, -1)
        self._running_seen: dict = {}  # the feed's running tasks drawn last
        self._running_drawn = 0.0
        #: (smallest left, rows) of each stream the browser may still hold
        self._streamed: deque = deque()
        # A transparent seed row gives the page something to draw at once.
        seed = _empty()
        seed.update(left=inline([0.0]), right=inline([1.0]), y=inline([0.0]),
                    count=inline([0], np.int32),
                    group=np.array([""]), label=np.array([""]))
        self.source = ColumnDataSource(seed)
        self.running = ColumnDataSource(_empty(running=True))
        self.x_range = Range1d(0.0, 2.0)
        fig = figure(title="Task stream", width=PAGE_WIDTH, height=300,
                     x_axis_label="seconds since the computation started",
                     y_range=Range1d(-0.6, 1.6), x_range=self.x_range,
                     tools="xpan,xwheel_zoom,reset", toolbar_location="above",
                     name="task_stream_figure")
        # Colours by group in the browser: the rows carry no colour strings.
        self.colors = CategoricalColorMapper(factors=[""], palette=[CLEAR],
                                             nan_color=FAILED_COLOR)
        color = {"field": "group", "transform": self.colors}
        fig.hbar(y="y", left="left", right="right", height=HEIGHT, color=color,
                 line_color=color, line_alpha=0.5, alpha=0.9, source=self.source,
                 name="task_stream")
        fig.hbar(y="y", left="left", right="right", height="height", color=color,
                 alpha=0.35, line_color="black", line_dash="dashed", source=self.running,
                 name="task_stream_running")
        fig.add_tools(HoverTool(tooltips=[("task", "@label"), ("group", "@group"),
                                          ("tasks", "@count")]))
        self.ticker = FixedTicker(ticks=[])
        fig.yaxis.ticker = self.ticker
        # (the y range is set here when lanes come: an automatic range would
        # have the browser send its new bounds after every update)
        self.root = lean(fig, grids="x")

    def _reset(self, run) -> None:
        """A new computation: start from its first rectangle."""
        self.run_number = run.number
        self.origin = run.started
        self.cursor = self.feed.run_rect_start
        self.source.data = _empty()
        self._streamed.clear()
        self.x_range.update(start=0.0, end=2.0)

    def update(self) -> None:
        feed = self.feed
        feed.update()
        with feed.lock:
            run = feed.run
            if run is None:
                return
            if run.number != self.run_number:
                self._reset(run)
            rects, self.cursor = feed.rects_since(self.cursor)
            nlanes = len(feed.lanes)
            running = feed.running  # (replaced by the feed, never changed in place)
            colors = feed.colors
            now = feed.clock()
            ended = run.finished if run.number != self._fitted and feed.settled() else None
        right = -np.inf
        if rects:
            cols = _columns(rects[-self.length:], self.origin)
            self.source.stream(cols, rollover=self.length)
            self._kept(float(cols["left"].min()), len(cols["left"]))
            right = float(cols["right"].max())
        self._label_lanes(nlanes)
        if len(colors) + 1 != len(self.colors.factors):  # (a new group: rare)
            self.colors.update(factors=["", *colors], palette=[CLEAR, *colors.values()])
        # Running bars are redrawn when the running tasks change (at most
        # every half second), else once a second: each redraw is a message.
        since = now - self._running_drawn
        if (running and since >= RUNNING_REDRAW[1]) or (running is not self._running_seen and
                                                        since >= RUNNING_REDRAW[0]):
            shown = sorted(running.items(), key=lambda kv: kv[1][0])[:MAX_RUNNING]
            if shown or self._running_seen:
                self.running.data = _running_columns(shown, nlanes, now, self.origin)
            self._running_seen, self._running_drawn = running, now
            if shown:
                right = max(right, now - self.origin)
        if ended is not None:  # every task of a finished run is drawn: fit it
            self._fitted = run.number
            self._fit(0.0, max(right, ended - self.origin))
        else:
            self._widen(right)

    def _fit(self, start: float, end: float) -> None:
        """The x range around a finished run (its rectangles the browser
        still holds), in one message: a short run no longer sits at the
        left of the range it opened with."""
        oldest = self._streamed[0][0] if self._streamed else start
        start = max(start, oldest) if oldest < end else start
        pad = max((end - start) * FIT_PAD, 0.001)
        self.x_range.update(start=start - pad, end=end + pad)

    def _kept(self, left: float, rows: int) -> None:
        """Note a stream; forget the ones the browser's rollover dropped."""
        streamed = self._streamed
        streamed.append((left, rows))
        total = sum(n for _, n in streamed)
        while total - streamed[0][1] >= self.length:
            total -= streamed.popleft()[1]

    def _widen(self, right: float) -> None:
        """Widen the x range when the stream reaches its end (a message
        every time the run's length grows by half, not every update)."""
        x = self.x_range
        if right <= x.end:
            return
        start = x.start
        oldest = self._streamed[0][0] if self._streamed else start
        if oldest > start + (right - start) / 2:  # (the browser dropped the older half)
            x.start = start = oldest
        x.end = start + (right - start) * GROWTH  # (one event: start rarely moves)

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


def _columns(rects: list, origin: float) -> dict:
    """The rows of ``rects`` as columns: numbers as numpy arrays (binary
    buffers), strings as numpy string arrays (one JSON list each; a Python
    list of strings would cost bokeh a call per string).  A rectangle's
    seconds go into its hover label rather than a column of their own."""
    n = len(rects)
    lanes, lefts, rights, groups, label, count, color = zip(*rects, strict=True) if n else \
        ((),) * 7
    left = np.fromiter(lefts, float, n)
    right = np.fromiter(rights, float, n)
    seconds = (right - left).tolist()
    return {"left": inline(left - origin), "right": inline(right - origin),
            "y": inline(np.fromiter(lanes, float, n)),
            "count": inline(np.fromiter(count, np.int32, n), np.int32),
            # (a failed task's group is no colour's: drawn in the mapper's nan_color)
            "group": np.array([g if c != FAILED_COLOR else f"{g} (failed)"
                               for g, c in zip(groups, color, strict=True)], dtype=str),
            "label": np.array([f"{t}, {s:.3g} s" for t, s in zip(label, seconds, strict=True)],
                              dtype=str)}


def _running_columns(running: list, nlanes: int, now: float, origin: float) -> dict:
    """Running tasks stacked in the lanes above the workers' (thin bars)."""
    n = len(running)
    if not n:
        return _empty(running=True)
    step = HEIGHT / n
    starts = np.fromiter((start for _, (start, _g) in running), float, n)
    groups = [g for _, (_s, g) in running]
    return {"left": inline(starts - origin), "right": inline(np.full(n, now - origin)),
            "y": inline(nlanes - HEIGHT / 2 + step * (np.arange(n) + 0.5)),
            "height": inline(np.full(n, step)), "count": inline(np.ones(n), np.int32),
            "group": np.array(groups, dtype=str),
            "label": np.array([printable(f"{key} (running)") for key, _ in running], dtype=str)}
