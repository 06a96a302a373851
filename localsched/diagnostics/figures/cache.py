"""Cache: what each task group holds in the cache over time, one line per group.

A group's line is the sum of the cache metric over its results in the
cache (``aggregate.cache_steps``); lines with more steps than pixels keep
each pixel's maximum (``aggregate.step_max``).  The legend lists the groups
that held most, then "N other groups".  Results of unknown size (metric
NaN: it could not be measured) count as 0, and the title says how many.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from bokeh.models import NumeralTickFormatter, Range1d

from ..collectors.records import CacheData
from ..reporting.aggregate import (
    PIXELS,
    CacheTable,
    cache_steps,
    group_codes,
    origin,
    seconds_per_pixel,
    step_max,
)
from .base import (
    LABEL_SIZE,
    LEGEND_ITEMS,
    OTHER_COLORS,
    add_legend,
    empty_message,
    group_colors,
    height_fixed,
    new_figure,
    point_hover,
)

__all__ = ["plot_cache", "draw_cache"]


def plot_cache(results: Sequence[CacheData], metric_name: str = "tasks", x_range=None,
               t0: float | None = None, palette=None, label_size: int = LABEL_SIZE,
               **figure_kwargs):
    """What each task group holds in the cache over time: one line per group.

    A group's line is the sum of ``metric`` over its results in the cache: a
    step up at each ``cache_time``, down at each ``free_time`` (a result never
    freed counts until the last time in the records).  x is in seconds since
    ``t0`` (default: the earliest ``cache_time``; record times are epoch
    seconds); the y axis is labelled ``Cache Size (metric_name)``.  Lines with
    more steps than pixels keep each pixel's maximum.  ``palette`` and
    ``label_size`` as for ``plot_tasks``; other keyword arguments go to
    ``bokeh.plotting.figure``.

    >>> from localsched.diagnostics.collectors.records import CacheData
    >>> fig = plot_cache([CacheData(('x-abc123', 0), None, 1, 10.0, 12.0),
    ...                   CacheData(('x-abc123', 1), None, 1, 11.0, 13.0)])
    >>> [r.name for r in fig.renderers], fig.yaxis[0].axis_label
    (['x'], 'Cache Size (tasks)')
    >>> data = fig.renderers[0].data_source.data
    >>> list(zip(data['time'].tolist(), data['value'].tolist()))
    [(0.0, 0.0), (0.0, 1.0), (1.0, 2.0), (2.0, 1.0), (3.0, 0.0)]
    """
    table = CacheTable.of(results)
    return draw_cache(table, metric_name, x_range, t0, group_colors(table.groups, palette),
                       label_size, figure_kwargs)


def draw_cache(table: CacheTable, metric_name: str, x_range, t0, colors, label_size: int,
               figure_kwargs: dict):
    """The cache figure of a ``CacheTable``."""
    t0 = origin(table, t0)
    fig = new_figure("Cache", f"Cache Size ({metric_name})", x_range, figure_kwargs)
    lines = []
    extent = table.bounds()
    if extent is not None:
        end_time = float(extent[1])
        freed = np.where(np.isnan(table.freed), end_time, table.freed)
        unknown = np.isnan(table.metric)  # (sizes that could not be measured)
        metric = np.where(unknown, 0.0, table.metric)
        if unknown.any():
            n = int(unknown.sum())
            fig.title.text = (f"{fig.title.text} -- {n} result{'s' if n > 1 else ''} of "
                              "unknown size (counted as 0)")
        names = sorted(set(table.groups))
        codes = group_codes(table.groups, names)
        order = np.argsort(codes, kind="stable")
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        px = seconds_per_pixel(x_range, end_time - t0)
        for members in np.split(order, bounds):
            name = names[codes[members[0]]]
            time, value = cache_steps(table.cached[members] - t0, freed[members] - t0,
                                     metric[members])
            if len(time) > 2 * PIXELS and px > 0:
                time, value = step_max(time, value, px)
            line = fig.step("time", "value", source={"time": time, "value": value}, mode="after",
                            color=colors[name], line_width=2, name=name)
            lines.append(line)
    if "y_range" not in figure_kwargs:
        fig.y_range.start = 0
    value = "@value"
    if metric_name == "bytes":  # 12.3MB, not 1.23e+7
        fig.yaxis.formatter = NumeralTickFormatter(format="0.0 b")
        value = "@value{0.0 b}"
    point_hover(fig, lines, [("group", "$name"), ("time", "@time{0.000} s"), (metric_name, value)])
    # The largest groups first: the legend may not have room for all.
    lines.sort(key=lambda line: -float(np.max(line.data_source.data["value"])))
    # Groups drawn in a colour of their own, the largest first; the grey
    # ones (not among the task stream's top groups) share one entry.
    own = [line for line in lines if line.glyph.line_color not in OTHER_COLORS]
    items = [(line.name, line, None) for line in own[:LEGEND_ITEMS]]
    rest = len(lines) - len(items)
    if rest > 0:  # one entry for the rest, on an invisible line of their colour
        key = fig.step(x=[np.nan], y=[np.nan], color=OTHER_COLORS[0], line_width=2,
                       name="legend")
        items.append((f"{rest} other group{'s' if rest > 1 else ''}", key, None))
    add_legend(fig, items, label_size, click_hide=True, grow=not height_fixed(figure_kwargs))
    if not lines:
        empty_message(fig, "Nothing was cached", x_range, 0.5)
        if "y_range" not in figure_kwargs:
            fig.y_range = Range1d(0, 1)
    return fig

