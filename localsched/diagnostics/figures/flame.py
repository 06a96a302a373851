"""Flame graph of stack samples, with a selector for the task group.

Each frame is a rectangle as wide as its share of the time sampled (the
sum of its samples' ``seconds``: the sampler's real period varies, so
sample counts would misstate it), its callees stacked on top; samples that
do not say their seconds (older saved runs) are drawn by count.  The figure
is as tall as the deepest frame worth seeing (``FLAME_VISIBLE_SHARE`` of
the width, at most ``FLAME_MAX_ROWS`` rows)
of the tree shown: a few very deep samples no longer set the height, and
the import machinery is folded into one ``(import)`` frame
(``stacks.fold_import_frames``).  The "all" tree roots every stack at its
task group (``stack_tree(by_group=True)``): the first row names the groups,
and time in C code a task calls directly still shows under its group.
A frame's label is drawn only where it fits: cut to the frame's width
(``fit_label``) when the page is built, and again in the browser whenever
the view is zoomed, panned or resized (``clip_labels``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bokeh.layouts import column
from bokeh.models import Column, ColumnDataSource, CustomJS, Range1d, Select
from bokeh.plotting import figure

from ..collectors.records import SampleData
from ..collectors.stacks import GROUP_FILE, sample_seconds, stack_tree, width_key
from ..reporting.aggregate import NO_GROUP, PIXELS
from ..reporting.naming import shorten
from .base import FIGURE_DEFAULTS, figure_options, point_hover

__all__ = ["plot_flame", "flame_trees", "flame_rects", "flame_depth", "FLAME_MIN_SHARE",
           "FLAME_GROUPS", "FLAME_VISIBLE_SHARE", "FLAME_MAX_ROWS", "fit_label", "clip_labels",
           "LABEL_CHAR_PX"]

#: The colour of a task group's frame (the first row of the "all" tree).
GROUP_COLOR = "#c6dbef"

#: Pixels one character of a frame's label may take (8pt sans-serif: most
#: characters are narrower), and the margin kept inside a frame.
LABEL_CHAR_PX = 6.5
LABEL_MARGIN_PX = 6


def fit_label(name: str, pixels: float, char_px: float = LABEL_CHAR_PX) -> str:
    """``name`` cut to fit a frame ``pixels`` wide (an ellipsis marking the
    cut), or '' where not even three characters fit.

    >>> fit_label('reduce_sum', 200), fit_label('reduce_sum', 45), fit_label('reduce_sum', 20)
    ('reduce_sum', 'reduc\u2026', '')
    """
    chars = int((pixels - LABEL_MARGIN_PX) / char_px)
    return shorten(name, chars) if chars >= 3 else ""


#: The browser's side of ``fit_label``: every frame's label recomputed from
#: its width on screen (the part of it in view), drawn from the frame's
#: visible left edge; the label column is changed in place and the glyph
#: redrawn (``change.emit``): nothing is sent back to a server.
_CLIP_LABELS_JS = """
const data = source.data;
const col = (k) => (data instanceof Map ? data.get(k) : data[k]);
const names = col("name"), lefts = col("left"), rights = col("right");
const labels = col("label"), xs = col("label_x");
const start = x_range.start, end = x_range.end, span = end - start;
const px = fig.inner_width;
if (!names || !labels || !(span > 0) || !(px > 0)) return;
for (let i = 0; i < names.length; i++) {
  const lo = Math.max(lefts[i], start), hi = Math.min(rights[i], end);
  const chars = Math.floor(((hi - lo) / span * px - margin) / char_px);
  const name = String(names[i]);
  labels[i] = chars >= name.length ? name
            : (chars >= 3 ? name.slice(0, chars - 1) + "\u2026" : "");
  if (xs) xs[i] = lo;
}
source.change.emit();
"""


def clip_labels(fig, source, char_px: float = LABEL_CHAR_PX) -> None:
    """Recompute ``source``'s frame labels in the browser whenever the
    figure's x range or width changes, or new data comes (see ``fit_label``)."""
    callback = CustomJS(args={"source": source, "x_range": fig.x_range, "fig": fig,
                              "char_px": char_px, "margin": LABEL_MARGIN_PX},
                        code=_CLIP_LABELS_JS)
    fig.x_range.js_on_change("start", callback)
    fig.x_range.js_on_change("end", callback)
    fig.js_on_change("inner_width", callback)
    source.js_on_change("data", callback)

