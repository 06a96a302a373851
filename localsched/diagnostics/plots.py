"""Bokeh figures of profiler records: task stream, resources and cache.

This is the only module of the package that imports bokeh; nothing imports it
at ``import localsched`` time.  Every figure is built from plain records
(``localsched.diagnostics.records``), never from live profiler internals.

The clock
---------
Records carry epoch seconds (``time.time()`` on the machine where the event
happened).  Each figure's x axis is ``record time - t0`` in seconds, labelled
"Time (s)".  ``t0`` defaults to the earliest time in the figure's own records;
``visualize`` passes every figure the earliest time across *all* profilers, and
one shared x range, so the figures line up and zoom together.

What the task stream shows
--------------------------
One row per worker ("worker 0", "worker 1", ... in the axis and the hover);
a bar per task, coloured by task group (the legend shortens long group
names to ``label_size`` characters; the hover has them in full).  Tasks that
raised are red and hatched, tasks cut short by Ctrl-C or another task's
error are hatched and drawn up to the stop, and on the process scheduler
thin grey (inputs sent) and red (result received) segments show the time a
task spent travelling.

Big runs
--------
A browser cannot draw 100,000 glyphs quickly, and a standalone HTML file
holding all of them is large.  Instead of dropping records, what would be
narrower than a pixel is aggregated, assuming the time span is drawn ``PIXELS``
pixels wide.  Above ``AGGREGATE_ABOVE`` tasks (or transfer segments):

* bars a pixel wide or wider stay as they are;
* the narrower ones become one bar per worker and pixel column, spanning the
  part of the column no wide bar covers, whose *height* is the share of that
  part the worker was busy.  So a row's painted area is exactly its busy
  time: a worker busy 0.2 s of 20 s looks nearly empty, one busy 20 s full.
  The bar is coloured by the group with most time in it; its hover says how
  many tasks and which groups it covers.

Cache and resource lines with more than two points a pixel are resampled to
the *maximum* within each pixel column, so peaks survive (a cache level that
lasted a microsecond still shows).

Every ``plot_*`` function takes ``x_range`` (a bokeh range to share with other
figures; with a numeric ``Range1d`` its span sets the pixel size) and ``t0``.

Examples
--------
>>> from localsched.diagnostics.records import TaskData
>>> results = [TaskData('inc-a1b2c3d4', (abs, -1), 100.0, 100.5, 7),
...            TaskData(('add-f00d1234', 0), (max, 1, 2), 100.5, 101.0, 3)]
>>> fig = plot_tasks(results)
>>> source = fig.select_one({'name': 'tasks'}).data_source
>>> list(source.data['key']), source.data['left'].tolist()
(['inc-a1b2c3d4', "('add-f00d1234', 0)"], [0.0, 0.5])

See Also
--------
localsched.diagnostics.records : TaskData, ResourceData, CacheData
"""

from __future__ import annotations

import html
import tempfile
import warnings
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

try:
    import numpy as np
    from bokeh.io import output_notebook as _output_notebook
    from bokeh.io import save as _save
    from bokeh.io import show as _show
    from bokeh.layouts import column, gridplot
    from bokeh.models import Div, HoverTool, Legend, LegendItem, LinearAxis, Range1d
    from bokeh.palettes import Category10, Category20, all_palettes, linear_palette, turbo
    from bokeh.plotting import figure
    from bokeh.resources import Resources
    from bokeh.util.browser import view as _view_in_browser
except ImportError as exc:  # numpy comes with bokeh
    raise ImportError(
        "localsched's diagnostic plots need bokeh; install it with `pip install bokeh`"
    ) from exc

from .records import (
    ActivityData,
    CacheData,
    FailedTaskData,
    InterruptedTaskData,
    ResourceData,
    TaskData,
    TransferData,
)
from .summary import Summary, format_seconds, groups_of, short_repr, summarize

__all__ = ["plot_tasks", "plot_resources", "plot_cache", "visualize", "summary_html",
           "plot_metrics", "metrics_html", "plot_flame", "flame_trees", "plot_durations",
           "report_layout", "report_html", "PIXELS", "AGGREGATE_ABOVE", "ACTIVITY_COLORS"]

#: Width in pixels the time span is assumed to be drawn at when deciding what
#: is "narrower than a pixel"; a little wider than a typical figure, so a
#: wide browser window still shows no seams.
PIXELS = 1000

#: Task streams with more tasks than this aggregate their sub-pixel bars;
#: smaller ones keep one bar per task, so zooming in shows every task.
AGGREGATE_ABOVE = 10_000

#: Longest task repr shown in a hover; task arguments can be huge arrays.
REPR_LIMIT = 100

#: Default longest legend label (dask's ``label_size``); hovers show the full name.
LABEL_SIZE = 30

#: At most this many task groups in a legend (the largest by time).
LEGEND_ITEMS = 20

#: Pixels a legend may use when the figure's width is not fixed (it stretches
#: with the page): legends are laid out in as many columns as fit this.
LEGEND_WIDTH = 560

#: Height of a full task bar, in rows; aggregated bars are this times their occupancy.
ROW_HEIGHT = 0.8
#: Height of a transfer segment, in rows (drawn under the task bars).
TRANSFER_HEIGHT = 0.3

FAILED_COLOR = "#d62728"
SEND_COLOR = "#9e9e9e"
RECEIVE_COLOR = "#e8544e"

_FIGURE_DEFAULTS: dict[str, Any] = {
    "height": 300,
    "tools": "hover,xpan,xwheel_zoom,box_zoom,reset,save",
    "toolbar_location": "above",
    # Equal borders on every figure keep the stacked plot frames (and so
    # their time axes) aligned, even though only one has a right-hand axis.
    "min_border_left": 110,
    "min_border_right": 80,
}

# dask's names for the size, accepted so a dask user's call ports unchanged.
_RENAMED = {"plot_width": "width", "plot_height": "height"}


def _figure(title: str, y_label: str, x_range, figure_kwargs: dict) -> figure:
    """A figure with the shared defaults, overridden by the caller's kwargs.

    Without a fixed ``width`` the figure stretches to the page's width.
    Unknown keyword arguments are left for bokeh to reject, loudly.
    """
    opts = dict(_FIGURE_DEFAULTS, title=title)
    for key, value in figure_kwargs.items():
        opts[_RENAMED.get(key, key)] = value
    if "width" not in opts and "sizing_mode" not in opts:
        opts["sizing_mode"] = "stretch_width"
    if x_range is not None:
        opts["x_range"] = x_range
    return figure(x_axis_label="Time (s)", y_axis_label=y_label, **opts)


def _hover(fig, renderers: list, tooltips, **settings) -> None:
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


def _message(fig, text: str, x_range, y: float) -> None:
    """Write ``text`` in the middle of an empty figure (a renderer: bokeh
    then has something to draw and no reason to warn about empty plots)."""
    start, end = getattr(fig.x_range, "start", None), getattr(fig.x_range, "end", None)
    x = (start + end) / 2 if isinstance(start, (int, float)) and isinstance(end, (int, float)) \
        else 0.5
    fig.text(x=[x], y=[y], text=[text], text_align="center", text_baseline="middle",
             text_color="#666666", text_font_size="14pt", name="message")


# --------------------------------------------------------------------------
# Small helpers


def _pixel(x_range, span: float) -> float:
    """Seconds per pixel: of the given numeric x range if any, else of ``span``."""
    start = getattr(x_range, "start", None)
    end = getattr(x_range, "end", None)
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end > start:
        span = end - start
    return span / PIXELS if span > 0 else 0.0


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


def _colors(groups: Iterable[str], palette) -> dict[str, str]:
    """Map each group to a colour.

    ``palette`` is None (a categorical palette sized to the number of groups),
    the name of a bokeh palette family (``"Viridis"``), a sequence of colours
    (cycled over the sorted groups) or a mapping from group to colour, which
    must cover every group.
    """
    names = sorted(set(groups))
    if isinstance(palette, Mapping):
        missing = [name for name in names if name not in palette]
        if missing:
            raise ValueError(f"palette has no colour for groups {missing[:5]}")
        return {name: palette[name] for name in names}
    if isinstance(palette, str):
        palette = _palette_named(palette, len(names))
    elif palette is None:
        if len(names) <= 10:
            palette = Category10[10]
        elif len(names) <= 20:
            palette = Category20[20]
        else:
            palette = turbo(min(len(names), 256))
    palette = list(palette)
    if not palette:
        raise ValueError("palette is empty")
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


_short_repr = short_repr  # bokeh-free, shared with the JSON export


def _shorten(text: str, limit: int) -> str:
    """
    >>> _shorten('dictitems-frequencies-aggregate', 12)
    'dictitems-f\u2026'
    """
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "\u2026"


_format_seconds = format_seconds


def _floats(values: Sequence) -> np.ndarray:
    # None (e.g. a result still cached when profiling stopped) becomes NaN.
    return np.asarray(values, dtype=float)


