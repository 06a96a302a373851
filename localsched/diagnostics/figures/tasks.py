"""The task stream: one row per worker, one bar per task, coloured by task group.

Rows are "worker 0", "worker 1", ... (``naming.worker_rows``); a row is at
least ``ROW_PX`` pixels tall whatever the number of groups, since the legend
(the ``LEGEND_ITEMS`` groups with most time, then "N other groups") adds its
own height to the figure.  Tasks that raised are red and hatched, tasks cut
short by Ctrl-C or another task's error are hatched and drawn up to the
stop, and on the process scheduler thin grey (inputs sent) and red (result
received) segments show the time a task spent travelling.  The fine
metrics' activities are thin segments across the middle of a row.  Above
``AGGREGATE_ABOVE`` records, sub-pixel bars are aggregated
(``aggregate.occupancy_bars``): the source's ``count`` column says how many
tasks a bar stands for, ``height`` its height in rows.

>>> from localsched.diagnostics.collectors.records import TaskData
>>> results = [TaskData('inc-a1b2c3d4', (abs, -1), 100.0, 100.5, 7),
...            TaskData(('add-f00d1234', 0), (max, 1, 2), 100.5, 101.0, 3)]
>>> fig = plot_tasks(results)
>>> source = fig.select_one({'name': 'tasks'}).data_source
>>> list(source.data['key']), source.data['left'].tolist()
(['inc-a1b2c3d4', "('add-f00d1234', 0)"], [0.0, 0.5])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from bokeh.models import Range1d

from ..collectors.records import (
    ActivityData,
    FailedTaskData,
    InterruptedTaskData,
    TaskData,
    TransferData,
)
from ..reporting.aggregate import (
    AGGREGATE_ABOVE,
    TaskTable,
    activity_order,
    group_codes,
    occupancy_bars,
    origin,
    seconds_per_pixel,
)
from ..reporting.naming import format_seconds, groups_of, short_repr, shown_text, worker_label
from .base import (
    LABEL_SIZE,
    LEGEND_ITEMS,
    OTHER_COLORS,
    activity_colors,
    add_legend,
    empty_message,
    group_colors,
    height_fixed,
    new_figure,
    point_hover,
)

__all__ = ["plot_tasks", "draw_tasks", "task_stream_height", "ROW_PX", "ROW_HEIGHT",
           "TRANSFER_HEIGHT", "ACTIVITY_HEIGHT", "FAILED_COLOR", "SEND_COLOR", "RECEIVE_COLOR"]

#: Height of a full task bar, in rows; aggregated bars are this times their occupancy.
ROW_HEIGHT = 0.8
#: Height of a transfer segment, in rows (drawn under the task bars).
TRANSFER_HEIGHT = 0.3
#: Height of an activity segment, in rows (drawn over the middle of the task bar).
ACTIVITY_HEIGHT = 0.3
#: The least height of a worker's row, in pixels; the frame is at least ``FRAME_PX``.
ROW_PX = 32
FRAME_PX = 150
#: Pixels of a figure outside its frame and legend: title, toolbar, time axis
#: (79 in Chromium; the legend's rows are added to the figure by ``add_legend``).
CHROME_PX = 80

FAILED_COLOR = "#d62728"
SEND_COLOR = "#9e9e9e"
RECEIVE_COLOR = "#e8544e"


def task_stream_height(rows: int) -> int:
    """Figure height (before the legend) giving each of ``rows`` rows ``ROW_PX``."""
    return CHROME_PX + max(FRAME_PX, ROW_PX * rows)


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

    >>> from localsched.diagnostics.collectors.records import TaskData
    >>> fig = plot_tasks([TaskData('a-1', (len, 'ab'), 5.0, 6.0, 2),
    ...                   TaskData('b-1', (len, 'c'), 5.5, 7.0, 1)], width=400)
    >>> data = fig.select_one({'name': 'tasks'}).data_source.data
    >>> data['row'].tolist(), data['right'].tolist(), data['task'], data['worker']
    ([1, 0], [1.0, 2.0], ["len('ab')", "len('c')"], ['worker 1', 'worker 0'])
    """
    table = TaskTable.of(results, failed, interrupted, transfers, activities)
    colors = group_colors(table.all_groups(), palette, ranking=list(table.group_seconds()))
    return draw_tasks(table, x_range, t0, colors, label_size, figure_kwargs)


