"""A flame graph of the SampleProfiler's stack samples, on demand (a button)
and every few seconds -- never at the page's 100 ms rate: building the tree
walks every sample.  Every stack is rooted at its task group (the first row
names the groups: time in C code a task calls directly still counts), and a
frame's label is drawn only where it fits (``figures.flame.fit_label``;
again in the browser on zoom: ``clip_labels``)."""

from __future__ import annotations

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.models.widgets import Button
from bokeh.plotting import figure

from ..collectors.stacks import GROUP_FILE, stack_tree
from ..figures.flame import GROUP_COLOR, clip_labels, fit_label
from .component import PAGE_WIDTH, Component, changed, lean

__all__ = ["FlameGraph"]

#: Nodes drawn at most (the widest first); narrower ones are left out.
MAX_NODES = 3000
EMPTY_HEIGHT = 90
COLORS = ("#fdae6b", "#fd8d3c", "#f16913", "#fdd0a2", "#e6550d", "#feb24c")
#: Pixels a character of a label takes (9px sans-serif), and the plot's width.
CHAR_PX = 5.5
PLOT_PX = PAGE_WIDTH - 10
COLUMNS = ("left", "right", "bottom", "top", "name", "where", "count", "seconds", "color",
           "label", "label_x")


class FlameGraph(Component):
    name = "flame-graph"
    title = "Flame Graph"
    period = 5.0

    def __init__(self, feed, context=None):
        super().__init__(feed, context)
        self.source = ColumnDataSource({k: [] for k in COLUMNS})
        fig = figure(title="Flame graph (stack samples of the tasks)", width=PAGE_WIDTH,
                     height=300, tools="xpan,xwheel_zoom,reset", toolbar_location="above",
                     x_range=Range1d(0, 1, bounds=(0, 1)), y_range=Range1d(0, 1),
                     name="flame_graph")
        fig.quad(left="left", right="right", bottom="bottom", top="top", color="color",
                 line_color="white", source=self.source)
        fig.text(x="label_x", y="bottom", text="label", source=self.source,
                 text_font_size="9px", x_offset=2, y_offset=-2, name="flame_labels")
        fig.add_tools(HoverTool(tooltips=[("function", "@name"), ("where", "@where"),
                                          ("samples", "@count")]))
        lean(fig, x_axis=False, y_axis=False, grids="")
        clip_labels(fig, self.source, CHAR_PX)
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
        root = stack_tree(samples, fold_imports=True, by_group=True)
        self.figure.title.text = (f"Flame graph: {root['count']:,} stack samples, "
                                  f"{root['seconds']:.2f} s, by task group (frames as wide "
                                  f"as their time)")
        cols = _layout(root)
        depth = int(max(cols["top"], default=1) + 0.5)
        self.figure.height = max(200, 60 + 18 * depth)
        self.figure.y_range.update(start=0, end=max(depth, 1))
        changed(self.source, cols)


def _layout(root: dict) -> dict:
    from ..collectors.stacks import width_key  # (here: the module's imports are another helper's)

    cols: dict = {k: [] for k in COLUMNS}
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
        group = node["filename"] == GROUP_FILE
        where = "task group" if group else f"{node['filename']}:{node['line']}"
        color = GROUP_COLOR if group else COLORS[hash(node["name"]) % 6]
        for k, v in (("left", left), ("right", left + width), ("bottom", depth),
                     ("top", depth + 0.95), ("name", node["name"]), ("where", where),
                     ("count", node["count"]), ("seconds", node.get("seconds", 0.0)),
                     ("color", color), ("label", fit_label(node["name"], width * PLOT_PX,
                                                           CHAR_PX)),
                     ("label_x", left)):
            cols[k].append(v)
        x = left
        for child in node["children"]:
            todo.append((child, x, depth + 1))
            x += child[weight] / total
    return cols
