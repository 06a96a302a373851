"""Resources: CPU percent (left axis) and memory in MB (right axis) over time.

Lines with more samples than pixels keep each pixel's maximum.

>>> from localsched.diagnostics.collectors.records import ResourceData
>>> fig = plot_resources([ResourceData(50.0, 120.0, 80.0), ResourceData(51.0, 150.0, 195.0)])
>>> fig.select_one({'name': 'memory'}).y_range_name, fig.extra_y_ranges['memory'].end
('memory', 165.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from bokeh.models import LinearAxis, Range1d
from bokeh.palettes import Category10

from ..collectors.records import ResourceData
from ..reporting.aggregate import PIXELS, ResourceTable, origin, seconds_per_pixel
from .base import LABEL_SIZE, add_legend, empty_message, height_fixed, new_figure, point_hover

__all__ = ["plot_resources", "draw_resources"]


def plot_resources(results: Sequence[ResourceData], x_range=None, t0: float | None = None,
                   **figure_kwargs):
    """CPU percent (left axis) and memory in MB (right axis) over time.

    x is in seconds since ``t0`` (default: the first sample; record times are
    epoch seconds).  A CPU value of 100 is one core fully busy.  Lines with
    more samples than pixels keep each pixel's maximum.  Other keyword
    arguments go to ``bokeh.plotting.figure``.

    >>> from localsched.diagnostics.collectors.records import ResourceData
    >>> fig = plot_resources([ResourceData(50.0, 120.0, 80.0),
    ...                       ResourceData(51.0, 150.0, 195.0)])
    >>> fig.select_one({'name': 'memory'}).y_range_name, fig.extra_y_ranges['memory'].end
    ('memory', 165.0)
    """
    figure_kwargs.pop("label_size", None)
    return draw_resources(ResourceTable.of(results), x_range, t0, LABEL_SIZE, figure_kwargs)


def draw_resources(table: ResourceTable, x_range, t0, label_size: int, figure_kwargs: dict):
    """The resources figure of a ``ResourceTable``."""
    t0 = origin(table, t0)
    order = np.argsort(table.time, kind="stable")
    time, cpu, mem = table.time[order] - t0, table.cpu[order], table.mem[order]
    px = seconds_per_pixel(x_range, float(time[-1]) if len(time) else 0.0)
    if len(time) > 2 * PIXELS and px > 0:
        column = np.floor(time / px).astype(np.int64)
        firsts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
        time, cpu, mem = time[firsts], np.fmax.reduceat(cpu, firsts), np.fmax.reduceat(mem, firsts)

    if x_range is None and "x_range" not in figure_kwargs:
        x_range = Range1d(0.0, float(time[-1]) if len(time) and time[-1] > 0 else 1.0)
    fig = new_figure("Resources", "CPU (%)", x_range, figure_kwargs)
    peak_cpu = float(np.nanmax(cpu)) if len(cpu) else 0.0
    peak_mem = float(np.nanmax(mem)) if len(mem) else 0.0
    if "y_range" not in figure_kwargs:
        fig.y_range = Range1d(0, max(100.0, peak_cpu * 1.05))
    fig.extra_y_ranges = {"memory": Range1d(0, peak_mem * 1.1 if peak_mem > 0 else 100.0)}
    fig.add_layout(LinearAxis(y_range_name="memory", axis_label="Memory (MB)"), "right")
    source = {"time": time, "cpu": cpu, "mem": mem}
    cpu_line = fig.line("time", "cpu", source=source, color=Category10[10][0], line_width=2,
                        name="cpu")
    mem_line = fig.line("time", "mem", source=source, color=Category10[10][1], line_width=2,
                        y_range_name="memory", name="memory")
    point_hover(fig, [cpu_line],
           [("time", "@time{0.000} s"), ("CPU", "@cpu{0.0} %"), ("memory", "@mem{0.0} MB")],
           mode="vline")
    add_legend(fig, [("CPU", cpu_line, None), ("Memory", mem_line, None)], label_size,
               grow=not height_fixed(figure_kwargs),
            click_hide=True)
    if not len(time):
        empty_message(fig, "No resource samples", x_range, 50.0)
    return fig