#: Frames that are at least this share of the width set the figure's height.
FLAME_VISIBLE_SHARE = 1 / 100

#: At most this many rows of frames are shown (the deepest are cut off).
FLAME_MAX_ROWS = 40

#: Pixels a row of frames takes.
FLAME_ROW_PX = 20


def flame_height(depth: int) -> int:
    """Pixels of a flame graph showing rows 0..``depth``."""
    return max(200, 90 + FLAME_ROW_PX * (depth + 1))


def flame_depth(rects: Mapping) -> int:
    """The deepest row holding a frame of at least ``FLAME_VISIBLE_SHARE``.

    >>> flame_depth({'depth': [0, 1, 2, 3], 'share': [1.0, 0.5, 0.02, 0.001]})
    2
    """
    deep = [d for d, s in zip(rects["depth"], rects["share"], strict=True)
            if s >= FLAME_VISIBLE_SHARE]
    return min(max(deep, default=0), FLAME_MAX_ROWS)


#: Frames narrower than this share of the width are left out of the drawing.
FLAME_MIN_SHARE = 1 / 2000


#: At most this many task groups get their own flame graph in the selector.
FLAME_GROUPS = 20


_FLAME_COLUMNS = ("left", "right", "depth", "bottom", "top", "name", "where", "count",
                  "seconds", "share", "color", "label", "label_x")


def flame_rects(tree: Mapping) -> dict:
    """Rectangles of a call tree (``stack_tree``'s format): x in shares of
    the root's seconds (of its samples when no sample says its seconds:
    ``stacks.width_key``), 0..1, one row per depth (the root ``all`` is row 0)."""
    width = width_key(tree)
    total = tree[width] or 1
    out: dict = {c: [] for c in _FLAME_COLUMNS}
    palette = ("#fdae61", "#fee08b", "#f46d43", "#fdd49e", "#fc8d59", "#fec44f")
    stack = [(tree, 0.0, 0)]
    while stack:
        node, left, depth = stack.pop()
        share = node[width] / total
        out["left"].append(left)
        out["right"].append(left + share)
        out["depth"].append(depth)
        out["bottom"].append(depth - 0.45)
        out["top"].append(depth + 0.45)
        out["name"].append(node["name"])
        filename = node.get("filename")
        where = ("task group" if filename == GROUP_FILE
                 else f"{filename}:{node['line']}" if filename else "")
        out["where"].append(where)
        out["count"].append(node["count"])
        out["seconds"].append(node.get("seconds", 0.0))
        out["share"].append(share)
        # crc32, not hash(): the same function gets the same colour in every report
        # (a task group's frame in blue: it is no function)
        out["color"].append("#d9d9d9" if not depth else GROUP_COLOR if filename == GROUP_FILE
                            else palette[zlib.crc32(f"{node['name']}|{where}".encode())
                                         % len(palette)])
        # (on a ~1000 px wide plot; the browser fits them again: clip_labels)
        out["label"].append(fit_label(node["name"], share * PIXELS))
        out["label_x"].append(left)
        x = left
        for child in node["children"]:
            child_share = child[width] / total
            if child_share >= FLAME_MIN_SHARE and depth < FLAME_MAX_ROWS:
                stack.append((child, x, depth + 1))
            x += child_share
    return out


