"""The memory budget on the report's memory panel: the limit, the pause and
target thresholds, as drawn segments over each budgeted computation's time,
the bytes spilled to disk over time, and, where result sizes were not
measured, the bytes held as the budget counted them.

Reads ``RunData.budgets`` (one ``BudgetRecord`` per computation run with
``memory_limit=``); draws nothing without one.
"""

from __future__ import annotations

from bokeh.models import ColumnDataSource, Label

from .base import LABEL_SIZE, add_legend, new_figure, point_hover

__all__ = ["draw_budget", "budget_figure", "THRESHOLDS"]

#: (field, renderer name, legend label, color, dash) of each threshold.
THRESHOLDS = (
    ("limit", "budget-limit", "memory_limit", "#b2182b", "solid"),
    ("pause", "budget-pause", "pause: new work waits", "#ef8a62", "dashed"),
    ("target", "budget-target", "target: spilling starts", "#666666", "dotted"),
)
SPILLED_COLOR = "#000000"


def _steps(points: list, t0: float) -> tuple[list, list]:
    """A step line's x and y through ``(time, value)`` points, each value
    kept until the next time."""
    xs: list = []
    ys: list = []
    for i, (t, v) in enumerate(points):
        x = t - t0
        if i:
            xs.append(x)
            ys.append(ys[-1])
        xs.append(x)
        ys.append(v)
    return xs, ys


def draw_budget(fig, budgets: list, t0: float, held_line: bool = False) -> list:
    """Add the budgets' thresholds and spilled bytes (and, with
    ``held_line``, the held bytes they counted) to ``fig``; the legend
    items ``(label, renderer, None)`` added."""
    budgets = [b for b in budgets if b.timeline]
    if not budgets:
        return []
    items = []
    for field, name, label, color, dash in THRESHOLDS:
        data: dict = {"x0": [], "x1": [], "y0": [], "y1": []}
        for b in budgets:
            y = float(getattr(b, field))
            data["x0"].append(b.timeline[0][0] - t0)
            data["x1"].append(b.timeline[-1][0] - t0)
            data["y0"].append(y)
            data["y1"].append(y)
        r = fig.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=ColumnDataSource(data),
                        line_color=color, line_dash=dash, line_width=2, name=name)
        items.append((label, r, None))
    first = budgets[0]
    fig.add_layout(Label(x=first.timeline[0][0] - t0, y=float(first.limit), x_offset=4,
                         y_offset=-16,
                         text_font_size="9pt", text_color=THRESHOLDS[0][3],
                         name="budget-label",
                         text=f"memory_limit {first.limit / 1e6:,.1f} MB"))
    spilled = _series(budgets, 2, t0)
    r = fig.line(x="x", y="y", source=ColumnDataSource(spilled), line_color=SPILLED_COLOR,
                 line_width=2.5, line_dash="dashdot", name="spilled")
    items.append(("spilled to disk", r, None))
    if held_line:
        held = _series(budgets, 1, t0)
        r = fig.line(x="x", y="y", source=ColumnDataSource(held), line_color="#333333",
                     line_width=1, name="budget-held")
        items.append(("held (the budget's count)", r, None))
    return items


def _series(budgets: list, column: int, t0: float) -> dict:
    xs: list = []
    ys: list = []
    for b in budgets:
        x, y = _steps([(t[0], t[column]) for t in b.timeline], t0)
        if xs:  # (a gap between computations: nothing held, nothing spilled)
            xs.append(x[0])
            ys.append(0)
        xs += x
        ys += y
    return {"x": xs, "y": ys}


def budget_figure(budgets: list, x_range, t0: float, label_size: int = LABEL_SIZE):
    """The memory panel of a run whose result sizes were not measured but
    that ran within a budget: what the budget counted (None without one)."""
    from bokeh.models import NumeralTickFormatter

    if not any(b.timeline for b in budgets):
        return None
    fig = new_figure("Memory held against the budget (bytes, as the budget counted them)",
                     "Bytes", x_range, {"height": 220})
    fig.yaxis.formatter = NumeralTickFormatter(format="0.0 b")
    items = draw_budget(fig, budgets, t0, held_line=True)
    add_legend(fig, items, label_size)
    point_hover(fig, [r for _, r, _ in items if r.name in ("spilled", "budget-held")],
                [("time", "@x{0.000} s"), ("bytes", "@y{0.0 b}")], mode="vline")
    return fig
