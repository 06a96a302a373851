"""What every figure of the diagnostics shares: defaults, hover, legend, colours.

The only place bokeh is imported from for the figures (``figures/*.py``
import it through here or directly, after this module's import check).

Legends
-------
A legend sits above its plot, and the figure grows by the legend's height,
so a legend never squeezes the plot: ``add_legend`` returns the pixels it
added.  It shows at most ``LEGEND_ITEMS`` entries (the caller passes the
largest first, and says how many more there are: one "N other groups"
entry stands for them).  Labels are cut to ``label_size`` characters; the
hovers show names in full.

Colours
-------
``group_colors``: with no palette, the ``TOP_COLORS`` groups with most time
get ten clearly distinct colours (``TOP_PALETTE``), every other group a grey,
which is also the colour of the legend's "other groups" entry.  A named
bokeh palette, a sequence or a ``{group: colour}`` mapping is used as given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

try:
    from bokeh.models import HoverTool, Legend, LegendItem
    from bokeh.palettes import Category10, all_palettes, linear_palette
    from bokeh.plotting import figure
except ImportError as exc:
    raise ImportError(
        "localsched's diagnostic plots need bokeh; install it with `pip install bokeh`"
    ) from exc

from ..reporting.naming import shorten

__all__ = ["FIGURE_DEFAULTS", "RENAMED", "LABEL_SIZE", "LEGEND_ITEMS", "TOP_COLORS",
           "OTHER_COLORS", "TOP_PALETTE", "ACTIVITY_COLORS", "new_figure", "figure_options",
           "point_hover",
           "empty_message", "add_legend", "height_fixed", "group_colors", "activity_colors",
           "legend_rows"]

#: Default longest legend label (dask's ``label_size``); hovers show the full name.
LABEL_SIZE = 30

#: At most this many task groups in a legend (the largest by time), then "N other groups".
LEGEND_ITEMS = 10

#: Pixels a legend may use when the figure's width is not fixed (it stretches
#: with the page): legends are laid out in as many columns as fit this.
LEGEND_WIDTH = 560

#: Height of one legend row, in pixels (8pt labels, 12 px glyphs, spacing).
LEGEND_ROW_PX = 18

#: Groups (most time first) that get a colour of their own when no palette is given.
TOP_COLORS = 10

#: The colours of the top groups: Category10 with its grey swapped for a dark
#: blue, so no top group looks like one of the greys of the other groups.
TOP_PALETTE = tuple("#393b79" if c == "#7f7f7f" else c for c in Category10[10])

#: Colours of the other groups: greys, alternating so neighbouring bars part.
OTHER_COLORS = ("#b5b5b5", "#9c9c9c", "#cfcfcf", "#a8a8a8")

FIGURE_DEFAULTS: dict[str, Any] = {
    "height": 300,
    "tools": "hover,xpan,xwheel_zoom,box_zoom,reset,save",
    "toolbar_location": "above",
    # Equal borders on every figure keep the stacked plot frames (and so
    # their time axes) aligned, even though only one has a right-hand axis.
    "min_border_left": 110,
    "min_border_right": 80,
}


# dask's names for the size, accepted so a dask user's call ports unchanged.
RENAMED = {"plot_width": "width", "plot_height": "height"}


def new_figure(title: str, y_label: str, x_range, figure_kwargs: dict) -> figure:
    """A figure with the shared defaults, overridden by the caller's kwargs.

    Without a fixed ``width`` the figure stretches to the page's width.
    Unknown keyword arguments are left for bokeh to reject, loudly.
    """
    opts = figure_options(dict(FIGURE_DEFAULTS, title=title), figure_kwargs)
    if x_range is not None:
        opts["x_range"] = x_range
    return figure(x_axis_label="Time (s)", y_axis_label=y_label, **opts)


def point_hover(fig, renderers: list, tooltips, **settings) -> None:
    """Point the figure's hover tools (from its ``tools``) at ``renderers``.

    Configured rather than added: a figure asked for ``tools="hover"`` has
    exactly that one tool, and one without hover gets none.
    """
    for tool in fig.tools:
        if isinstance(tool, HoverTool):
            tool.renderers = list(renderers)
            tool.tooltips = tooltips
            for name, value in settings.items():
                setattr(tool, name, value)


def empty_message(fig, text: str, x_range, y: float) -> None:
    """Write ``text`` in the middle of an empty figure (a renderer: bokeh
    then has something to draw and no reason to warn about empty plots)."""
    start, end = getattr(fig.x_range, "start", None), getattr(fig.x_range, "end", None)
    x = (start + end) / 2 if isinstance(start, (int, float)) and isinstance(end, (int, float)) \
        else 0.5
    fig.text(x=[x], y=[y], text=[text], text_align="center", text_baseline="middle",
             text_color="#666666", text_font_size="14pt", name="message")


def _palette_named(name: str, n: int) -> list:
    """``n`` colours from the bokeh palette family ``name`` ("Viridis", ...)."""
    try:
        family = all_palettes[name]
    except KeyError:
        raise ValueError(f"unknown bokeh palette {name!r}; see bokeh.palettes.all_palettes") \
            from None
    if n in family:
        return list(family[n])
    largest = family[max(family)]
    if n <= len(largest):
        return list(linear_palette(largest, max(n, 1)))
    return list(largest)


def figure_options(defaults: dict, figure_kwargs: dict) -> dict:
    """``defaults`` overridden by the caller's kwargs (dask's names accepted);
    without a fixed ``width`` the figure stretches to the page's width."""
    opts = dict(defaults)
    for key, value in figure_kwargs.items():
        opts[RENAMED.get(key, key)] = value
    if "width" not in opts and "sizing_mode" not in opts:
        opts["sizing_mode"] = "stretch_width"
    return opts