# --------------------------------------------------------------------------
# Records to arrays: done once per profiler, shared by the figures and by
# visualize's search for the earliest time and the set of groups.


@dataclass
class _Tasks:
    keys: Sequence
    tasks: Sequence
    start: np.ndarray
    end: np.ndarray
    workers: Sequence
    groups: list[str]
    failed: list = field(default_factory=list)
    interrupted: list = field(default_factory=list)
    transfers: list = field(default_factory=list)
    activities: list = field(default_factory=list)

    @classmethod
    def of(cls, results: Sequence[TaskData], failed: Sequence[FailedTaskData] = (),
           interrupted: Sequence[InterruptedTaskData] = (),
           transfers: Sequence[TransferData] = (),
           activities: Sequence[ActivityData] = ()) -> _Tasks:
        extra = (list(failed), list(interrupted), list(transfers), list(activities))
        if not results:
            empty = np.empty(0)
            return cls((), (), empty, empty, (), [], *extra)
        keys, tasks, start, end, workers = zip(*results)
        return cls(keys, tasks, _floats(start), _floats(end), workers, groups_of(keys), *extra)

    def all_groups(self) -> set:
        return set(self.groups) | set(groups_of(r.key for r in self.failed)) \
            | set(groups_of(r.key for r in self.interrupted))

    def bounds(self) -> tuple[float, float] | None:
        lows, highs = [], []
        if len(self.start):
            lows.append(self.start.min())
            highs.append(self.end.max())
        for r in self.failed:
            lows.append(r.start_time)
            highs.append(r.end_time)
        for r in self.interrupted:
            lows.append(r.start_time)
            highs.append(r.stop_time)
        if self.transfers:
            lows.append(min(r.send_start for r in self.transfers))
            highs.append(max(r.receive_end for r in self.transfers))
        if self.activities:
            lows.append(min(r.start for r in self.activities))
            highs.append(max(r.stop for r in self.activities))
        return (float(min(lows)), float(max(highs))) if lows else None


@dataclass
class _Resources:
    time: np.ndarray
    mem: np.ndarray
    cpu: np.ndarray

    @classmethod
    def of(cls, results: Sequence[ResourceData]) -> _Resources:
        if not results:
            empty = np.empty(0)
            return cls(empty, empty, empty)
        time, mem, cpu = zip(*results)
        return cls(_floats(time), _floats(mem), _floats(cpu))

    def bounds(self) -> tuple[float, float] | None:
        return (self.time.min(), self.time.max()) if len(self.time) else None


@dataclass
class _Cache:
    metric: np.ndarray
    cached: np.ndarray
    freed: np.ndarray
    groups: list[str]

    @classmethod
    def of(cls, results: Sequence[CacheData]) -> _Cache:
        if not results:
            empty = np.empty(0)
            return cls(empty, empty, empty, [])
        keys, _, metric, cached, freed = zip(*results)
        return cls(_floats(metric), _floats(cached), _floats(freed), groups_of(keys))

    def all_groups(self) -> set:
        return set(self.groups)

    def bounds(self) -> tuple[float, float] | None:
        if not len(self.cached):
            return None
        return (self.cached.min(), np.nanmax(np.r_[self.cached, self.freed]))


def _t0(table, t0: float | None) -> float:
    if t0 is not None:
        return float(t0)
    bounds = table.bounds()
    return float(bounds[0]) if bounds else 0.0


def _codes(groups: list[str], names: list[str]) -> np.ndarray:
    """Position of each group in ``names``, as an int array."""
    index = {name: i for i, name in enumerate(names)}
    return np.fromiter((index[g] for g in groups), dtype=np.int64, count=len(groups))


