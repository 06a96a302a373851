"""Fine metrics: where each task group's time went, as stacked bars.

One horizontal bar per task group (``aggregate.metric_table``: spans
summed, the ``METRIC_GROUPS`` largest, the rest as one bar), its activities
piled up and coloured as in the task stream.  Long group names are
shortened on the axis; the hover shows them in full.  ``metrics_html``
lists the metrics in other units (bytes, counts, user units).
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from bokeh.plotting import figure

from ..reporting.aggregate import NO_GROUP, metric_table
from ..reporting.naming import shorten
from .base import (
    FIGURE_DEFAULTS,
    LABEL_SIZE,
    activity_colors,
    add_legend,
    figure_options,
    height_fixed,
    point_hover,
)

__all__ = ["plot_metrics", "metrics_html"]


def _axis_labels(groups: list, label_size: int) -> list:
    """Shortened group names, unique (a number added where two cut alike)."""
    out, seen = [], set()
    for g in groups:
        label = base = shorten(g, label_size)
        n = 1
        while label in seen:
            n += 1
            label = f"{base} ({n})"
        seen.add(label)
        out.append(label)
    return out


def plot_metrics(metrics: Mapping, label_size: int = LABEL_SIZE, **figure_kwargs):
    """The fine metrics' seconds as stacked horizontal bars, one per task group.

    ``metrics`` is the mapping ``(span, group, activity, unit) -> value``
    (``FineMetrics.metrics``); spans are summed, only ``seconds`` are drawn
    (``metrics_html`` lists the other units).  Each bar piles up the group's
    activities (``thread-cpu``, ``thread-noncpu``, ``serialize``,
    ``transfer``, ``idle``, user labels ...), coloured as in the task
    stream; the worker-seconds that belong to no task (``idle``,
    ``hand-off``, ``start-up``) are the ``NO_GROUP`` bar, last and not
    ranked among the groups (workers idle between or outside tasks); the caller's
    ``caller-seconds`` are not drawn here (``accounting_html`` lists them).
    Groups are sorted by total, most first, and past
    ``METRIC_GROUPS`` summed into one bar.

    >>> fig = plot_metrics({((), 'load', 'thread-cpu', 'seconds'): 2.0,
    ...                     (('s',), 'load', 'thread-noncpu', 'seconds'): 1.0,
    ...                     ((), None, 'idle', 'seconds'): 0.5})
    >>> list(fig.y_range.factors), [r.name for r in fig.renderers]
    (['(workers idle, outside tasks)', 'load'], ['thread-cpu', 'thread-noncpu', 'idle'])
    >>> fig.renderers[0].data_source.data['thread-cpu']
    [2.0, 0.0]
    """
    groups, activities, columns = metric_table(metrics)
    opts = figure_options(dict(FIGURE_DEFAULTS,
                               title="Where the time went (fine metrics, seconds)",
                               height=max(160, 70 + 26 * len(groups)),
                               tools="hover,save,reset"), figure_kwargs)
    labels = _axis_labels(groups, label_size)
    fig = figure(y_range=list(reversed(labels)) or ["(none)"], x_axis_label="seconds", **opts)
    source = {"label": labels, "group": groups, **columns}
    source["total"] = [sum(col[i] for col in columns.values()) for i in range(len(groups))]
    colors = activity_colors(activities)
    renderers = []
    if activities:
        renderers = fig.hbar_stack(activities, y="label", height=0.7, source=source,
                                   color=[colors[a] for a in activities], line_color=None)
        for r, a in zip(renderers, activities, strict=False):
            r.name = a
    fig.x_range.start = 0
    fig.ygrid.grid_line_color = None
    point_hover(fig, renderers, [("group", "@group"), ("activity", "$name"),
                            ("seconds", "@$name{0.000}"), ("group total", "@total{0.000}")])
    add_legend(fig, [(a, r, None) for a, r in zip(activities, renderers, strict=True)],
               label_size, grow=not height_fixed(figure_kwargs),
            click_hide=True)
    if not activities:
        fig.text(x=[0.5], y=["(none)"], text=["No fine metrics were recorded"],
                 text_align="center", text_baseline="middle", text_color="#666666",
                 name="message")
        fig.x_range.end = 1
    return fig


def metrics_html(metrics: Mapping) -> str:
    """The fine metrics in units other than seconds (bytes, counts, user
    units) as a small HTML table; '' when there are none.

    >>> 'bytes' in metrics_html({((), 'x', 'serialize', 'bytes'): 1024.0})
    True
    """
    rows: dict = {}
    for (_span, group, activity, unit), value in metrics.items():
        if unit == "seconds":
            continue
        # (the caller's seconds -- the scheduler's own -- are no worker's idle time)
        outside = NO_GROUP if unit == "seconds" else "(outside tasks)"
        k = (outside if group is None else str(group), activity, unit)
        rows[k] = rows.get(k, 0.0) + float(value)
    if not rows:
        return ""
    esc = html.escape
    cell = "padding:1px 10px 1px 0;white-space:nowrap"
    out = ["<table style='border-collapse:collapse;font:12px sans-serif'>"
           f"<tr><th style='{cell};text-align:left'>task group</th>"
           f"<th style='{cell};text-align:left'>activity</th>"
           f"<th style='{cell};text-align:right'>total</th>"
           f"<th style='{cell};text-align:left'>unit</th></tr>"]
    for (group, activity, unit), value in sorted(rows.items(), key=lambda kv: -kv[1])[:50]:
        out.append(f"<tr><td style='{cell}'>{esc(group)}</td><td style='{cell}'>"
                   f"{esc(activity)}</td><td style='{cell};text-align:right'>{value:,.6g}"
                   f"</td><td style='{cell}'>{esc(unit)}</td></tr>")
    out.append("</table>")
    return "".join(out)

