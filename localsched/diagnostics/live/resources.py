"""CPU percent and memory of this process and its worker processes, over time."""

from __future__ import annotations

import numpy as np
from bokeh.layouts import row
from bokeh.models import ColumnDataSource, DataRange1d
from bokeh.plotting import figure

from .component import PAGE_WIDTH, Component, inline, lean, short_datetime_axis

__all__ = ["Resources"]

#: Seconds between samples while no computation runs.
IDLE_PERIOD = 5.0


class Resources(Component):
    name = "resources"
    title = "Resources"
    #: (sampled every 0.5 s; drawn once a second, two samples a message)
    period = 1.0

    def __init__(self, feed, context=None, length: int = 2000):
        super().__init__(feed, context)
        self.length = length
        self._drawn = -1e9
        feed.sample_resources()
        rows, self.cursor = feed.resources_since(0)
        self.source = ColumnDataSource(_columns(rows[-length:]))
        x = DataRange1d(follow="end", follow_interval=120_000, range_padding=0)
        cpu = figure(title="CPU % (process and workers)", width=PAGE_WIDTH // 2, height=200,
                     x_axis_type="datetime", x_range=x, tools="", toolbar_location=None,
                     name="cpu")
        cpu.line("time", "cpu", source=self.source, color="#1f77b4", line_width=2)
        mem = figure(title="Memory MB (process and workers)", width=PAGE_WIDTH // 2,
                     height=200, x_axis_type="datetime", x_range=x, tools="",
                     toolbar_location=None, name="memory")
        mem.line("time", "memory", source=self.source, color="#2ca02c", line_width=2)
        for f in (cpu, mem):
            f.y_range = DataRange1d(start=0)
            lean(f)
        # One datetime ticker and formatter for both (each is a dozen models).
        short_datetime_axis(cpu)
        mem.xaxis[0].ticker = cpu.xaxis[0].ticker
        mem.xaxis[0].formatter = cpu.xaxis[0].formatter
        mem.xgrid[0].ticker = cpu.xaxis[0].ticker
        self.root = row(cpu, mem)

    def update(self) -> None:
        feed = self.feed
        now = feed.clock()
        # Between computations, every IDLE_PERIOD: each redraw is a message,
        # and the browser answers it with the new bounds of three ranges.
        if not feed.active(within=IDLE_PERIOD) and now - self._drawn < IDLE_PERIOD:
            return
        self._drawn = now
        feed.sample_resources()
        rows, self.cursor = feed.resources_since(self.cursor)
        if rows:
            self.source.stream(_columns(rows), rollover=self.length)


def _columns(rows: list) -> dict:
    if not rows:
        return {"time": inline(()), "cpu": inline(()), "memory": inline(())}
    arr = np.asarray(rows, dtype=float)
    return {"time": inline(arr[:, 0] * 1000), "cpu": inline(arr[:, 1]),
            "memory": inline(arr[:, 2] / 1e6)}