def _legend(fig, items: list[tuple[str, Any, int | None]], label_size: int,
            click_hide: bool = False) -> None:
    """Add a horizontal legend above the frame (leaving the time axis aligned).

    ``items`` are ``(label, renderer, row index or None)``.  Labels are cut
    to ``label_size`` characters, and the items laid out in as many columns
    as fit the figure's fixed width (or ``LEGEND_WIDTH`` when it stretches),
    so the legend stays inside the page whatever the names.
    """
    if not items:
        return
    labels = [_shorten(label, label_size) for label, _, _ in items]
    legend_items = [
        LegendItem(label=text, renderers=[renderer], **({} if index is None else {"index": index}))
        for text, (_, renderer, index) in zip(labels, items)
    ]
    # An item: 12 px glyph, its gap, ~6 px a character at 8pt, the spacing.
    item_px = 12 + 6 + 6.5 * max(len(text) for text in labels) + 14
    available = LEGEND_WIDTH
    if fig.sizing_mode is None and fig.width:
        available = max(fig.width - (fig.min_border_left or 0) - (fig.min_border_right or 0), 100)
    legend = Legend(
        items=legend_items,
        orientation="horizontal",
        ncols=int(max(1, min(len(legend_items), available // item_px))),
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


# --------------------------------------------------------------------------
# Task stream

_TASK_TOOLTIPS = [("key", "@key"), ("group", "@group"), ("task", "@task"),
                  ("status", "@status"), ("worker", "@worker")]
_COLUMNS = ("left", "right", "row", "height", "color", "key", "group", "task", "status", "count")


def plot_tasks(results: Sequence[TaskData], x_range=None, t0: float | None = None,
               palette=None, label_size: int = LABEL_SIZE, *,
               failed: Sequence[FailedTaskData] = (),
               interrupted: Sequence[InterruptedTaskData] = (),
               transfers: Sequence[TransferData] = (),
               activities: Sequence[ActivityData] = (), **figure_kwargs):
    """Task stream: one row per worker, one bar per task, coloured by task group.

    Workers (``worker_id``) take rows 0..n-1 in sorted order, labelled
    "worker 0", "worker 1", ... on the axis and in the hover.  A bar spans
    the task's ``start_time`` to ``end_time``; x is in seconds since ``t0``
    (default: the earliest time; record times are epoch seconds).
    ``palette`` is a bokeh palette name, a sequence of colours or a ``{group:
    colour}`` mapping; legend labels are cut to ``label_size`` characters
    (the hover shows the full group).  ``failed``, ``interrupted`` and
    ``transfers`` records (``Profiler.failed`` ...) are drawn too, see the
    module docstring, as is the aggregation above ``AGGREGATE_ABOVE`` tasks:
    the source's ``count`` column says how many tasks each bar stands for,
    ``height`` its height in rows.  Other keyword arguments go to
    ``bokeh.plotting.figure``.  ``activities`` (``ActivityData``: what a task
    spent its time on, from the fine metrics) are thin segments across the
    middle of the worker's row, coloured by activity (``ACTIVITY_COLORS``),
    on top of the task bars; above ``AGGREGATE_ABOVE`` of them they are
    aggregated by activity as the bars are.

    >>> from localsched.diagnostics.records import TaskData
    >>> fig = plot_tasks([TaskData('a-1', (len, 'ab'), 5.0, 6.0, 2),
    ...                   TaskData('b-1', (len, 'c'), 5.5, 7.0, 1)], width=400)
    >>> data = fig.select_one({'name': 'tasks'}).data_source.data
    >>> data['row'].tolist(), data['right'].tolist(), data['task'], data['worker']
    ([1, 0], [1.0, 2.0], ["len('ab')", "len('c')"], ['worker 1', 'worker 0'])
    """
    table = _Tasks.of(results, failed, interrupted, transfers, activities)
    return _plot_tasks(table, x_range, t0, _colors(table.all_groups(), palette), label_size,
                       figure_kwargs)


def _worker_rows(table: _Tasks) -> dict:
    ids = set(table.workers)
    ids.update(r.worker_id for r in table.failed)
    ids.update(r.worker_id for r in table.interrupted)
    ids.update(r.worker_id for r in table.transfers)
    ids.update(r.worker_id for r in table.activities)
    known = [w for w in ids if w is not None]
    try:
        known.sort()
    except TypeError:  # ids of mixed types
        known.sort(key=repr)
    if None in ids:  # a failure the scheduler could not place: its own, last row
        known.append(None)
    return {worker: row for row, worker in enumerate(known)}


def _plot_tasks(table: _Tasks, x_range, t0, colors: dict[str, str], label_size: int,
                figure_kwargs: dict):
    t0 = _t0(table, t0)
    n = len(table.start)
    row_of = _worker_rows(table)
    names = [("unknown worker" if w is None else f"worker {row}") for w, row in row_of.items()]
    rows = np.fromiter((row_of[w] for w in table.workers), dtype=np.int64, count=n)

    fig = _figure("Task stream", "Worker", x_range, figure_kwargs)
    if "y_range" not in figure_kwargs:
        fig.y_range = Range1d(-0.5, max(len(row_of), 1) - 0.5)
    fig.yaxis.ticker = list(range(len(row_of)))
    # Thread idents and pids are long and meaningless on an axis: rows are
    # numbered, and the hover says the same.
    fig.yaxis.major_label_overrides = dict(enumerate(names))
    fig.ygrid.grid_line_color = None

    bounds = table.bounds()
    px = _pixel(x_range, bounds[1] - t0 if bounds else 0.0)
    renderers = []

    # Transfers first: drawn under the task bars, they show in the gaps.
    if table.transfers:
        data = _transfer_bars(table.transfers, row_of, t0, px)
        data["worker"] = [names[r] for r in data["row"].tolist()]
        renderers.append(fig.hbar(y="row", left="left", right="right", height="height",
                                  fill_color="color", line_color=None, source=data,
                                  name="transfers"))

    if n > AGGREGATE_ABOVE and px > 0:
        data = _aggregated_bars(table, rows, t0, px, colors)
    else:
        data = _task_bars(table, rows, t0, colors)
    data["worker"] = [names[r] for r in data["row"].tolist()]
    tasks = fig.hbar(y="row", left="left", right="right", height="height", fill_color="color",
                     line_color=None, source=data, name="tasks")
    renderers.append(tasks)

    extra_legend = []
    if table.failed:
        data = _failed_bars(table.failed, row_of, t0)
        data["worker"] = [names[r] for r in data["row"].tolist()]
        failed = fig.hbar(y="row", left="left", right="right", height="height",
                          fill_color="color", line_color="black", line_width=1,
                          hatch_pattern="x", hatch_color="white", hatch_alpha=0.8,
                          source=data, name="failed")
        renderers.append(failed)
        extra_legend.append(("failed", failed, None))
    if table.interrupted:
        data = _interrupted_bars(table.interrupted, row_of, t0, colors)
        data["worker"] = [names[r] for r in data["row"].tolist()]
        interrupted = fig.hbar(y="row", left="left", right="right", height="height",
                               fill_color="color", fill_alpha=0.6, line_color="black",
                               line_dash="dashed", hatch_pattern="/", hatch_color="black",
                               hatch_alpha=0.5, source=data, name="interrupted")
        renderers.append(interrupted)
        extra_legend.append(("interrupted", interrupted, None))
    if table.transfers:
        extra_legend += _transfer_legend(fig, renderers[0])
    if table.activities:
        data = _activity_bars(table.activities, row_of, t0, px)
        data["worker"] = [names[r] for r in data["row"].tolist()]
        acts = fig.hbar(y="row", left="left", right="right", height="height",
                        fill_color="color", line_color=None, source=data, name="activities")
        renderers.append(acts)
        first: dict = {}
        for i, name in enumerate(data["activity"]):
            first.setdefault(name, i)
        extra_legend += [(name, acts, i) for name, i in first.items()]

    _hover(fig, renderers, _TASK_TOOLTIPS + [("tasks", "@count")])
    legend = _group_legend(fig, table, colors)
    _legend(fig, legend + extra_legend, label_size)
    if not n and not table.failed and not table.interrupted:
        _message(fig, "No task finished", x_range, 0.0)
    return fig


def _group_legend(fig, table: _Tasks, colors: dict) -> list:
    """Legend items for the groups with most time (of one invisible glyph per
    group: the legend then does not depend on which bars a group won)."""
    totals: dict = {}
    durations = (table.end - table.start).tolist()
    for group, d in zip(table.groups, durations):
        totals[group] = totals.get(group, 0.0) + d
    for r, group in zip(table.failed, groups_of(r.key for r in table.failed)):
        totals.setdefault(group, 0.0)
    for r, group in zip(table.interrupted, groups_of(r.key for r in table.interrupted)):
        totals.setdefault(group, 0.0)
    if not totals:
        return []
    shown = sorted(totals, key=lambda g: (-totals[g], g))[:LEGEND_ITEMS]
    nan = np.full(len(shown), np.nan)
    key = fig.hbar(y=nan, left=nan, right=nan, height=ROW_HEIGHT,
                   fill_color=[colors[g] for g in shown], line_color=None, name="legend")
    return [(group, key, i) for i, group in enumerate(shown)]


def _transfer_legend(fig, renderer) -> list:
    colors = set(renderer.data_source.data["color"])
    items = []
    for label, color in (("sending inputs", SEND_COLOR), ("receiving result", RECEIVE_COLOR)):
        if color in colors:
            index = renderer.data_source.data["color"].index(color)
            items.append((label, renderer, index))
    return items


def _task_bars(table: _Tasks, rows: np.ndarray, t0: float, colors: dict[str, str]) -> dict:
    """One bar per task."""
    n = len(rows)
    return {
        "left": table.start - t0,
        "right": table.end - t0,
        "row": rows,
        "height": np.full(n, ROW_HEIGHT),
        "color": [colors[g] for g in table.groups],
        "key": [str(key) for key in table.keys],
        "group": list(table.groups),
        "task": [_short_repr(task) for task in table.tasks],
        "status": [f"took {format_seconds(d)}" for d in (table.end - table.start).tolist()],
        "count": np.ones(n, dtype=np.int64),
    }


def _failed_bars(failed: list, row_of: dict, t0: float) -> dict:
    return {
        "left": np.array([r.start_time for r in failed]) - t0,
        "right": np.array([r.end_time for r in failed]) - t0,
        "row": np.array([row_of[r.worker_id] for r in failed], dtype=np.int64),
        "height": np.full(len(failed), ROW_HEIGHT),
        "color": [FAILED_COLOR] * len(failed),
        "key": [str(r.key) for r in failed],
        "group": groups_of(r.key for r in failed),
        "task": [_short_repr(r.task) for r in failed],
        "status": [f"FAILED after {format_seconds(r.end_time - r.start_time)}: {r.error}"
                   for r in failed],
        "count": np.ones(len(failed), dtype=np.int64),
    }


def _interrupted_bars(interrupted: list, row_of: dict, t0: float, colors: dict) -> dict:
    groups = groups_of(r.key for r in interrupted)
    return {
        "left": np.array([r.start_time for r in interrupted]) - t0,
        "right": np.array([r.stop_time for r in interrupted]) - t0,
        "row": np.array([row_of[r.worker_id] for r in interrupted], dtype=np.int64),
        "height": np.full(len(interrupted), ROW_HEIGHT),
        "color": [colors[g] for g in groups],
        "key": [str(r.key) for r in interrupted],
        "group": groups,
        "task": [_short_repr(r.task) for r in interrupted],
        "status": [f"INTERRUPTED: running for {format_seconds(r.stop_time - r.start_time)} "
                   f"when the computation stopped" for r in interrupted],
        "count": np.ones(len(interrupted), dtype=np.int64),
    }


def _transfer_bars(transfers: list, row_of: dict, t0: float, px: float) -> dict:
    """Grey segments for inputs sent, red ones for results received."""
    keys, rows, lefts, rights, kinds = [], [], [], [], []
    for r in transfers:
        row = row_of[r.worker_id]
        # kind 0: inputs sent before the task; kind 1: its result coming back.
        for kind, (lo, hi) in enumerate(((r.send_start, r.start_time),
                                         (r.end_time, r.receive_end))):
            if hi > lo:
                keys.append(r.key)
                rows.append(row)
                lefts.append(lo)
                rights.append(hi)
                kinds.append(kind)
    left = np.asarray(lefts, dtype=float) - t0
    right = np.asarray(rights, dtype=float) - t0
    row = np.asarray(rows, dtype=np.int64)
    kind = np.asarray(kinds, dtype=np.int64)
    what = ("sending inputs", "receiving result")
    color = (SEND_COLOR, RECEIVE_COLOR)
    if len(left) <= AGGREGATE_ABOVE or px <= 0:
        return {
            "left": left, "right": right, "row": row,
            "height": np.full(len(left), TRANSFER_HEIGHT),
            "color": [color[k] for k in kinds],
            "key": [str(k) for k in keys],
            "group": [what[k] for k in kinds],
            "task": [""] * len(left),
            "status": [f"{what[k]}: {format_seconds(b - a)}"
                       for k, a, b in zip(kinds, lefts, rights)],
            "count": np.ones(len(left), dtype=np.int64),
        }
    parts = []
    for k in (0, 1):
        mine = kind == k
        bars = _occupancy_bars(left[mine], right[mine], row[mine], px, TRANSFER_HEIGHT)
        count = bars["count"]
        parts.append({
            **bars,
            "color": [color[k]] * len(count),
            "key": [f"{c} transfers" for c in count.tolist()],
            "group": [what[k]] * len(count),
            "task": [""] * len(count),
            "status": [f"{what[k]}: {format_seconds(b)} in {format_seconds(e)}"
                       for b, e in zip(bars["busy"].tolist(), bars["extent"].tolist())],
        })
    return {c: _concat([p[c] for p in parts]) for c in _COLUMNS}


#: Colours of the fine metrics' activities, none of them a Category10/20
#: colour, so an activity segment never looks like a task group's bar.
ACTIVITY_COLORS = {
    "thread-cpu": "#1b9e77",
    "thread-noncpu": "#66c2a5",
    "deserialize": "#d95f02",
    "serialize": "#fc8d62",
    "transfer": "#e7298a",
    "queued": "#b3b3b3",
    "idle": "#e0e0e0",
    "scheduler": "#666666",
    "compute": "#7570b3",
    "disk-read": "#a6761d",
    "disk-write": "#e6ab02",
}

#: Colours of the user's own activity labels, in order of appearance.
SPARE_ACTIVITY_COLORS = ("#8da0cb", "#e78ac3", "#a6d854", "#ffd92f", "#e5c494", "#66a61e",
                         "#386cb0", "#f0027f", "#bf5b17", "#beaed4")

#: Activities in the order the stacked bars pile them up.
ACTIVITY_ORDER = tuple(ACTIVITY_COLORS)

#: Height of an activity segment, in rows (drawn over the middle of the task bar).
ACTIVITY_HEIGHT = 0.3


def _activity_colors(names: Iterable[str]) -> dict[str, str]:
    """Known activities keep their colour; user labels take the spare ones."""
    spare = SPARE_ACTIVITY_COLORS
    out, i = {}, 0
    for name in names:
        if name in ACTIVITY_COLORS:
            out[name] = ACTIVITY_COLORS[name]
        else:
            out[name] = spare[i % len(spare)]
            i += 1
    return out


def _activity_order(names: Iterable[str]) -> list[str]:
    names = set(names)
    return [n for n in ACTIVITY_ORDER if n in names] + sorted(names - set(ACTIVITY_ORDER))


def _activity_bars(activities: list, row_of: dict, t0: float, px: float) -> dict:
    """Thin segments for activities, one per record or, above
    ``AGGREGATE_ABOVE``, aggregated per activity like the task bars."""
    names = _activity_order(r.activity for r in activities)
    colors = _activity_colors(names)
    left = np.fromiter((r.start for r in activities), float, len(activities)) - t0
    right = np.fromiter((r.stop for r in activities), float, len(activities)) - t0
    row = np.fromiter((row_of[r.worker_id] for r in activities), np.int64, len(activities))
    kinds = [r.activity for r in activities]
    if len(activities) <= AGGREGATE_ABOVE or px <= 0:
        return {
            "left": left, "right": right, "row": row,
            "height": np.full(len(left), ACTIVITY_HEIGHT),
            "color": [colors[k] for k in kinds],
            "activity": kinds,
            "key": [str(r.key) for r in activities],
            "group": groups_of(r.key for r in activities),
            "task": [""] * len(left),
            "status": [f"{r.activity}: {format_seconds(r.stop - r.start)}" for r in activities],
            "count": np.ones(len(left), dtype=np.int64),
        }
    parts = []
    kind_arr = np.asarray(kinds, dtype=object)
    for name in names:
        mine = kind_arr == name
        bars = _occupancy_bars(left[mine], right[mine], row[mine], px, ACTIVITY_HEIGHT)
        count = bars["count"]
        parts.append({
            **{c: bars[c] for c in ("left", "right", "row", "height", "count")},
            "color": [colors[name]] * len(count),
            "activity": [name] * len(count),
            "key": [f"{c} {name} segments" for c in count.tolist()],
            "group": [name] * len(count),
            "task": [""] * len(count),
            "status": [f"{name}: {format_seconds(b)} in {format_seconds(e)}"
                       for b, e in zip(bars["busy"].tolist(), bars["extent"].tolist())],
        })
    return {c: _concat([p[c] for p in parts]) for c in _COLUMNS + ("activity",)}


def _concat(parts: list):
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return [x for p in parts for x in p]


def _occupancy_bars(start: np.ndarray, end: np.ndarray, rows: np.ndarray, px: float,
                    full: float, groups: np.ndarray | None = None) -> dict:
    """Bars whose painted area per row equals the rows' busy time.

    Intervals (``start``/``end`` in seconds, on ``rows``) a pixel wide or
    wider become one bar each, ``full`` high.  The narrower ones are cut at
    pixel columns (``px`` seconds): each (row, column) they touch becomes
    one bar spanning the column's part no wide interval covers, as high as
    the share of that part they fill -- so its area is their busy time there.

    Returns ``left``, ``right``, ``row``, ``height``, ``count`` (intervals a
    bar stands for), ``busy`` and ``extent`` (seconds), ``members`` (for
    each bar, the interval indices, in start order) and, with ``groups``
    (an int code per interval), ``weights``: per bar, ``[(code, seconds,
    intervals), ...]`` most seconds first.

    >>> bars = _occupancy_bars(np.array([0.1, 0.5, 2.0]), np.array([0.2, 0.6, 5.0]),
    ...                        np.array([0, 0, 0]), 1.0, 0.8)
    >>> bars['left'].tolist(), bars['right'].tolist(), bars['height'].round(3).tolist()
    ([0.0, 2.0], [1.0, 5.0], [0.16, 0.8])
    """
    order = np.lexsort((start, rows))
    start, end, rows = start[order], end[order], rows[order]
    wide = (end - start) >= px
    small = np.flatnonzero(~wide)
    big = np.flatnonzero(wide)

    s, e, r = start[small], end[small], rows[small]
    col0 = np.floor(s / px).astype(np.int64)
    col1 = np.floor(e / px).astype(np.int64)
    first_part = np.minimum(e, (col0 + 1) * px) - s
    second_part = np.where(col1 > col0, e - col1 * px, 0.0)
    # Cells (row, column) as one sortable int; columns may be negative when
    # records lie left of a shared x range, hence the offset.
    offset = int(min(col0.min(initial=0), 0))
    width = int(max(col1.max(initial=0), 0)) - offset + 2
    cell0 = r * width + (col0 - offset)
    cell1 = r * width + (col1 - offset)
    touched = second_part > 0
    entry_cell = np.r_[cell0, cell1[touched]]
    entry_busy = np.r_[first_part, second_part[touched]]
    entry_member = np.r_[small, small[touched]]
    keep = entry_busy > 0
    entry_cell, entry_busy, entry_member = entry_cell[keep], entry_busy[keep], entry_member[keep]
    cells, inverse = np.unique(entry_cell, return_inverse=True)
    busy = np.bincount(inverse, weights=entry_busy, minlength=len(cells))
    count = np.bincount(inverse, minlength=len(cells))
    cell_row = cells // width
    cell_col = cells % width + offset
    a = cell_col * px
    b = (cell_col + 1) * px
    # Shrink each cell to the part no wide interval covers: a wide interval
    # starting in the cell ends its free part, one ending there starts it.
    if len(big) and len(cells):
        for times, limit in ((start[big], np.minimum), (end[big], np.maximum)):
            wcell = rows[big] * width + (np.floor(times / px).astype(np.int64) - offset)
            at = np.searchsorted(cells, wcell)
            hit = at < len(cells)
            hit[hit] = cells[at[hit]] == wcell[hit]
            if limit is np.minimum:
                np.minimum.at(b, at[hit], times[hit])
            else:
                np.maximum.at(a, at[hit], times[hit])
    free = b - a
    bad = free <= 0  # overlapping records on one worker: fall back to the column
    a[bad] = cell_col[bad] * px
    b[bad] = a[bad] + px
    height = np.minimum(busy / (b - a), 1.0) * full

    # Members per cell, in start order.
    by_cell = np.lexsort((entry_member, inverse))
    bounds = np.r_[0, np.cumsum(count)]
    members_sorted = entry_member[by_cell]
    members = [order[members_sorted[bounds[i]:bounds[i + 1]]] for i in range(len(cells))]
    lo = np.minimum.reduceat(start[members_sorted], bounds[:-1]) if len(cells) else np.empty(0)
    hi = np.maximum.reduceat(end[members_sorted], bounds[:-1]) if len(cells) else np.empty(0)

    out = {
        "left": np.r_[a, start[big]],
        "right": np.r_[b, end[big]],
        "row": np.r_[cell_row, rows[big]].astype(np.int64),
        "height": np.r_[height, np.full(len(big), full)],
        "count": np.r_[count, np.ones(len(big), dtype=np.int64)].astype(np.int64),
        "busy": np.r_[busy, end[big] - start[big]],
        "extent": np.r_[hi - lo, end[big] - start[big]],
        "members": members + [order[[i]] for i in big],
    }
    if groups is not None:
        codes = groups[order][entry_member]
        n_groups = int(groups.max(initial=0)) + 1
        pair = inverse * n_groups + codes
        pairs, pair_inverse = np.unique(pair, return_inverse=True)
        seconds = np.bincount(pair_inverse, weights=entry_busy, minlength=len(pairs))
        tasks = np.bincount(pair_inverse, minlength=len(pairs))
        rank = np.lexsort((-seconds, pairs // n_groups))
        weights: list = [[] for _ in range(len(cells))]
        for p in rank.tolist():
            weights[int(pairs[p] // n_groups)].append(
                (int(pairs[p] % n_groups), float(seconds[p]), int(tasks[p])))
        weights += [[(int(groups[order][i]), float(end[i] - start[i]), 1)] for i in big]
        out["weights"] = weights
    return out


def _aggregated_bars(table: _Tasks, rows: np.ndarray, t0: float, px: float, colors) -> dict:
    """Bars a pixel wide or wider as they are; narrower ones by occupancy per
    pixel column (see ``_occupancy_bars``)."""
    names = sorted(set(table.groups))
    codes = _codes(table.groups, names)
    bars = _occupancy_bars(table.start - t0, table.end - t0, rows, px, ROW_HEIGHT, codes)
    keys, tasks, status, group, covers = [], [], [], [], []
    for members, weights, busy, extent in zip(bars["members"], bars["weights"],
                                              bars["busy"].tolist(), bars["extent"].tolist()):
        first, last = int(members[0]), int(members[-1])
        group.append(names[weights[0][0]])
        if len(members) == 1:
            keys.append(str(table.keys[first]))
            tasks.append(_short_repr(table.tasks[first]))
            status.append(f"took {format_seconds(table.end[first] - table.start[first])}")
            covers.append(names[weights[0][0]])
            continue
        keys.append(f"{len(members)} tasks: {_short_repr(table.keys[first], 40)} \u2026 "
                    f"{_short_repr(table.keys[last], 40)}")
        tasks.append("")
        status.append(f"busy {format_seconds(busy)} in {format_seconds(extent)}")
        shown = [f"{names[g]} ({k})" for g, _, k in weights[:5]]
        covers.append(", ".join(shown) + (", \u2026" if len(weights) > 5 else ""))
    return {
        "left": bars["left"],
        "right": bars["right"],
        "row": bars["row"],
        "height": bars["height"],
        "color": [colors[g] for g in group],
        "key": keys,
        "group": covers,
        "task": tasks,
        "status": status,
        "count": bars["count"],
    }


# --------------------------------------------------------------------------
# Resources


def plot_resources(results: Sequence[ResourceData], x_range=None, t0: float | None = None,
                   **figure_kwargs):
    """CPU percent (left axis) and memory in MB (right axis) over time.

    x is in seconds since ``t0`` (default: the first sample; record times are
    epoch seconds).  A CPU value of 100 is one core fully busy.  Lines with
    more samples than pixels keep each pixel's maximum.  Other keyword
    arguments go to ``bokeh.plotting.figure``.

    >>> from localsched.diagnostics.records import ResourceData
    >>> fig = plot_resources([ResourceData(50.0, 120.0, 80.0),
    ...                       ResourceData(51.0, 150.0, 195.0)])
    >>> fig.select_one({'name': 'memory'}).y_range_name, fig.extra_y_ranges['memory'].end
    ('memory', 165.0)
    """
    figure_kwargs.pop("label_size", None)
    return _plot_resources(_Resources.of(results), x_range, t0, LABEL_SIZE, figure_kwargs)


def _plot_resources(table: _Resources, x_range, t0, label_size: int, figure_kwargs: dict):
    t0 = _t0(table, t0)
    order = np.argsort(table.time, kind="stable")
    time, cpu, mem = table.time[order] - t0, table.cpu[order], table.mem[order]
    px = _pixel(x_range, float(time[-1]) if len(time) else 0.0)
    if len(time) > 2 * PIXELS and px > 0:
        column = np.floor(time / px).astype(np.int64)
        firsts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
        time, cpu, mem = time[firsts], np.fmax.reduceat(cpu, firsts), np.fmax.reduceat(mem, firsts)

    if x_range is None and "x_range" not in figure_kwargs:
        x_range = Range1d(0.0, float(time[-1]) if len(time) and time[-1] > 0 else 1.0)
    fig = _figure("Resources", "CPU (%)", x_range, figure_kwargs)
    peak_cpu = float(np.nanmax(cpu)) if len(cpu) else 0.0
    peak_mem = float(np.nanmax(mem)) if len(mem) else 0.0
    if "y_range" not in figure_kwargs:
        fig.y_range = Range1d(0, max(100.0, peak_cpu * 1.05))
    fig.extra_y_ranges = {"memory": Range1d(0, peak_mem * 1.1 if peak_mem > 0 else 100.0)}
    fig.add_layout(LinearAxis(y_range_name="memory", axis_label="Memory (MB)"), "right")
    source = {"time": time, "cpu": cpu, "mem": mem}
    cpu_line = fig.line("time", "cpu", source=source, color=Category10[10][0], line_width=2,
                        name="cpu")
    mem_line = fig.line("time", "mem", source=source, color=Category10[10][1], line_width=2,
                        y_range_name="memory", name="memory")
    _hover(fig, [cpu_line],
           [("time", "@time{0.000} s"), ("CPU", "@cpu{0.0} %"), ("memory", "@mem{0.0} MB")],
           mode="vline")
    _legend(fig, [("CPU", cpu_line, None), ("Memory", mem_line, None)], label_size,
            click_hide=True)
    if not len(time):
        _message(fig, "No resource samples", x_range, 50.0)
    return fig


# --------------------------------------------------------------------------
# Cache


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

    >>> from localsched.diagnostics.records import CacheData
    >>> fig = plot_cache([CacheData(('x-abc123', 0), None, 1, 10.0, 12.0),
    ...                   CacheData(('x-abc123', 1), None, 1, 11.0, 13.0)])
    >>> [r.name for r in fig.renderers], fig.yaxis[0].axis_label
    (['x'], 'Cache Size (tasks)')
    >>> data = fig.renderers[0].data_source.data
    >>> list(zip(data['time'].tolist(), data['value'].tolist()))
    [(0.0, 0.0), (0.0, 1.0), (1.0, 2.0), (2.0, 1.0), (3.0, 0.0)]
    """
    table = _Cache.of(results)
    return _plot_cache(table, metric_name, x_range, t0, _colors(table.groups, palette),
                       label_size, figure_kwargs)


def _plot_cache(table: _Cache, metric_name: str, x_range, t0, colors, label_size: int,
                figure_kwargs: dict):
    t0 = _t0(table, t0)
    fig = _figure("Cache", f"Cache Size ({metric_name})", x_range, figure_kwargs)
    lines = []
    if len(table.cached):
        end_time = float(table.bounds()[1])
        freed = np.where(np.isnan(table.freed), end_time, table.freed)
        names = sorted(set(table.groups))
        codes = _codes(table.groups, names)
        order = np.argsort(codes, kind="stable")
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        px = _pixel(x_range, end_time - t0)
        for members in np.split(order, bounds):
            name = names[codes[members[0]]]
            time, value = _occupancy(table.cached[members] - t0, freed[members] - t0,
                                     table.metric[members])
            if len(time) > 2 * PIXELS and px > 0:
                time, value = _step_max(time, value, px)
            line = fig.step("time", "value", source={"time": time, "value": value}, mode="after",
                            color=colors[name], line_width=2, name=name)
            lines.append(line)
    if "y_range" not in figure_kwargs:
        fig.y_range.start = 0
    value = "@value"
    if metric_name == "bytes":  # 12.3MB, not 1.23e+7
        from bokeh.models import NumeralTickFormatter

        fig.yaxis.formatter = NumeralTickFormatter(format="0.0 b")
        value = "@value{0.0 b}"
    _hover(fig, lines, [("group", "$name"), ("time", "@time{0.000} s"), (metric_name, value)])
    # The largest groups first: the legend may not have room for all.
    lines.sort(key=lambda line: -float(np.max(line.data_source.data["value"])))
    _legend(fig, [(line.name, line, None) for line in lines[:LEGEND_ITEMS]], label_size,
            click_hide=True)
    if not lines:
        _message(fig, "Nothing was cached", x_range, 0.5)
        if "y_range" not in figure_kwargs:
            fig.y_range = Range1d(0, 1)
    return fig


def _occupancy(cached: np.ndarray, freed: np.ndarray, metric: np.ndarray):
    """The step function ``sum(metric in cache)``: (times, level from each time on).

    Starts with a point at level 0, so the first rise is drawn.  At equal
    times, frees come first: handing memory over is no peak.
    """
    times = np.r_[cached, freed]
    deltas = np.r_[metric, -metric]
    order = np.lexsort((deltas, times))
    return np.r_[times[order[0]], times[order]], np.r_[0.0, np.cumsum(deltas[order])]


def _step_max(time: np.ndarray, value: np.ndarray, px: float):
    """Resample a step function (``value[i]`` from ``time[i]`` on) to pixel columns.

    Each column holding steps becomes two points: its maximum from the column's
    start, and the level it leaves behind from the column's end (held through
    columns without steps).  Peaks are kept, whatever their width.

    >>> t, v = _step_max(np.array([0.0, 0.1, 0.2, 2.5]), np.array([1.0, 5.0, 2.0, 0.0]), 1.0)
    >>> list(zip(t.tolist(), v.tolist()))
    [(0.0, 5.0), (1.0, 2.0), (2.0, 2.0), (3.0, 0.0)]
    """
    column = np.floor(time / px).astype(np.int64)
    firsts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
    lasts = np.r_[firsts[1:], len(time)] - 1
    peak = np.maximum.reduceat(value, firsts)
    carried = np.r_[0.0, value[firsts[1:] - 1]]  # level on entering the column
    xs = np.empty(2 * len(firsts))
    ys = np.empty(2 * len(firsts))
    xs[0::2] = column[firsts] * px
    xs[1::2] = (column[firsts] + 1) * px
    ys[0::2] = np.maximum(peak, carried)
    ys[1::2] = value[lasts]
    return xs, ys


# --------------------------------------------------------------------------
# The summary


def summary_html(summary: Summary, label_size: int = 60) -> str:
    """The summary as a small HTML block (what ``visualize`` puts above the plots).

    >>> from localsched.diagnostics.summary import summarize
    >>> from localsched.diagnostics.records import TaskData
    >>> 'parallel efficiency' in summary_html(summarize([TaskData('a-1', None, 0.0, 1.0, 1)]))
    True
    """
    esc = html.escape
    if summary.tasks == 0:
        head = "<b>No task finished.</b> "
    else:
        head = ""
    eff = "n/a" if summary.efficiency is None else f"{summary.efficiency:.0%}"
    facts = [
        ("wall time", format_seconds(summary.wall)),
        ("tasks run", f"{summary.tasks:,}"),
        ("failed", f"{summary.failed:,}"),
        ("interrupted", f"{summary.interrupted:,}"),
        ("workers", f"{summary.workers}"),
        ("busy", format_seconds(summary.busy)),
        ("parallel efficiency", eff),
    ]
    cell = "padding:1px 10px 1px 0;white-space:nowrap"
    parts = [
        '<div class="localsched-summary" style="font:13px sans-serif;max-width:100%;'
        'overflow-x:auto">',
        f"<p style='margin:4px 0'>{head}" + " &middot; ".join(
            f"{esc(name)} <b>{esc(value)}</b>" for name, value in facts) + "</p>",
    ]
    if summary.dashboard:
        link = esc(summary.dashboard, quote=True)
        parts.append(f"<p style='margin:4px 0'>cluster dashboard "
                     f"<a href='{link}' target='_blank'>{link}</a></p>")
    if summary.groups:
        parts.append("<table style='border-collapse:collapse;font-size:12px'>"
                     f"<tr><th style='{cell};text-align:left'>task group</th>"
                     f"<th style='{cell};text-align:right'>tasks</th>"
                     f"<th style='{cell};text-align:right'>total</th>"
                     f"<th style='{cell};text-align:right'>mean</th>"
                     f"<th style='{cell};text-align:right'>share</th></tr>")
        for g in summary.groups:
            parts.append(
                f"<tr><td style='{cell}' title='{esc(g.name, quote=True)}'>"
                f"{esc(_shorten(g.name, label_size))}</td>"
                f"<td style='{cell};text-align:right'>{g.count:,}</td>"
                f"<td style='{cell};text-align:right'>{esc(format_seconds(g.total))}</td>"
                f"<td style='{cell};text-align:right'>{esc(format_seconds(g.mean))}</td>"
                f"<td style='{cell};text-align:right'>{g.share:.0%}</td></tr>")
        parts.append("</table>")
        if summary.other_groups:
            parts.append(f"<p style='margin:2px 0'>({summary.other_groups} more groups)</p>")
    parts.append("</div>")
    return "".join(parts)


# --------------------------------------------------------------------------
# Everything together

_TABLES = {TaskData: _Tasks, ResourceData: _Resources, CacheData: _Cache}


def _table_of(profiler):
    kind = getattr(profiler, "record_type", None)
    if kind not in _TABLES:
        raise TypeError(
            f"cannot plot {type(profiler).__name__}: its record_type must be TaskData, "
            f"ResourceData or CacheData, not {kind!r}"
        )
    if kind is TaskData:
        return _Tasks.of(profiler.results, getattr(profiler, "failed", ()),
                         getattr(profiler, "interrupted", ()), getattr(profiler, "transfers", ()))
    return _TABLES[kind].of(profiler.results)


def visualize(profilers, filename: str = "profile.html", show: bool = True, save: bool = True,
              mode: str | None = None, palette=None, label_size: int = LABEL_SIZE,
              **figure_kwargs):
    """Stack the figures of one or more profilers on one shared time axis.

    ``profilers`` is a profiler or a list of them; each has ``.results`` (a
    list of records) and a ``record_type`` class attribute (TaskData,
    ResourceData or CacheData; a cache profiler also has ``.metric_name``, a
    task profiler may have ``failed``, ``interrupted`` and ``transfers``).
    Every figure's x is seconds since the earliest record time across *all*
    profilers (records hold epoch seconds), on one shared ``Range1d``, so the
    figures line up and pan and zoom together.  Task groups keep one colour
    across the task stream and the cache plot; legend labels are cut to
    ``label_size`` characters.  The page opens with a summary of the task
    profilers' records (:func:`localsched.diagnostics.summary.summarize`).

    ``save`` writes a standalone HTML file to ``filename`` (dask's deprecated
    ``file_path=`` still works, with a FutureWarning).  ``mode`` is the
    BokehJS resources mode: None means ``"inline"`` (the library is embedded,
    so the file works offline), ``"cdn"`` makes it smaller but needs the
    internet.  ``show`` displays the page inline when running in a Jupyter
    kernel, otherwise it opens the saved (or a temporary) file in a browser.
    Other keyword arguments go to every ``bokeh.plotting.figure`` (a
    ``title`` goes to the top one only); without ``width`` the figures
    stretch to the page's width.

    Returns, as dask does, the figure for one profiler and the grid of
    figures for several.

    >>> from types import SimpleNamespace
    >>> from localsched.diagnostics.records import TaskData, ResourceData
    >>> tasks = SimpleNamespace(record_type=TaskData,
    ...                         results=[TaskData('a-1', None, 100.0, 101.0, 1)])
    >>> res = SimpleNamespace(record_type=ResourceData,
    ...                       results=[ResourceData(99.5, 10.0, 50.0)])
    >>> layout = visualize([tasks, res], save=False, show=False)
    >>> task_fig, res_fig = [child[0] for child in layout.children]
    >>> task_fig.x_range is res_fig.x_range
    True
    >>> task_fig.select_one({'name': 'tasks'}).data_source.data['left'].tolist()
    [0.5]
    """
    if "file_path" in figure_kwargs:
        warnings.warn("The file_path keyword argument is deprecated; use filename instead",
                      FutureWarning, stacklevel=3)
        filename = figure_kwargs.pop("file_path")
    if not isinstance(profilers, (list, tuple)):
        profilers = [profilers]
    if not profilers:
        raise ValueError("visualize needs at least one profiler")
    resources = Resources(mode=mode or "inline")  # an unknown mode fails before any work
    tables = [(profiler, _table_of(profiler)) for profiler in profilers]

    bounds = [b for _, table in tables if (b := table.bounds()) is not None]
    t0 = float(min(b[0] for b in bounds)) if bounds else 0.0
    span = float(max(b[1] for b in bounds)) - t0 if bounds else 0.0
    x_range = Range1d(0.0, span if span > 0 else 1.0)
    colors = _colors(set().union(*(table.all_groups() for _, table in tables
                                   if hasattr(table, "all_groups"))), palette)

    figures = []
    for i, (profiler, table) in enumerate(tables):
        kwargs = figure_kwargs
        if i and "title" in figure_kwargs:  # the caller's title names the whole stack
            kwargs = {k: v for k, v in figure_kwargs.items() if k != "title"}
        if isinstance(table, _Tasks):
            fig = _plot_tasks(table, x_range, t0, colors, label_size, kwargs)
        elif isinstance(table, _Resources):
            fig = _plot_resources(table, x_range, t0, label_size, kwargs)
        else:
            metric_name = getattr(profiler, "metric_name", "tasks")
            fig = _plot_cache(table, metric_name, x_range, t0, colors, label_size, kwargs)
        if i and "title" in figure_kwargs:
            fig.title = None
        figures.append(fig)
    if len(figures) == 1:
        plot = figures[0]
    else:
        for fig in figures[:-1]:  # one time axis label, at the bottom
            fig.xaxis.axis_label = None
        stretch = figures[0].sizing_mode == "stretch_width"
        plot = gridplot([[fig] for fig in figures], merge_tools=True, toolbar_location="above",
                        **({"sizing_mode": "stretch_width"} if stretch else {}))

    page = plot
    task_tables = [(p, t) for p, t in tables if isinstance(t, _Tasks)]
    if task_tables:
        summary = _summary_of(task_tables)
        div = Div(text=summary_html(summary), sizing_mode="stretch_width")
        page = column(div, plot, sizing_mode="stretch_width")

    if save:
        _save(page, filename=filename, resources=resources, title="localsched profile")
    if show:
        _display(page, filename if save else None, resources)
    return plot


def _summary_of(task_tables: list) -> Summary:
    """One summary over the task profilers of a report."""
    results, failed, interrupted, walls = [], [], [], []
    for profiler, table in task_tables:
        results += profiler.results
        failed += table.failed
        interrupted += table.interrupted
        walls += getattr(profiler, "walls", None) or []
    return summarize(results, failed, interrupted, walls=walls or None)


def _in_notebook() -> bool:
    """True inside a Jupyter kernel (not in a terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return getattr(shell, "kernel", None) is not None


def _display(layout, saved: str | None, resources) -> None:
    if _in_notebook():
        _output_notebook(resources=resources, hide_banner=True)
        _show(layout)
        return
    if saved is None:
        with tempfile.NamedTemporaryFile(prefix="localsched-profile-", suffix=".html",
                                         delete=False) as file:
            saved = file.name
        _save(layout, filename=saved, resources=resources, title="localsched profile")
    _view_in_browser(saved)


# --------------------------------------------------------------------------
# Fine metrics: where each group's time went


#: At most this many task groups get a bar of their own (the rest are summed).
METRIC_GROUPS = 30

#: Label of the fine metrics that belong to no task (idle, scheduler).
NO_GROUP = "(no task)"


def _metric_table(metrics: Mapping, unit: str = "seconds") -> tuple[list, list, dict]:
    """Sum ``(span, group, activity, unit) -> value`` over spans, for one unit:
    (group labels, most first; activities in stacking order; {activity: values})."""
    sums: dict = {}
    for (span, group, activity, u), value in metrics.items():
        if u != unit:
            continue
        label = NO_GROUP if group is None else str(group)
        per = sums.setdefault(label, {})
        per[activity] = per.get(activity, 0.0) + float(value)
    order = sorted(sums, key=lambda g: (-sum(sums[g].values()), g))
    if len(order) > METRIC_GROUPS:
        rest = order[METRIC_GROUPS - 1:]
        merged: dict = {}
        for g in rest:
            for a, v in sums[g].items():
                merged[a] = merged.get(a, 0.0) + v
        label = f"({len(rest)} other groups)"
        sums[label] = merged
        order = order[:METRIC_GROUPS - 1] + [label]
    activities = _activity_order({a for per in sums.values() for a in per})
    columns = {a: [sums[g].get(a, 0.0) for g in order] for a in activities}
    return order, activities, columns


def plot_metrics(metrics: Mapping, label_size: int = LABEL_SIZE, **figure_kwargs):
    """The fine metrics' seconds as stacked horizontal bars, one per task group.

    ``metrics`` is the mapping ``(span, group, activity, unit) -> value``
    (``FineMetrics.metrics``); spans are summed, only ``seconds`` are drawn
    (``metrics_html`` lists the other units).  Each bar piles up the group's
    activities (``thread-cpu``, ``thread-noncpu``, ``serialize``,
    ``transfer``, ``idle``, user labels ...), coloured as in the task
    stream; what belongs to no task (``idle``, ``scheduler``) is the
    ``(no task)`` bar.  Groups are sorted by total, most first, and past
    ``METRIC_GROUPS`` summed into one bar.

    >>> fig = plot_metrics({((), 'load', 'thread-cpu', 'seconds'): 2.0,
    ...                     (('s',), 'load', 'thread-noncpu', 'seconds'): 1.0,
    ...                     ((), None, 'idle', 'seconds'): 0.5})
    >>> list(fig.y_range.factors), [r.name for r in fig.renderers]
    (['(no task)', 'load'], ['thread-cpu', 'thread-noncpu', 'idle'])
    >>> fig.renderers[0].data_source.data['thread-cpu']
    [2.0, 0.0]
    """
    groups, activities, columns = _metric_table(metrics)
    opts = dict(_FIGURE_DEFAULTS, title="Where the time went (fine metrics, seconds)",
                height=max(160, 70 + 26 * len(groups)), tools="hover,save,reset")
    for key, value in figure_kwargs.items():
        opts[_RENAMED.get(key, key)] = value
    if "width" not in opts and "sizing_mode" not in opts:
        opts["sizing_mode"] = "stretch_width"
    fig = figure(y_range=list(reversed(groups)) or ["(none)"], x_axis_label="seconds", **opts)
    source = {"group": groups, **columns}
    source["total"] = [sum(col[i] for col in columns.values()) for i in range(len(groups))]
    colors = _activity_colors(activities)
    renderers = []
    if activities:
        renderers = fig.hbar_stack(activities, y="group", height=0.7, source=source,
                                   color=[colors[a] for a in activities], line_color=None)
        for r, a in zip(renderers, activities):
            r.name = a
    fig.x_range.start = 0
    fig.yaxis.major_label_overrides = {g: _shorten(g, label_size) for g in groups}
    fig.ygrid.grid_line_color = None
    _hover(fig, renderers, [("group", "@group"), ("activity", "$name"),
                            ("seconds", "@$name{0.000}"), ("group total", "@total{0.000}")])
    _legend(fig, [(a, r, None) for a, r in zip(activities, renderers)], label_size,
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
    for (span, group, activity, unit), value in metrics.items():
        if unit == "seconds":
            continue
        k = (NO_GROUP if group is None else str(group), activity, unit)
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


# --------------------------------------------------------------------------
# Flame graph of stack samples

#: Frames narrower than this share of the samples are left out of the drawing.
FLAME_MIN_SHARE = 1 / 2000

#: At most this many task groups get their own flame graph in the selector.
FLAME_GROUPS = 20

_FLAME_COLUMNS = ("left", "right", "depth", "bottom", "top", "name", "where", "count", "share", "color", "label")


def _flame_rects(tree: Mapping) -> dict:
    """Rectangles of a call tree (``stack_tree``'s format): x in shares of
    all samples (0..1), one row per depth (the root ``all`` is row 0)."""
    total = tree["count"] or 1
    out: dict = {c: [] for c in _FLAME_COLUMNS}
    palette = ("#fdae61", "#fee08b", "#f46d43", "#fdd49e", "#fc8d59", "#fec44f")
    stack = [(tree, 0.0, 0)]
    while stack:
        node, left, depth = stack.pop()
        share = node["count"] / total
        out["left"].append(left)
        out["right"].append(left + share)
        out["depth"].append(depth)
        out["bottom"].append(depth - 0.45)
        out["top"].append(depth + 0.45)
        out["name"].append(node["name"])
        where = f"{node['filename']}:{node['line']}" if node.get("filename") else ""
        out["where"].append(where)
        out["count"].append(node["count"])
        out["share"].append(share)
        # crc32, not hash(): the same function gets the same colour in every report
        out["color"].append(palette[zlib.crc32(f"{node['name']}|{where}".encode())
                                    % len(palette)] if depth else "#d9d9d9")
        # ~7 px a character on a ~1000 px wide plot
        chars = int(share * PIXELS / 7)
        out["label"].append(_shorten(node["name"], chars) if chars >= 3 else "")
        x = left
        for child in node["children"]:
            if child["count"] / total >= FLAME_MIN_SHARE:
                stack.append((child, x, depth + 1))
            x += child["count"] / total
    return out


def plot_flame(trees: Mapping[str, Mapping], **figure_kwargs):
    """A flame graph of stack samples with a selector for the task group.

    ``trees`` maps a label (``"all"``, a group name ...) to a call tree in
    ``SampleProfiler.tree()``'s format (``{"name", "filename", "line",
    "count", "children"}``, root ``"all"``).  Each frame is a rectangle as
    wide as its share of the samples, its callees stacked on top.  The
    ``Select`` above the plot switches trees in the browser (CustomJS); its
    options are the labels, in the mapping's order.  Returns a bokeh column
    (the select, the figure).

    >>> tree = {'name': 'all', 'filename': '', 'line': 0, 'count': 2, 'children': [
    ...     {'name': 'f', 'filename': 'm.py', 'line': 1, 'count': 2, 'children': []}]}
    >>> layout = plot_flame({'all': tree, 'x': tree})
    >>> select, fig = layout.children
    >>> select.options, fig.select_one({'name': 'flame'}).data_source.data['name']
    (['all', 'x'], ['all', 'f'])
    """
    from bokeh.models import ColumnDataSource, CustomJS, Select

    labels = list(trees)
    if not labels:
        raise ValueError("plot_flame needs at least one tree")
    choices = [ColumnDataSource(_flame_rects(trees[label]), name=f"flame:{label}")
               for label in labels]
    depth = max((max(c.data["depth"]) for c in choices), default=0)
    opts = dict(_FIGURE_DEFAULTS, title="Flame graph (stack samples)",
                height=min(900, max(200, 60 + 22 * (depth + 1))),
                tools="hover,xwheel_zoom,xpan,reset,save")
    for key, value in figure_kwargs.items():
        opts[_RENAMED.get(key, key)] = value
    if "width" not in opts and "sizing_mode" not in opts:
        opts["sizing_mode"] = "stretch_width"
    fig = figure(x_range=Range1d(0, 1, bounds=(0, 1)), y_range=Range1d(-0.5, depth + 0.5),
                 x_axis_label="share of samples", **opts)
    source = ColumnDataSource(dict(choices[0].data))
    rects = fig.quad(left="left", right="right", bottom="bottom", top="top",
                     source=source, fill_color="color", line_color="white", name="flame")
    fig.text(x="left", y="depth", text="label", source=source, x_offset=3,
             text_baseline="middle", text_font_size="8pt", name="flame-labels")
    fig.yaxis.visible = False
    fig.ygrid.grid_line_color = None
    _hover(fig, [rects], [("function", "@name"), ("where", "@where"),
                          ("samples", "@count"), ("share", "@share{0.0%}")])
    select = Select(title="Task group", options=labels, value=labels[0], width=300,
                    name="flame-group")
    select.js_on_change("value", CustomJS(args={"source": source, "choices": choices,
                                                "labels": labels}, code="""
        const i = labels.indexOf(cb_obj.value);
        if (i < 0) return;
        const data = choices[i].data;
        source.data = data instanceof Map ? new Map(data) : Object.assign({}, data);
    """))
    stretch = opts.get("sizing_mode") == "stretch_width"
    return column(select, fig, **({"sizing_mode": "stretch_width"} if stretch else {}))


def flame_trees(samples: Sequence, tree=None) -> dict:
    """``{"all": tree, group: tree, ...}`` for ``plot_flame``: all samples,
    then the ``FLAME_GROUPS`` groups with most samples (``(no task)`` for
    samples taken between tasks).  ``tree(group=...)`` builds a tree, by
    default ``localsched.diagnostics.report.stack_tree`` over ``samples``.

    >>> from localsched.diagnostics.records import SampleData
    >>> s = [SampleData(0.0, 1, 'x', (('m.py', 1, 'f'),)), SampleData(0.1, 1, None, ())]
    >>> {k: v['count'] for k, v in flame_trees(s).items()}
    {'all': 2, '(no task)': 1, 'x': 1}
    """
    from .report import stack_tree

    if tree is None:
        def tree(group=None):
            return stack_tree(samples, group=group)
    counts: dict = {}
    for s in samples:
        counts[s.group] = counts.get(s.group, 0) + 1
    out = {"all": tree()}
    for group in sorted(counts, key=lambda g: (-counts[g], str(g)))[:FLAME_GROUPS]:
        if group is None:
            sub = [s for s in samples if s.group is None]
            out[NO_GROUP] = stack_tree(sub)
        else:
            out[str(group)] = tree(group=group)
    return out


# --------------------------------------------------------------------------
# Task durations per group

#: At most this many groups get a histogram (the ones with most time).
HISTOGRAM_GROUPS = 12


def plot_durations(results: Sequence[TaskData], bins: int = 30, palette=None,
                   label_size: int = LABEL_SIZE, ncols: int = 3):
    """One histogram of task durations per task group (the ``HISTOGRAM_GROUPS``
    groups with most time), in a grid.  Durations spread over more than two
    orders of magnitude get logarithmic bins and axis.

    >>> from localsched.diagnostics.records import TaskData
    >>> grid = plot_durations([TaskData(('a-1a2b3c4d', i), None, 0.0, 0.1 * (i + 1), 0)
    ...                        for i in range(5)])
    >>> fig = grid.children[0][0]
    >>> fig.title.text, int(sum(fig.select_one({'name': 'histogram'}).data_source.data['count']))
    ('a: 5 tasks', 5)
    """
    table = _Tasks.of(results)
    colors = _colors(table.groups, palette)
    durations = table.end - table.start
    per: dict = {}
    for group, d in zip(table.groups, durations.tolist()):
        per.setdefault(group, []).append(d)
    shown = sorted(per, key=lambda g: (-sum(per[g]), g))[:HISTOGRAM_GROUPS]
    figures = []
    for group in shown:
        values = np.asarray(per[group])
        positive = values[values > 0]
        log = len(positive) and positive.max() > 100 * positive.min()
        if log:
            edges = np.geomspace(positive.min(), positive.max(), bins + 1)
            counts, edges = np.histogram(positive, bins=edges)
        else:
            lo, hi = float(values.min()), float(values.max())
            if hi <= lo:  # all alike: one bar in the middle, not a range around zero
                lo, hi = lo * 0.5, (hi * 1.5 if hi > 0 else 1.0)
            counts, edges = np.histogram(values, bins=bins, range=(min(lo, 0.0), hi))
        fig = figure(title=f"{_shorten(group, label_size)}: {len(values):,} tasks", width=330,
                     height=220, tools="hover,save,reset", toolbar_location=None,
                     x_axis_type="log" if log else "linear", x_axis_label="duration (s)",
                     y_axis_label="tasks")
        source = {"left": edges[:-1], "right": edges[1:], "count": counts,
                  "range": [f"{format_seconds(a)} .. {format_seconds(b)}"
                            for a, b in zip(edges[:-1].tolist(), edges[1:].tolist())]}
        fig.quad(left="left", right="right", bottom=0, top="count", source=source,
                 fill_color=colors[group], line_color="white", name="histogram")
        _hover(fig, fig.renderers, [("duration", "@range"), ("tasks", "@count")])
        figures.append(fig)
    if not figures:
        return Div(text="<p>No task finished.</p>")
    return gridplot(figures, ncols=ncols, toolbar_location=None)


# --------------------------------------------------------------------------
# The performance report page


def _heading(text: str, note: str = "") -> Div:
    note_html = f"<p style='margin:2px 0;color:#555'>{html.escape(note)}</p>" if note else ""
    return Div(text=f"<h2 style='font:600 16px sans-serif;margin:18px 0 4px'>"
               f"{html.escape(text)}</h2>{note_html}", sizing_mode="stretch_width")


def report_layout(run, palette=None, label_size: int = LABEL_SIZE):
    """The performance report of a ``RunData`` as one bokeh layout: summary,
    task stream (with activities) / resources / cache on one time axis, fine
    metrics, flame graph, task durations."""
    tasks = _Tasks.of(run.tasks, run.failed, run.interrupted, run.transfers, run.activities)
    resources = _Resources.of(run.resources)
    cache = _Cache.of(run.cache)
    tables = [tasks, resources, cache]
    bounds = [b for table in tables if (b := table.bounds()) is not None]
    t0 = float(min(b[0] for b in bounds)) if bounds else 0.0
    span = float(max(b[1] for b in bounds)) - t0 if bounds else 0.0
    x_range = Range1d(0.0, span if span > 0 else 1.0)
    colors = _colors(tasks.all_groups() | cache.all_groups(), palette)
    stream = [
        _plot_tasks(tasks, x_range, t0, colors, label_size, {}),
        _plot_resources(resources, x_range, t0, label_size, {}),
        _plot_cache(cache, run.cache_metric, x_range, t0, colors, label_size,
                    {"title": f"Cache by task group ({run.cache_metric})"}),
    ]
    for fig in stream[:-1]:
        fig.xaxis.axis_label = None
    parts = [
        Div(text=f"<h1 style='font:600 20px sans-serif;margin:6px 0'>"
            f"{html.escape(str(run.meta.get('title') or 'localsched report'))}</h1>",
            sizing_mode="stretch_width"),
        Div(text=summary_html(run.summary()), sizing_mode="stretch_width"),
        gridplot([[f] for f in stream], merge_tools=True, toolbar_location="above",
                 sizing_mode="stretch_width"),
        _heading("Fine metrics", "Seconds per task group and activity, summed over workers."),
    ]
    if run.metrics:
        parts.append(plot_metrics(run.metrics, label_size))
        other = metrics_html(run.metrics)
        if other:
            parts.append(Div(text=other, sizing_mode="stretch_width"))
    else:
        parts.append(Div(text="<p>No fine metrics were recorded.</p>"))
    parts.append(_heading("Flame graph", "Stack samples of the worker threads; pick a task "
                                         "group to see only its samples."))
    if run.samples:
        parts.append(plot_flame(flame_trees(run.samples)))
    else:
        parts.append(Div(text="<p>No stack samples were taken.</p>"))
    parts.append(_heading("Task durations", "One histogram per task group."))
    parts.append(plot_durations(run.tasks, palette=colors, label_size=label_size))
    return column(*parts, sizing_mode="stretch_width")


def report_html(run, title: str = "localsched report", mode: str | None = None,
                palette=None, label_size: int = LABEL_SIZE) -> str:
    """The performance report of a ``RunData`` as one self-contained HTML page
    (bokeh embedded unless ``mode="cdn"``), the run's JSON in a ``<script
    type="application/json" id="localsched-data">`` element."""
    from bokeh.embed import file_html

    from .report import DATA_ELEMENT_ID

    resources = Resources(mode=mode or "inline")
    page = file_html(report_layout(run, palette, label_size), resources=resources,
                     title=title)
    data = (f'<script type="application/json" id="{DATA_ELEMENT_ID}">'
            f"{run.to_json()}</script>\n")
    at = page.rindex("</body>")
    return page[:at] + data + page[at:]