def draw_tasks(table: TaskTable, x_range, t0, colors: dict[str, str], label_size: int,
               figure_kwargs: dict):
    """The task stream of a ``TaskTable`` (what ``plot_tasks`` and the pages call)."""
    t0 = origin(table, t0)
    n = len(table.start)
    row_of = table.worker_rows()
    names = [worker_label(w, row) for w, row in row_of.items()]
    rows = np.fromiter((row_of[w] for w in table.workers), dtype=np.int64, count=n)

    fixed = height_fixed(figure_kwargs)  # (the caller's height: the legend's room is in it)
    if not fixed:
        figure_kwargs = dict(figure_kwargs, height=task_stream_height(len(row_of)))
    fig = new_figure("Task stream", "Worker", x_range, figure_kwargs)
    if "y_range" not in figure_kwargs:
        fig.y_range = Range1d(-0.5, max(len(row_of), 1) - 0.5)
    fig.yaxis.ticker = list(range(len(row_of)))
    # Thread idents and pids are long and meaningless on an axis: rows are
    # numbered, and the hover says the same.
    fig.yaxis.major_label_overrides = dict(enumerate(names))
    fig.ygrid.grid_line_color = None

    bounds = table.bounds()
    px = seconds_per_pixel(x_range, bounds[1] - t0 if bounds else 0.0)
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

    point_hover(fig, renderers, _TASK_TOOLTIPS + [("tasks", "@count")])
    legend = _group_legend(fig, table, colors)
    add_legend(fig, legend + extra_legend, label_size, grow=not fixed)
    if not n and not table.failed and not table.interrupted:
        empty_message(fig, "No task finished", x_range, 0.0)
    return fig


def _group_legend(fig, table: TaskTable, colors: dict) -> list:
    """Legend items for the ``LEGEND_ITEMS`` groups with most time, then one
    "N other groups" item (of one invisible glyph per item: the legend then
    does not depend on which bars a group won)."""
    ranked = list(table.group_seconds())
    if not ranked:
        return []
    shown = ranked[:LEGEND_ITEMS]
    rest = len(ranked) - len(shown)
    labels = shown + ([f"{rest} other group{'s' if rest > 1 else ''}"] if rest else [])
    fills = [colors[g] for g in shown] + ([OTHER_COLORS[0]] if rest else [])
    nan = np.full(len(labels), np.nan)
    key = fig.hbar(y=nan, left=nan, right=nan, height=ROW_HEIGHT, fill_color=fills,
                   line_color=None, name="legend")
    return [(label, key, i) for i, label in enumerate(labels)]


def _transfer_legend(fig, renderer) -> list:
    colors = set(renderer.data_source.data["color"])
    items = []
    for label, color in (("sending inputs", SEND_COLOR), ("receiving result", RECEIVE_COLOR)):
        if color in colors:
            index = renderer.data_source.data["color"].index(color)
            items.append((label, renderer, index))
    return items


