"""Where the worker-seconds went: one bar and one table that sum to 100%.

The fine metrics book every worker-second once (``accounting``): a task's
own activities, the hand-offs between tasks, start-up, travel and waiting
for work.  ``plot_accounting`` draws them as one horizontal bar of 100%,
``accounting_html`` as a table of seconds and shares, with the caller's
own costs (caller-seconds: the scheduler's CPU, pickling inputs) below it,
outside the 100%.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from bokeh.plotting import figure

from ..collectors.accounting import shares
from ..reporting.aggregate import activity_order
from .base import FIGURE_DEFAULTS, activity_colors, figure_options, point_hover

__all__ = ["plot_accounting", "accounting_html"]

_ROW = "worker-seconds"


def plot_accounting(metrics: Mapping, **figure_kwargs):
    """The worker-seconds by activity as one stacked bar of 100%.

    >>> fig = plot_accounting({((), 'x', 'thread-cpu', 'seconds'): 3.0,
    ...                        ((), None, 'idle', 'seconds'): 1.0})
    >>> [r.name for r in fig.renderers], fig.renderers[0].data_source.data['thread-cpu']
    (['thread-cpu', 'idle'], [75.0])
    """
    rows, _caller = shares(metrics)
    names = activity_order(a for a, _, _ in rows)
    share = {a: 100.0 * s for a, _, s in rows}
    seconds = {a: v for a, v, _ in rows}
    opts = figure_options(dict(FIGURE_DEFAULTS,
                               title="Where the worker-seconds went (% of wall time × workers)",
                               height=130, tools="hover,save"), figure_kwargs)
    fig = figure(y_range=[_ROW], x_range=(0, 100), x_axis_label="%", **opts)
    source = {"row": [_ROW], **{a: [share[a]] for a in names},
              **{f"{a} seconds": [seconds[a]] for a in names}}
    colors = activity_colors(names)
    renderers = []
    if names:
        renderers = fig.hbar_stack(names, y="row", height=0.6, source=source,
                                   color=[colors[a] for a in names], line_color="white")
        for r, a in zip(renderers, names, strict=True):
            r.name = a
    fig.ygrid.grid_line_color = None
    fig.yaxis.visible = False
    point_hover(fig, renderers, [("activity", "$name"), ("share", "@$name{0.0}%")])
    return fig


def accounting_html(metrics: Mapping) -> str:
    """The accounting as an HTML table: activity (with its colour in the
    bar), worker-seconds, share (summing to 100%), then the caller-seconds;
    '' without seconds.

    >>> page = accounting_html({((), 'x', 'thread-cpu', 'seconds'): 3.0,
    ...                         ((), None, 'idle', 'seconds'): 1.0,
    ...                         ((), None, 'scheduler', 'caller-seconds'): 0.5})
    >>> '75.0%' in page and '25.0%' in page and 'caller-seconds' in page
    True
    """
    rows, caller = shares(metrics)
    if not rows and not caller:
        return ""
    # (the bar's colours: each row carries its swatch, the table is the bar's legend)
    colors = activity_colors(activity_order(a for a, _, _ in rows))
    esc = html.escape
    cell = "padding:1px 10px 1px 0;white-space:nowrap"
    right = cell + ";text-align:right"
    out = ["<table style='border-collapse:collapse;font:12px sans-serif'>"
           f"<tr><th style='{cell};text-align:left'>activity</th>"
           f"<th style='{right}'>worker-seconds</th><th style='{right}'>share</th></tr>"]
    total = 0.0
    for activity, value, share in rows:
        total += value
        swatch = (f"<span style='display:inline-block;width:10px;height:10px;"
                  f"margin-right:5px;background:{colors[activity]}'></span>")
        out.append(f"<tr><td style='{cell}'>{swatch}{esc(str(activity))}</td>"
                   f"<td style='{right}'>{value:,.4f}</td>"
                   f"<td style='{right}'>{100 * share:.1f}%</td></tr>")
    out.append(f"<tr style='border-top:1px solid #999'><td style='{cell}'><b>total</b></td>"
               f"<td style='{right}'><b>{total:,.4f}</b></td>"
               f"<td style='{right}'><b>100%</b></td></tr>")
    for activity, value in caller:
        out.append(f"<tr style='color:#555'><td style='{cell}'>{esc(str(activity))} "
                   f"(caller)</td><td style='{right}'>{value:,.4f}</td>"
                   f"<td style='{right}'>caller-seconds</td></tr>")
    out.append("</table>")
    return "".join(out)
