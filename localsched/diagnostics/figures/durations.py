"""Task durations: one histogram per task group, in a grid.

Every panel has the same kind of axis -- durations on a log scale, binned
geometrically (``aggregate.duration_bins``), ticks few enough not to
overlap and written as ``420 µs``, ``12 ms``, ``1.5 s`` -- so panels compare
at a glance.  The ``HISTOGRAM_GROUPS`` groups with most time are shown;
``durations_note`` says so when there are more.

>>> from localsched.diagnostics.collectors.records import TaskData
>>> grid = plot_durations([TaskData(('a-1a2b3c4d', i), None, 0.0, 0.1 * (i + 1), 0)
...                        for i in range(5)])
>>> fig = grid.children[0][0]
>>> fig.title.text, int(sum(fig.select_one({'name': 'histogram'}).data_source.data['count']))
('a: 5 tasks', 5)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from bokeh.layouts import gridplot
from bokeh.models import CustomJSTickFormatter, Div, FixedTicker
from bokeh.plotting import figure

from ..collectors.records import TaskData
from ..reporting.aggregate import TaskTable, duration_bins
from ..reporting.naming import format_seconds, shorten
from .base import LABEL_SIZE, group_colors, point_hover

__all__ = ["plot_durations", "durations_note", "duration_ticks", "HISTOGRAM_GROUPS"]

#: At most this many groups get a histogram (the ones with most time).
HISTOGRAM_GROUPS = 12

# Seconds as the summary writes them (naming.format_seconds), in the browser.
_SECONDS_JS = """
    if (tick >= 1) return parseFloat(tick.toPrecision(3)) + ' s';
    if (tick >= 1e-3) return parseFloat((tick * 1e3).toPrecision(3)) + ' ms';
    return parseFloat((tick * 1e6).toPrecision(3)) + ' \\u00b5s';
"""


def duration_ticks(lo: float, hi: float, most: int = 4) -> list:
    """At most ``most`` round durations between ``lo`` and ``hi`` for a log
    axis: powers of ten when two or more fit, else 1-2-5 steps.

    >>> duration_ticks(2e-6, 0.3)
    [1e-05, 0.001, 0.1]
    >>> duration_ticks(0.004, 0.016)
    [0.005, 0.01]
    >>> duration_ticks(0.1009, 0.1013)
    [0.101]
    """
    import math

    def within(mantissas):
        out = []
        for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
            out += [m * 10.0 ** k for m in mantissas if lo <= m * 10.0 ** k <= hi]
        return [float(f"{t:.3g}") for t in out]

    ticks = within((1,))
    if len(ticks) < 2:
        ticks = within((1, 2, 5))
    if not ticks:  # a narrow range (tasks of nearly one length): its middle
        return [float(f"{math.sqrt(lo * hi):.3g}")]
    step = -(-len(ticks) // most)
    return ticks[::step]


def durations_note(n_groups: int) -> str:
    """What the histograms show, for the heading above them.

    >>> durations_note(3)
    'One histogram per task group.'
    >>> durations_note(30)
    'One histogram per task group, for the 12 groups with most time of 30.'
    """
    if n_groups <= HISTOGRAM_GROUPS:
        return "One histogram per task group."
    return (f"One histogram per task group, for the {HISTOGRAM_GROUPS} groups with most "
            f"time of {n_groups}.")


def plot_durations(results: Sequence[TaskData], bins: int = 30, palette=None,
                   label_size: int = LABEL_SIZE, ncols: int = 3):
    """One histogram of task durations per task group (the ``HISTOGRAM_GROUPS``
    groups with most time), in a grid; see the module docstring."""
    table = TaskTable.of(results)
    ranking = list(table.group_seconds())
    colors = group_colors(table.groups, palette, ranking=ranking)
    per: dict = {}
    for group, d in zip(table.groups, (table.end - table.start).tolist(), strict=True):
        per.setdefault(group, []).append(d)
    figures = []
    for group in ranking[:HISTOGRAM_GROUPS]:
        values = np.asarray(per[group])
        counts, edges = duration_bins(values, bins)
        fig = figure(title=f"{shorten(group, label_size)}: {len(values):,} tasks", width=330,
                     height=220, tools="hover,save,reset", toolbar_location=None,
                     x_axis_type="log", x_axis_label="duration", y_axis_label="tasks")
        fig.xaxis.ticker = FixedTicker(ticks=duration_ticks(edges[0], edges[-1]))
        fig.xaxis.formatter = CustomJSTickFormatter(code=_SECONDS_JS)
        fig.yaxis.ticker.desired_num_ticks = 4
        fig.yaxis.ticker.min_interval = 1  # whole tasks
        fig.y_range.start = 0
        source = {"left": edges[:-1], "right": edges[1:], "count": counts,
                  "group": [group] * len(counts),
                  "range": [f"{format_seconds(a)} .. {format_seconds(b)}"
                            for a, b in zip(edges[:-1].tolist(), edges[1:].tolist(),
                                            strict=True)]}
        fig.quad(left="left", right="right", bottom=0, top="count", source=source,
                 fill_color=colors[group], line_color="white", name="histogram")
        point_hover(fig, fig.renderers, [("group", "@group"), ("duration", "@range"),
                                         ("tasks", "@count")])
        figures.append(fig)
    if not figures:
        return Div(text="<p>No task finished.</p>")
    return gridplot(figures, ncols=ncols, toolbar_location=None)