def _task_bars(table: TaskTable, rows: np.ndarray, t0: float, colors: dict[str, str]) -> dict:
    """One bar per task."""
    n = len(rows)
    return {
        "left": table.start - t0,
        "right": table.end - t0,
        "row": rows,
        "height": np.full(n, ROW_HEIGHT),
        "color": [colors[g] for g in table.groups],
        "key": [shown_text(key) for key in table.keys],
        "group": list(table.groups),
        "task": [short_repr(task) for task in table.tasks],
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
        "key": [shown_text(r.key) for r in failed],
        "group": groups_of(r.key for r in failed),
        "task": [short_repr(r.task) for r in failed],
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
        "key": [shown_text(r.key) for r in interrupted],
        "group": groups,
        "task": [short_repr(r.task) for r in interrupted],
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
    row_arr = np.asarray(rows, dtype=np.int64)
    kind_arr = np.asarray(kinds, dtype=np.int64)
    what = ("sending inputs", "receiving result")
    color = (SEND_COLOR, RECEIVE_COLOR)
    if len(left) <= AGGREGATE_ABOVE or px <= 0:
        return {
            "left": left, "right": right, "row": row_arr,
            "height": np.full(len(left), TRANSFER_HEIGHT),
            "color": [color[k] for k in kinds],
            "key": [shown_text(k) for k in keys],
            "group": [what[k] for k in kinds],
            "task": [""] * len(left),
            "status": [f"{what[k]}: {format_seconds(b - a)}"
                       for k, a, b in zip(kinds, lefts, rights, strict=False)],
            "count": np.ones(len(left), dtype=np.int64),
        }
    parts = []
    for k in (0, 1):
        mine = kind_arr == k
        bars = occupancy_bars(left[mine], right[mine], row_arr[mine], px, TRANSFER_HEIGHT)
        count = bars["count"]
        parts.append({
            **bars,
            "color": [color[k]] * len(count),
            "key": [f"{c} transfers" for c in count.tolist()],
            "group": [what[k]] * len(count),
            "task": [""] * len(count),
            "status": [f"{what[k]}: {format_seconds(b)} in {format_seconds(e)}"
                       for b, e in zip(bars["busy"].tolist(), bars["extent"].tolist(),
                                       strict=True)],
        })
    return {c: concat_columns([p[c] for p in parts]) for c in _COLUMNS}


def _activity_bars(activities: list, row_of: dict, t0: float, px: float) -> dict:
    """Thin segments for activities, one per record or, above
    ``AGGREGATE_ABOVE``, aggregated per activity like the task bars."""
    names = activity_order(r.activity for r in activities)
    colors = activity_colors(names)
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
            "key": [shown_text(r.key) for r in activities],
            "group": groups_of(r.key for r in activities),
            "task": [""] * len(left),
            "status": [f"{r.activity}: {format_seconds(r.stop - r.start)}" for r in activities],
            "count": np.ones(len(left), dtype=np.int64),
        }
    parts = []
    kind_arr = np.asarray(kinds, dtype=object)
    for name in names:
        mine = kind_arr == name
        bars = occupancy_bars(left[mine], right[mine], row[mine], px, ACTIVITY_HEIGHT)
        count = bars["count"]
        parts.append({
            **{c: bars[c] for c in ("left", "right", "row", "height", "count")},
            "color": [colors[name]] * len(count),
            "activity": [name] * len(count),
            "key": [f"{c} {name} segments" for c in count.tolist()],
            "group": [name] * len(count),
            "task": [""] * len(count),
            "status": [f"{name}: {format_seconds(b)} in {format_seconds(e)}"
                       for b, e in zip(bars["busy"].tolist(), bars["extent"].tolist(),
                                       strict=True)],
        })
    return {c: concat_columns([p[c] for p in parts]) for c in _COLUMNS + ("activity",)}


def concat_columns(parts: list):
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return [x for p in parts for x in p]


def _aggregated_bars(table: TaskTable, rows: np.ndarray, t0: float, px: float, colors) -> dict:
    """Bars a pixel wide or wider as they are; narrower ones by occupancy per
    pixel column (see ``occupancy_bars``): a row's painted area is exactly its
    busy time (a worker busy 0.2 s of 20 s looks nearly empty, one busy 20 s
    full).  Each such bar is coloured by the group with most time in it; its
    hover says how many tasks and which groups it covers."""
    names = sorted(set(table.groups))
    codes = group_codes(table.groups, names)
    bars = occupancy_bars(table.start - t0, table.end - t0, rows, px, ROW_HEIGHT, codes)
    keys, tasks, status, group, covers = [], [], [], [], []
    for members, weights, busy, extent in zip(bars["members"], bars["weights"],
                                              bars["busy"].tolist(), bars["extent"].tolist(),
                                              strict=True):
        first, last = int(members[0]), int(members[-1])
        group.append(names[weights[0][0]])
        if len(members) == 1:
            keys.append(shown_text(table.keys[first]))
            tasks.append(short_repr(table.tasks[first]))
            status.append(f"took {format_seconds(table.end[first] - table.start[first])}")
            covers.append(names[weights[0][0]])
            continue
        keys.append(f"{len(members)} tasks: {short_repr(table.keys[first], 40)} \u2026 "
                    f"{short_repr(table.keys[last], 40)}")
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

