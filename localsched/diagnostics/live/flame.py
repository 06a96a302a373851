"""A flame graph of the SampleProfiler's stack samples, on demand (a button)
and every few seconds -- never at the page's 100 ms rate: building the tree
walks every sample."""

from __future__ import annotations

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.models.widgets import Button
from bokeh.plotting import figure

from .component import PAGE_WIDTH, Component, changed, lean

__all__ = ["FlameGraph"]

#: Nodes drawn at most (the widest first); narrower ones are left out.
MAX_NODES = 3000
EMPTY_HEIGHT = 90
COLORS = ("#fdae6b", "#fd8d3c", "#f16913", "#fdd0a2", "#e6550d", "#feb24c")


class FlameGraph(Component):
    name = "flame-graph"
    title = "Flame Graph"
    period = 5.0

    def __init__(self, feed, context=None):
        super().__init__(feed, context)
        self.source = ColumnDataSource({k: [] for k in ("left", "right", "bottom", "top",
                                                        "name", "where", "count", "seconds",
                                                        "color")})
        fig = figure(title="Flame graph (stack samples of the tasks)", width=PAGE_WIDTH,
                     height=300, tools="xpan,xwheel_zoom,reset", toolbar_location="above",
                     name="flame_graph")
        fig.quad(left="left", right="right", bottom="bottom", top="top", color="color",
                 line_color="white", source=self.source)
        fig.text(x="left", y="bottom", text="name", source=self.source, text_font_size="9px",
                 x_offset=2, y_offset=-2)
        fig.add_tools(HoverTool(tooltips=[("function", "@name"), ("where", "@where"),
                                          ("samples", "@count")]))
        lean(fig, x_axis=False, y_axis=False, grids="")
        button = Button(label="Refresh flame graph", width=200, name="flame_refresh")
        button.on_click(lambda *_: self._refresh())
        self.figure = fig
        self.root = column(button, fig)
        self.update()

    def _refresh(self) -> None:
        try:
            self.update()
        except Exception as exc:  # noqa: BLE001 -- shown, never raised into bokeh
            self.figure.title.text = f"Flame graph: failed ({exc})"

    def update(self) -> None:
        samplers = self.context.diagnostics("SampleProfiler") if self.context else []
        samples: list = []
        for s in samplers:
            samples += s.results
        if not samples:
            self.figure.title.text = "Flame graph: no samples (add SampleProfiler())"
            self.figure.height = EMPTY_HEIGHT
            changed(self.source, {k: [] for k in self.source.data})
            return
        from ..sampler import tree

        root = tree(samples)
        self.figure.height = 300
        self.figure.title.text = (f"Flame graph: {root['count']:,} stack samples, "
                                  f"{root['seconds']:.2f} s (frames as wide as their time)")
        changed(self.source, _layout(root))


def _layout(root: dict) -> dict:
    from ..stacks import width_key  # (here: the module's imports are another helper's)

    cols: dict = {k: [] for k in ("left", "right", "bottom", "top", "name", "where", "count",
                                  "seconds", "color")}
    weight = width_key(root)  # the time the samples stand for
    total = root[weight] or 1
    todo = [(root, 0.0, 0)]
    drawn = 0
    while todo and drawn < MAX_NODES:
        node, left, depth = todo.pop()
        width = node[weight] / total
        if width < 1e-3 and depth:
            continue
        drawn += 1
        for k, v in (("left", left), ("right", left + width), ("bottom", depth),
                     ("top", depth + 0.95), ("name", node["name"]),
                     ("where", f"{node['filename']}:{node['line']}"),
                     ("count", node["count"]), ("seconds", node.get("seconds", 0.0)),
                     ("color", COLORS[hash(node["name"]) % 6])):
            cols[k].append(v)
        x = left
        for child in node["children"]:
            todo.append((child, x, depth + 1))
            x += child[weight] / total
    return cols