def group_colors(groups: Iterable[str], palette=None,
                 ranking: Sequence[str] | None = None) -> dict[str, str]:
    """Map each group to a colour.

    ``palette`` is None (see the module docstring: distinct colours for the
    ``TOP_COLORS`` first groups of ``ranking``, most time first, greys for
    the rest; without a ranking, groups in sorted order), the name of a
    bokeh palette family (``"Viridis"``), a sequence of colours (cycled over
    the sorted groups) or a mapping from group to colour, which must cover
    every group.

    >>> colors = group_colors([f'g{i}' for i in range(12)], ranking=['g11', 'g3'])
    >>> colors['g11'] != colors['g3'], colors['g9'] in OTHER_COLORS
    (True, True)
    """
    names = sorted(set(groups))
    if isinstance(palette, Mapping):
        missing = [name for name in names if name not in palette]
        if missing:
            raise ValueError(f"palette has no colour for groups {missing[:5]}")
        return {name: palette[name] for name in names}
    if palette is None:
        first = [g for g in (ranking or ()) if g in set(names)]
        ordered = first + [g for g in names if g not in set(first)]
        if len(ordered) <= len(TOP_PALETTE):
            return {name: TOP_PALETTE[i] for i, name in enumerate(names)}
        colors = {g: TOP_PALETTE[i] for i, g in enumerate(ordered[:TOP_COLORS])}
        for i, g in enumerate(ordered[TOP_COLORS:]):
            colors[g] = OTHER_COLORS[i % len(OTHER_COLORS)]
        return colors
    if isinstance(palette, str):
        palette = _palette_named(palette, len(names))
    palette = list(palette)
    if not palette:
        raise ValueError("palette is empty")
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def legend_rows(labels: Sequence[str], available: float) -> tuple[int, int]:
    """(columns, rows) of a horizontal legend of ``labels`` in ``available`` px."""
    # An item: 12 px glyph, its gap, ~6.5 px a character at 8pt, the spacing.
    item_px = 12 + 6 + 6.5 * max(len(text) for text in labels) + 14
    ncols = int(max(1, min(len(labels), available // item_px)))
    return ncols, -(-len(labels) // ncols)


def add_legend(fig, items: Sequence[tuple[Any, Any, int | None]], label_size: int,
               click_hide: bool = False, grow: bool = True) -> int:
    """Add a horizontal legend above the frame and grow the figure by its
    height, so the plot keeps its size; returns the pixels added.

    ``items`` are ``(label, renderer, row index or None)``.  Labels are cut
    to ``label_size`` characters, and the items laid out in as many columns
    as fit the figure's fixed width (or ``LEGEND_WIDTH`` when it stretches),
    so the legend stays inside the page whatever the names.  ``grow=False``
    (the caller fixed the figure's height) takes the legend's room from the plot.
    """
    if not items:
        return 0
    labels = [shorten(label, label_size) for label, _, _ in items]
    legend_items = [
        LegendItem(label=text, renderers=[renderer], **({} if index is None else {"index": index}))
        for text, (_, renderer, index) in zip(labels, items, strict=False)
    ]
    available = LEGEND_WIDTH
    if fig.sizing_mode is None and fig.width:
        available = max(fig.width - (fig.min_border_left or 0) - (fig.min_border_right or 0), 100)
    ncols, rows = legend_rows(labels, available)
    legend = Legend(
        items=legend_items,
        orientation="horizontal",
        ncols=ncols,
        location="top_left",
        label_text_font_size="8pt",
        glyph_width=12,
        glyph_height=12,
        spacing=4,
        padding=2,
        margin=2,
        border_line_color=None,
    )
    if click_hide:
        legend.click_policy = "hide"
    fig.add_layout(legend, "above")
    added = rows * LEGEND_ROW_PX + 6
    if not grow:
        return 0
    if fig.height:
        fig.height = fig.height + added
    return added


def height_fixed(figure_kwargs: dict) -> bool:
    """Whether the caller chose the figure's height (dask's name included)."""
    return bool({"height", "plot_height"} & set(figure_kwargs))


#: Colours of the fine metrics' activities, none of them a Category10/20
#: colour, so an activity segment never looks like a task group's bar.
ACTIVITY_COLORS = {
    "thread-cpu": "#1b9e77",
    "thread-noncpu": "#66c2a5",
    "deserialize": "#d95f02",
    "serialize": "#fc8d62",
    "transfer": "#e7298a",
    "queued": "#b3b3b3",
    "hand-off": "#9e9ac8",
    "start-up": "#54278f",
    "idle": "#e0e0e0",
    "scheduler": "#666666",
    "compute": "#7570b3",
    "disk-read": "#a6761d",
    "disk-write": "#e6ab02",
}

#: Colours of the user's own activity labels, in order of appearance.
SPARE_ACTIVITY_COLORS = ("#8da0cb", "#e78ac3", "#a6d854", "#ffd92f", "#e5c494", "#66a61e",
                         "#386cb0", "#f0027f", "#bf5b17", "#beaed4")


def activity_colors(names: Iterable[str]) -> dict[str, str]:
    """Known activities keep their colour; user labels take the spare ones."""
    out, i = {}, 0
    for name in names:
        if name in ACTIVITY_COLORS:
            out[name] = ACTIVITY_COLORS[name]
        else:
            out[name] = SPARE_ACTIVITY_COLORS[i % len(SPARE_ACTIVITY_COLORS)]
            i += 1
    return out
