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

Big runs
--------
A browser cannot draw 100,000 glyphs quickly, and a standalone HTML file
holding all of them is large.  Instead of dropping records, what would be
narrower than a pixel is aggregated, assuming the time span is drawn ``PIXELS``
pixels wide:

* task stream, above ``AGGREGATE_ABOVE`` tasks: on each worker's row, sub-pixel
  bars that start in the same pixel column are merged into one bar spanning
  them, coloured by the group with most tasks in it; its hover says how many
  tasks and which groups it covers.  Bars a pixel wide or wider stay as they
  are.  At most about two bars per pixel per worker remain.
* cache and resources, when a line has more than two points a pixel: the line
  is resampled to the *maximum* within each pixel column, so peaks survive
  (a cache level that lasted a microsecond still shows).

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

import warnings

import reprlib
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

try:
    import numpy as np
    from bokeh.io import output_notebook as _output_notebook
    from bokeh.io import save as _save
    from bokeh.io import show as _show
    from bokeh.layouts import gridplot
    from bokeh.models import HoverTool, Legend, LegendItem, LinearAxis, Range1d
    from bokeh.palettes import Category10, Category20, turbo
    from bokeh.plotting import figure
    from bokeh.resources import Resources
    from bokeh.util.browser import view as _view_in_browser
except ImportError as exc:  # numpy comes with bokeh
    raise ImportError(
        "localsched's diagnostic plots need bokeh; install it with `pip install bokeh`"
    ) from exc

from ..utils import funcname, key_split
from .records import CacheData, ResourceData, TaskData

__all__ = ["plot_tasks", "plot_resources", "plot_cache", "visualize", "PIXELS", "AGGREGATE_ABOVE"]

#: Width in pixels the time span is assumed to be drawn at when deciding what
#: is "narrower than a pixel"; a little wider than the default figure, so a
#: wide browser window still shows no seams.
PIXELS = 1000

#: Task streams with more tasks than this aggregate their sub-pixel bars;
#: smaller ones keep one bar per task, so zooming in shows every task.
AGGREGATE_ABOVE = 10_000

#: Longest task repr shown in a hover; task arguments can be huge arrays.
REPR_LIMIT = 100