def plot_flame(trees: Mapping[str, Mapping], **figure_kwargs: Any) -> Column:
    """A flame graph of stack samples with a selector for the task group.

    ``trees`` maps a label (``"all"``, a group name ...) to a call tree in
    ``SampleProfiler.tree()``'s format (``{"name", "filename", "line",
    "count", "seconds", "children"}``, root ``"all"``).  Each frame is a
    rectangle as wide as its share of the time (``stacks.width_key``: of the
    samples if they do not say their seconds), its callees stacked on
    top; the hover gives its seconds and samples.  The
    ``Select`` above the plot switches trees in the browser (CustomJS); its
    options are the labels, in the mapping's order.  Returns a bokeh column
    (the select, the figure).

    >>> tree = {'name': 'all', 'filename': '', 'line': 0, 'count': 2, 'seconds': 0.02,
    ...         'children': [{'name': 'f', 'filename': 'm.py', 'line': 1, 'count': 2,
    ...                       'seconds': 0.02, 'children': []}]}
    >>> layout = plot_flame({'all': tree, 'x': tree})
    >>> select, fig = layout.children
    >>> select.options, fig.select_one({'name': 'flame'}).data_source.data['name']
    (['all', 'x'], ['all', 'f'])
    """
    labels = list(trees)
    if not labels:
        raise ValueError("plot_flame needs at least one tree")
    choices = [ColumnDataSource(flame_rects(trees[label]), name=f"flame:{label}")
               for label in labels]
    depths = [flame_depth(c.data) for c in choices]
    opts = figure_options(dict(FIGURE_DEFAULTS, title="Flame graph (stack samples)",
                               height=flame_height(depths[0]),
                               tools="hover,xwheel_zoom,xpan,reset,save"), figure_kwargs)
    y_range = Range1d(-0.5, depths[0] + 0.5)
    unit = "time" if width_key(trees[labels[0]]) == "seconds" else "samples"
    fig = figure(x_range=Range1d(0, 1, bounds=(0, 1)), y_range=y_range,
                 x_axis_label=f"share of {unit}", **opts)
    source = ColumnDataSource(dict(choices[0].data))
    rects = fig.quad(left="left", right="right", bottom="bottom", top="top",
                     source=source, fill_color="color", line_color="white", name="flame")
    fig.text(x="label_x", y="depth", text="label", source=source, x_offset=3,
             text_baseline="middle", text_font_size="8pt", name="flame-labels")
    clip_labels(fig, source)
    fig.yaxis.visible = False
    fig.ygrid.grid_line_color = None
    point_hover(fig, [rects], [("function", "@name"), ("where", "@where"),
                               ("time", "@seconds{0.000} s"), ("samples", "@count"),
                               ("share", "@share{0.0%}")])
    select = Select(title="Task group", options=labels, value=labels[0], width=300,
                    name="flame-group")
    select.js_on_change("value", CustomJS(args={"source": source, "choices": choices,
                                                "labels": labels, "depths": depths,
                                                "y_range": y_range, "fig": fig,
                                                "row_px": FLAME_ROW_PX,
                                                "resize": "height" not in figure_kwargs},
                                          code="""
        const i = labels.indexOf(cb_obj.value);
        if (i < 0) return;
        const data = choices[i].data;
        source.data = data instanceof Map ? new Map(data) : Object.assign({}, data);
        y_range.end = depths[i] + 0.5;
        if (resize) fig.height = Math.max(200, 90 + row_px * (depths[i] + 1));
    """))
    stretch = opts.get("sizing_mode") == "stretch_width"
    return column(select, fig, **({"sizing_mode": "stretch_width"} if stretch else {}))


def flame_trees(samples: Sequence[SampleData],
                tree: Callable[..., dict] | None = None) -> dict:
    """``{"all": tree, group: tree, ...}`` for ``plot_flame``: all samples,
    each stack rooted at its task group (``by_group``), then the
    ``FLAME_GROUPS`` task groups with most time (``sample_seconds``), then
    the samples taken between tasks (``NO_GROUP``, last: not a task group),
    the import machinery folded.
    ``tree(group=..., by_group=...)`` builds a tree, by default
    ``stacks.stack_tree`` over ``samples``.

    >>> from localsched.diagnostics.collectors.records import SampleData
    >>> s = [SampleData(0.0, 1, 'x', (('m.py', 1, 'f'),), 0.01),
    ...      SampleData(0.1, 1, None, (), 0.09)]
    >>> trees = flame_trees(s)
    >>> {k: v['seconds'] for k, v in trees.items()} == {'all': 0.1, 'x': 0.01, NO_GROUP: 0.09}
    True
    >>> list(trees)[-1] == NO_GROUP, [c['name'] for c in trees['all']['children']]
    (True, ['(between tasks)', 'x'])
    """
    if tree is None:
        def tree(group: str | None = None, by_group: bool = False) -> dict:
            return stack_tree(samples, group=group, fold_imports=True, by_group=by_group)
    seconds: dict = {}
    counts: dict = {}
    for s, t in zip(samples, sample_seconds(samples), strict=True):
        seconds[s.group] = seconds.get(s.group, 0.0) + t
        counts[s.group] = counts.get(s.group, 0) + 1
    out = {"all": tree(by_group=True)}
    groups = [g for g in seconds if g is not None]
    for group in sorted(groups, key=lambda g: (-seconds[g], -counts[g], str(g)))[:FLAME_GROUPS]:
        out[str(group)] = tree(group=group)
    if None in seconds:
        out[NO_GROUP] = stack_tree([s for s in samples if s.group is None], fold_imports=True)
    return out
