"""Memory: the bytes of results held over time, stacked by task group, the
peak marked (``analysis.memory``: sizes measured in the workers, lifetimes
from the keys each task's end released), a memory budget's limit,
thresholds and spilled bytes over it (``figures.budget``), and the critical
path outlined on the task stream (``mark_critical_path``)."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, Label, NumeralTickFormatter, Span

from ..analysis.memory import held_over_time
from .base import LABEL_SIZE, OTHER_COLORS, add_legend, new_figure, point_hover
from .budget import budget_figure, draw_budget

__all__ = ["plot_held", "mark_critical_path"]


def plot_held(run, peak, x_range, t0: float, colors: dict, label_size: int = LABEL_SIZE):
    """The stacked area of bytes held by group (None when sizes were not
    measured and no budget was set), with a dashed line and a label at
    ``peak`` (a ``MemoryPeak``), and the run's memory budgets."""
    series = held_over_time(run)
    budgets = getattr(run, "budgets", None) or []
    if series is None:
        return budget_figure(budgets, x_range, t0, label_size) if budgets else None
    times, by_group = series
    names = list(by_group)
    data = {"x": np.asarray(times, dtype=float) - t0}
    fields = []
    for i, g in enumerate(names):
        field = f"g{i}"
        data[field] = np.asarray(by_group[g], dtype=float)
        fields.append(field)
    title = ("Memory held by task group within the memory budget (bytes of results in "
             "memory, measured in the workers; dash-dot: bytes spilled to disk)" if budgets
             else "Memory held by task group (bytes of results, measured in the workers)")
    fig = new_figure(title, "Bytes held", x_range, {"height": 220})
    fig.yaxis.formatter = NumeralTickFormatter(format="0.0 b")
    source = ColumnDataSource(data)
    fill = [colors.get(g, OTHER_COLORS[i % len(OTHER_COLORS)]) for i, g in enumerate(names)]
    areas = fig.varea_stack(stackers=fields, x="x", color=fill, source=source,
                            fill_alpha=0.8, name="held")
    items = [(g, r, None) for g, r in zip(names, areas, strict=True)]
    items += draw_budget(fig, budgets, t0)
    add_legend(fig, items, label_size)
    top = fig.line(x="x", y="total", source=ColumnDataSource(
        {"x": data["x"], "total": np.sum([data[f] for f in fields], axis=0)}),
                   line_color="#333333", line_width=1, name="held-total")
    point_hover(fig, [top], [("time", "@x{0.000} s"), ("held", "@total{0.0 b}")],
                mode="vline")
    if peak is not None:
        x = peak.time - t0
        fig.add_layout(Span(location=x, dimension="height", line_color="#b2182b",
                            line_dash="dashed", line_width=2))
        fig.add_layout(Label(x=x, y=peak.bytes, x_offset=4, text_font_size="9pt",
                             text_color="#b2182b", name="peak",
                             text=f"peak {peak.bytes / 1e6:,.1f} MB"))
    return fig


def mark_critical_path(fig, run, keys: list, t0: float, rows: dict) -> None:
    """Outline the critical path's tasks on the task stream ``fig`` (drawn
    from ``run``'s records; ``rows``: worker id -> row, as the stream has them)."""
    if not keys:
        return
    wanted = set(keys)
    chosen = [r for r in run.tasks if r.key in wanted]
    if not chosen:
        return
    chosen = [r for r in chosen if r.worker_id in rows]
    fig.hbar(y=[rows[r.worker_id] for r in chosen],
             left=[r.start_time - t0 for r in chosen], right=[r.end_time - t0 for r in chosen],
             height=0.9, fill_alpha=0.0, line_color="black", line_width=2,
             name="critical-path")