_FIGURE_DEFAULTS: dict[str, Any] = {
    "width": 800,
    "height": 300,
    "tools": "xpan,xwheel_zoom,box_zoom,reset,save",
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

    Unknown keyword arguments are left for bokeh to reject, loudly.
    """
    opts = dict(_FIGURE_DEFAULTS, title=title)
    for key, value in figure_kwargs.items():
        opts[_RENAMED.get(key, key)] = value
    if x_range is not None:
        opts["x_range"] = x_range
    return figure(x_axis_label="Time (s)", y_axis_label=y_label, **opts)


# --------------------------------------------------------------------------
# Small helpers


def _pixel(x_range, span: float) -> float:
    """Seconds per pixel: of the given numeric x range if any, else of ``span``."""
    start = getattr(x_range, "start", None)
    end = getattr(x_range, "end", None)
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end > start:
        span = end - start
    return span / PIXELS if span > 0 else 0.0


def _groups_of(keys: Sequence) -> list[str]:
    """``key_split`` of every key, computed once per distinct name part.

    key_split looks only at a tuple key's first element, so the many keys
    of one collection (``('x-abc123', 0)``, ``('x-abc123', 1)``, ...) cost
    one call.
    """
    memo: dict = {}
    groups = []
    for key in keys:
        name = key[0] if isinstance(key, tuple) and key else key
        try:
            group = memo[name]
        except KeyError:
            group = memo[name] = key_split(key)
        groups.append(group)
    return groups


def _colors(groups: Iterable[str], palette) -> dict[str, str]:
    """Map each group to a colour.

    ``palette`` is None (a categorical palette sized to the number of groups),
    a sequence of colours (cycled over the sorted groups) or a mapping from
    group to colour, which must cover every group.
    """
    names = sorted(set(groups))
    if isinstance(palette, Mapping):
        missing = [name for name in names if name not in palette]
        if missing:
            raise ValueError(f"palette has no colour for groups {missing[:5]}")
        return {name: palette[name] for name in names}
    if palette is None:
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


_repr = reprlib.Repr()
_repr.maxlevel = 3
_repr.maxstring = 40
_repr.maxother = 40
for _attr in ("maxtuple", "maxlist", "maxarray", "maxdict", "maxset", "maxfrozenset", "maxdeque"):
    setattr(_repr, _attr, 4)


def _short_repr(task: Any, limit: int = REPR_LIMIT) -> str:
    """A bounded, readable repr of a task: ``add(1, 'x')`` for tuple tasks.

    >>> _short_repr((max, 1, 'x'))
    "max(1, 'x')"
    >>> len(_short_repr(list(range(10**6))) ) < 40
    True
    """
    if isinstance(task, tuple) and task and callable(task[0]):
        text = f"{funcname(task[0])}({', '.join(_repr.repr(arg) for arg in task[1:])})"
    else:
        text = _repr.repr(task)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _format_seconds(seconds: float) -> str:
    """
    >>> _format_seconds(0.00042), _format_seconds(1.5), _format_seconds(0.012)
    ('420 \u00b5s', '1.5 s', '12 ms')
    """
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} \u00b5s"


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

    @classmethod
    def of(cls, results: Sequence[TaskData]) -> _Tasks:
        if not results:
            empty = np.empty(0)
            return cls((), (), empty, empty, (), [])
        keys, tasks, start, end, workers = zip(*results)
        return cls(keys, tasks, _floats(start), _floats(end), workers, _groups_of(keys))

    def bounds(self) -> tuple[float, float] | None:
        return (self.start.min(), self.end.max()) if len(self.start) else None


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
        return cls(_floats(metric), _floats(cached), _floats(freed), _groups_of(keys))

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


def _legend(fig, items: list[tuple[str, Any, int | None]], click_hide: bool = False) -> None:
    """Add a horizontal legend above the frame (leaving the time axis aligned).

    ``items`` are ``(label, renderer, row index or None)``; the first 24 are shown.
    """
    if not items:
        return
    legend_items = [
        LegendItem(label=label, renderers=[renderer], **({} if index is None else {"index": index}))
        for label, renderer, index in items[:24]
    ]
    legend = Legend(
        items=legend_items,
        orientation="horizontal",
        ncols=min(len(legend_items), 6),
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


def plot_tasks(results: Sequence[TaskData], x_range=None, t0: float | None = None,
               palette=None, **figure_kwargs):
    """Task stream: one row per worker, one bar per task, coloured by task group.

    Workers (``worker_id``) take rows 0..n-1 in sorted order, labelled
    "worker 0", "worker 1", ...; the hover shows the id itself.  A bar spans the task's ``start_time`` to ``end_time``; x is in
    seconds since ``t0`` (default: the earliest start; record times are epoch
    seconds).  ``palette`` is a sequence of colours or a ``{group: colour}``
    mapping; hovering shows the key, group, a short repr of the task and its
    duration.  Above ``AGGREGATE_ABOVE`` tasks, sub-pixel bars are merged
    (see the module docstring); the source's ``count`` column says how many
    tasks each bar stands for.  Other keyword arguments go to
    ``bokeh.plotting.figure``.

    >>> from localsched.diagnostics.records import TaskData
    >>> fig = plot_tasks([TaskData('a-1', (len, 'ab'), 5.0, 6.0, 2),
    ...                   TaskData('b-1', (len, 'c'), 5.5, 7.0, 1)], width=400)
    >>> data = fig.select_one({'name': 'tasks'}).data_source.data
    >>> data['row'].tolist(), data['right'].tolist(), data['task']
    ([1, 0], [1.0, 2.0], ["len('ab')", "len('c')"])
    """
    table = _Tasks.of(results)
    return _plot_tasks(table, x_range, t0, _colors(table.groups, palette), figure_kwargs)


def _plot_tasks(table: _Tasks, x_range, t0, colors: dict[str, str], figure_kwargs: dict):
    t0 = _t0(table, t0)
    n = len(table.start)
    try:
        worker_ids = sorted(set(table.workers))
    except TypeError:  # ids of mixed types
        worker_ids = sorted(set(table.workers), key=repr)
    row_of = {worker: row for row, worker in enumerate(worker_ids)}
    rows = np.fromiter((row_of[w] for w in table.workers), dtype=np.int64, count=n)

    fig = _figure("Task stream", "worker", x_range, figure_kwargs)
    if "y_range" not in figure_kwargs:
        fig.y_range = Range1d(-0.5, max(len(worker_ids), 1) - 0.5)
    fig.yaxis.ticker = list(range(len(worker_ids)))
    # Thread idents and pids are long and meaningless on an axis: rows are
    # numbered, and the hover names the worker's own id.
    fig.yaxis.major_label_overrides = {row: f"worker {row}" for row in range(len(worker_ids))}
    fig.ygrid.grid_line_color = None

    px = _pixel(x_range, float(table.end.max() - t0) if n else 0.0)
    if n > AGGREGATE_ABOVE and px > 0:
        data, tooltips = _aggregated_bars(table, rows, t0, px, colors)
    else:
        data, tooltips = _task_bars(table, rows, t0, colors)
    data["worker"] = [str(worker_ids[row]) for row in data["row"].tolist()]
    renderer = fig.hbar(
        y="row", left="left", right="right", height=0.8, fill_color="color",
        line_color=None, source=data, name="tasks",
    )
    _hover(fig, renderers=[renderer], tooltips=tooltips + [("worker", "@worker")])
    first_row: dict[str, int] = {}
    for index, group in enumerate(data["group"]):
        first_row.setdefault(group, index)
    _legend(fig, [(group, renderer, index) for group, index in sorted(first_row.items())])
    return fig


def _task_bars(table: _Tasks, rows: np.ndarray, t0: float, colors: dict[str, str]):
    """One bar per task."""
    n = len(rows)
    data = {
        "left": table.start - t0,
        "right": table.end - t0,
        "row": rows,
        "color": [colors[g] for g in table.groups],
        "key": [str(key) for key in table.keys],
        "group": list(table.groups),
        "task": [_short_repr(task) for task in table.tasks],
        "duration": [_format_seconds(d) for d in (table.end - table.start).tolist()],
        "count": np.ones(n, dtype=np.int64),
    }
    tooltips = [("key", "@key"), ("group", "@group"), ("task", "@task"), ("duration", "@duration")]
    return data, tooltips


def _aggregated_bars(table: _Tasks, rows: np.ndarray, t0: float, px: float, colors):
    """Bars a pixel wide or wider as they are; narrower ones merged per pixel column.

    Merging is cut at pixel-column boundaries (not only at wide bars or a
    change of worker), so that an aggregate never spans more than two pixels:
    it cannot paint a visible idle gap as busy, and the colours still follow
    the task groups along the time axis.
    """
    n = len(rows)
    order = np.lexsort((table.start, rows))
    start, end, row = table.start[order], table.end[order], rows[order]
    names = sorted(colors)
    codes = _codes(table.groups, names)[order]

    wide = (end - start) >= px
    column = np.floor((start - t0) / px).astype(np.int64)
    new_bar = np.ones(n, dtype=bool)
    new_bar[1:] = (row[1:] != row[:-1]) | (column[1:] != column[:-1]) | wide[1:] | wide[:-1]
    firsts = np.flatnonzero(new_bar)
    lasts = np.r_[firsts[1:], n] - 1
    bar = np.cumsum(new_bar) - 1
    count = lasts - firsts + 1
    left = start[firsts]
    right = np.maximum.reduceat(end, firsts)
    busy = np.add.reduceat(end - start, firsts)

    # Tasks per (bar, group); sorted by bar, then most tasks first (ties: by
    # group name, lexsort being stable), so each bar's first pair dominates.
    n_groups = max(len(names), 1)
    pairs, per_pair = np.unique(bar * n_groups + codes, return_counts=True)
    by = np.lexsort((-per_pair, pairs // n_groups))
    pair_bar, pair_group, per_pair = pairs[by] // n_groups, pairs[by] % n_groups, per_pair[by]
    leading = np.r_[True, pair_bar[1:] != pair_bar[:-1]]
    dominant = pair_group[leading]  # one per bar, in bar order

    covers: list[list[str]] = [[] for _ in range(len(firsts))]
    for b, g, k in zip(pair_bar.tolist(), pair_group.tolist(), per_pair.tolist()):
        covers[b].append(f"{names[g]} ({k})")

    keys, tasks, durations = [], [], []
    for i, (first, last, k) in enumerate(zip(firsts.tolist(), lasts.tolist(), count.tolist())):
        if k == 1:
            keys.append(str(table.keys[order[first]]))
            tasks.append(_short_repr(table.tasks[order[first]]))
            durations.append(_format_seconds(busy[i]))
        else:
            keys.append(f"{k} tasks: {_short_repr(table.keys[order[first]], 40)} \u2026 "
                        f"{_short_repr(table.keys[order[last]], 40)}")
            tasks.append("")
            extent = _format_seconds(right[i] - left[i])
            durations.append(f"{_format_seconds(busy[i])} busy in {extent}")
    group = [names[g] for g in dominant.tolist()]
    data = {
        "left": left - t0,
        "right": right - t0,
        "row": row[firsts],
        "color": [colors[g] for g in group],
        "key": keys,
        "group": group,
        "groups": [", ".join(c[:5]) + (", \u2026" if len(c) > 5 else "") for c in covers],
        "task": tasks,
        "duration": durations,
        "count": count,
    }
    tooltips = [("key", "@key"), ("tasks", "@count"), ("groups", "@groups"), ("task", "@task"),
                ("duration", "@duration")]
    return data, tooltips


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
    return _plot_resources(_Resources.of(results), x_range, t0, figure_kwargs)


def _plot_resources(table: _Resources, x_range, t0, figure_kwargs: dict):
    t0 = _t0(table, t0)
    order = np.argsort(table.time, kind="stable")
    time, cpu, mem = table.time[order] - t0, table.cpu[order], table.mem[order]
    px = _pixel(x_range, float(time[-1]) if len(time) else 0.0)
    if len(time) > 2 * PIXELS and px > 0:
        column = np.floor(time / px).astype(np.int64)
        firsts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
        time, cpu, mem = time[firsts], np.fmax.reduceat(cpu, firsts), np.fmax.reduceat(mem, firsts)

    fig = _figure("Resources", "CPU (%)", x_range, figure_kwargs)
    peak_cpu = float(np.nanmax(cpu)) if len(cpu) else 0.0
    peak_mem = float(np.nanmax(mem)) if len(mem) else 0.0
    if "y_range" not in figure_kwargs:
        fig.y_range = Range1d(0, max(100.0, peak_cpu * 1.05))
    # No memory measured yet: 0..100 MB, as dask draws an empty profile.
    fig.extra_y_ranges = {"memory": Range1d(0, peak_mem * 1.1 if peak_mem > 0 else 100.0)}
    fig.add_layout(LinearAxis(y_range_name="memory", axis_label="Memory (MB)"), "right")
    source = {"time": time, "cpu": cpu, "mem": mem}
    cpu_line = fig.line("time", "cpu", source=source, color=Category10[10][0], line_width=2,
                        name="cpu")
    mem_line = fig.line("time", "mem", source=source, color=Category10[10][1], line_width=2,
                        y_range_name="memory", name="memory")
    _hover(fig,
           renderers=[cpu_line],
           mode="vline",
           tooltips=[("time", "@time{0.000} s"), ("CPU", "@cpu{0.0} %"), ("memory", "@mem{0.0} MB")])
    _legend(fig, [("CPU", cpu_line, None), ("Memory", mem_line, None)], click_hide=True)
    return fig


# --------------------------------------------------------------------------
# Cache


def plot_cache(results: Sequence[CacheData], metric_name: str = "tasks", x_range=None,
               t0: float | None = None, palette=None, **figure_kwargs):
    """What each task group holds in the cache over time: one line per group.

    A group's line is the sum of ``metric`` over its results in the cache: a
    step up at each ``cache_time``, down at each ``free_time`` (a result never
    freed counts until the last time in the records).  x is in seconds since
    ``t0`` (default: the earliest ``cache_time``; record times are epoch
    seconds); the y axis is labelled ``metric_name``.  Lines with more steps
    than pixels keep each pixel's maximum.  ``palette`` as for ``plot_tasks``;
    other keyword arguments go to ``bokeh.plotting.figure``.

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
                       figure_kwargs)


def _plot_cache(table: _Cache, metric_name: str, x_range, t0, colors, figure_kwargs: dict):
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
    _hover(fig,
           renderers=lines,
           tooltips=[("group", "$name"), ("time", "@time{0.000} s"), (metric_name, "@value")])
    _legend(fig, [(line.name, line, None) for line in lines], click_hide=True)
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
# Everything together

_TABLES = {TaskData: _Tasks, ResourceData: _Resources, CacheData: _Cache}


def visualize(profilers, filename: str = "profile.html", show: bool = True, save: bool = True,
              mode: str | None = None, palette=None, **figure_kwargs):
    """Stack the figures of one or more profilers on one shared time axis.

    ``profilers`` is a profiler or a list of them; each has ``.results`` (a
    list of records) and a ``record_type`` class attribute (TaskData,
    ResourceData or CacheData; a cache profiler also has ``.metric_name``).
    Every figure's x is seconds since the earliest record time across *all*
    profilers (records hold epoch seconds), on one shared ``Range1d``, so the
    figures line up and pan and zoom together.  Task groups keep one colour
    across the task stream and the cache plot.

    ``save`` writes a standalone HTML file to ``filename``.  ``mode`` is the
    BokehJS resources mode: None means ``"inline"`` (the library is embedded,
    so the file works offline), ``"cdn"`` makes it smaller but needs the
    internet.  ``show`` displays the layout inline when running in a Jupyter
    kernel, otherwise it opens the saved (or a temporary) file in a browser.
    Other keyword arguments go to every ``bokeh.plotting.figure``.  Returns
    the bokeh layout.

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
    if "file_path" in figure_kwargs:  # dask's old name for filename
        warnings.warn("The file_path keyword argument is deprecated and will be removed in a "
                      "future release; use filename= instead.", FutureWarning, stacklevel=2)
        filename = figure_kwargs.pop("file_path")
    # dask's keyword for the longest label shown (task-group names in legends).
    label_size = figure_kwargs.pop("label_size", None)
    # dask's title names the whole plot: it goes on the top figure only.
    title = figure_kwargs.pop("title", None)
    if not isinstance(profilers, (list, tuple)):
        profilers = [profilers]
    if not profilers:
        raise ValueError("visualize needs at least one profiler")
    resources = Resources(mode=mode or "inline")  # an unknown mode fails before any work
    tables = []
    for profiler in profilers:
        kind = getattr(profiler, "record_type", None)
        if kind not in _TABLES:
            raise TypeError(
                f"cannot plot {type(profiler).__name__}: its record_type must be TaskData, "
                f"ResourceData or CacheData, not {kind!r}"
            )
        tables.append((profiler, _TABLES[kind].of(profiler.results)))

    bounds = [b for _, table in tables if (b := table.bounds()) is not None]
    t0 = float(min(b[0] for b in bounds)) if bounds else 0.0
    span = float(max(b[1] for b in bounds)) - t0 if bounds else 0.0
    x_range = Range1d(0.0, span if span > 0 else 1.0)
    colors = _colors(set().union(*(getattr(table, "groups", ()) for _, table in tables)), palette)

    figures = []
    for profiler, table in tables:
        if isinstance(table, _Tasks):
            fig = _plot_tasks(table, x_range, t0, colors, figure_kwargs)
        elif isinstance(table, _Resources):
            fig = _plot_resources(table, x_range, t0, figure_kwargs)
        else:
            metric_name = getattr(profiler, "metric_name", "tasks")
            fig = _plot_cache(table, metric_name, x_range, t0, colors, figure_kwargs)
        figures.append(fig)
    if title is not None:
        figures[0].title.text = title
    if label_size is not None:
        _shorten_legends(figures, int(label_size))
    if len(figures) == 1:
        layout = figures[0]  # one profiler: its figure, as dask returns
    else:
        layout = gridplot([[fig] for fig in figures], merge_tools=True, toolbar_location="above")

    if save:
        _save(layout, filename=filename, resources=resources, title="localsched profile")
    if show:
        _display(layout, filename if save else None, resources)
    return layout


def _hover(fig, **props) -> None:
    """Our hover settings, on the hover tool the caller asked for (dask's
    ``tools="hover"``) or on a new one: never two hover tools."""
    mine = [t for t in fig.tools if isinstance(t, HoverTool)]
    if mine:
        for name, value in props.items():
            setattr(mine[0], name, value)
    else:
        fig.add_tools(HoverTool(**props))


def _shorten_legends(figures: list, size: int) -> None:
    """Cut legend labels to ``size`` characters (dask's ``label_size``)."""
    for fig in figures:
        for legend in fig.legend:
            for item in legend.items:
                label = item.label
                value = getattr(label, "value", None) if label is not None else None
                if isinstance(value, str) and len(value) > size:
                    item.label = value[: max(1, size - 1)] + "…"


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
