"""The numbers behind the figures: records to arrays, and what a pixel shows.

NumPy, no bokeh: everything here can be checked without drawing (the
property tests in ``tests/diagnostics/reporting/test_aggregate.py`` do).

* ``TaskTable``, ``ResourceTable``, ``CacheTable``: a profiler's records as
  columns, built once and shared by the figures and the page (earliest
  time, groups, worker rows, seconds per group).
* ``occupancy_bars``: a browser cannot draw 100,000 glyphs quickly, and a
  standalone page holding all of them is large.  Intervals narrower than a
  pixel (``PIXELS`` pixels for the time span) are merged per worker row and
  pixel column into one bar whose *area* is their busy time; wider ones stay.
* ``step_max``: a step line with more steps than pixels keeps each pixel
  column's maximum, so a peak that lasted a microsecond still shows.
* ``cache_steps``: the level of a cache (sum of a metric over held results).
* ``metric_table``: the fine metrics summed per task group and activity.
* ``duration_bins``: the bins of a duration histogram, on a log scale.
* ``gapless_offsets``: how to shift runs recorded far apart in time so they
  sit side by side on one axis.

>>> bars = occupancy_bars(np.array([0.1, 0.5, 2.0]), np.array([0.2, 0.6, 5.0]),
...                       np.array([0, 0, 0]), 1.0, 0.8)
>>> bars['left'].tolist(), bars['right'].tolist(), bars['height'].round(3).tolist()
([0.0, 2.0], [1.0, 5.0], [0.16, 0.8])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..collectors.records import (
    ActivityData,
    CacheData,
    FailedTaskData,
    InterruptedTaskData,
    ResourceData,
    TaskData,
    TransferData,
)
from .naming import groups_of, worker_rows

__all__ = ["PIXELS", "AGGREGATE_ABOVE", "NO_GROUP", "METRIC_GROUPS", "ACTIVITY_ORDER",
           "TaskTable", "ResourceTable", "CacheTable", "float_array", "origin",
           "seconds_per_pixel", "group_codes", "occupancy_bars", "step_max", "cache_steps",
           "metric_table", "activity_order", "duration_bins", "gapless_offsets"]

#: Width in pixels the time span is assumed to be drawn at when deciding what
#: is "narrower than a pixel"; a little wider than a typical figure, so a
#: wide browser window still shows no seams.
PIXELS = 1000

#: Task streams with more tasks than this aggregate their sub-pixel bars;
#: smaller ones keep one bar per task, so zooming in shows every task.
AGGREGATE_ABOVE = 10_000

#: The fine metrics' activities in the order the stacked bars pile them up
#: (user labels follow, sorted).
ACTIVITY_ORDER = ("thread-cpu", "thread-noncpu", "deserialize", "serialize", "transfer",
                  "queued", "hand-off", "start-up", "idle", "scheduler", "compute", "disk-read",
                  "disk-write")


def activity_order(names: Iterable[str]) -> list[str]:
    """
    >>> activity_order(['mine', 'idle', 'thread-cpu'])
    ['thread-cpu', 'idle', 'mine']
    """
    names = set(names)
    return [n for n in ACTIVITY_ORDER if n in names] + sorted(names - set(ACTIVITY_ORDER))


def float_array(values: Sequence) -> np.ndarray:
    # None (e.g. a result still cached when profiling stopped) becomes NaN.
    return np.asarray(values, dtype=float)


@dataclass
class TaskTable:
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
           activities: Sequence[ActivityData] = ()) -> TaskTable:
        extra = (list(failed), list(interrupted), list(transfers), list(activities))
        if not results:
            empty = np.empty(0)
            return cls((), (), empty, empty, (), [], *extra)
        keys, tasks, start, end, workers = zip(*results, strict=False)
        return cls(keys, tasks, float_array(start), float_array(end), workers, groups_of(keys),
                   *extra)

    def all_groups(self) -> set:
        return set(self.groups) | set(groups_of(r.key for r in self.failed)) \
            | set(groups_of(r.key for r in self.interrupted))

    def worker_rows(self) -> dict:
        """``{worker id: row}`` over every kind of record (see ``naming.worker_rows``)."""
        ids = set(self.workers)
        for records in (self.failed, self.interrupted, self.transfers, self.activities):
            ids.update(r.worker_id for r in records)
        return worker_rows(ids)

    def group_seconds(self) -> dict:
        """``{group: seconds}`` of finished, failed and interrupted tasks, most first."""
        totals: dict = {}
        for group, d in zip(self.groups, (self.end - self.start).tolist(), strict=False):
            totals[group] = totals.get(group, 0.0) + d
        for r, group in zip(self.failed, groups_of(r.key for r in self.failed), strict=False):
            totals[group] = totals.get(group, 0.0) + max(r.end_time - r.start_time, 0.0)
        for r, group in zip(self.interrupted, groups_of(r.key for r in self.interrupted),
                            strict=True):
            totals[group] = totals.get(group, 0.0) + max(r.stop_time - r.start_time, 0.0)
        return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))

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
class ResourceTable:
    time: np.ndarray
    mem: np.ndarray
    cpu: np.ndarray

    @classmethod
    def of(cls, results: Sequence[ResourceData]) -> ResourceTable:
        if not results:
            empty = np.empty(0)
            return cls(empty, empty, empty)
        time, mem, cpu = zip(*results, strict=False)
        return cls(float_array(time), float_array(mem), float_array(cpu))

    def bounds(self) -> tuple[float, float] | None:
        return (self.time.min(), self.time.max()) if len(self.time) else None


@dataclass
class CacheTable:
    metric: np.ndarray
    cached: np.ndarray
    freed: np.ndarray
    groups: list[str]

    @classmethod
    def of(cls, results: Sequence[CacheData]) -> CacheTable:
        if not results:
            empty = np.empty(0)
            return cls(empty, empty, empty, [])
        keys, _, metric, cached, freed = zip(*results, strict=False)
        return cls(float_array(metric), float_array(cached), float_array(freed), groups_of(keys))

    def all_groups(self) -> set:
        return set(self.groups)

    def bounds(self) -> tuple[float, float] | None:
        if not len(self.cached):
            return None
        return (self.cached.min(), np.nanmax(np.r_[self.cached, self.freed]))


def origin(table, t0: float | None) -> float:
    if t0 is not None:
        return float(t0)
    bounds = table.bounds()
    return float(bounds[0]) if bounds else 0.0


def seconds_per_pixel(x_range, span: float) -> float:
    """Seconds per pixel: of the given numeric x range if any, else of ``span``."""
    start = getattr(x_range, "start", None)
    end = getattr(x_range, "end", None)
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end > start:
        span = end - start
    return span / PIXELS if span > 0 else 0.0


def group_codes(groups: list[str], names: list[str]) -> np.ndarray:
    """Position of each group in ``names``, as an int array."""
    index = {name: i for i, name in enumerate(names)}
    return np.fromiter((index[g] for g in groups), dtype=np.int64, count=len(groups))


def occupancy_bars(start: np.ndarray, end: np.ndarray, rows: np.ndarray, px: float,
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

    >>> bars = occupancy_bars(np.array([0.1, 0.5, 2.0]), np.array([0.2, 0.6, 5.0]),
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
        sorted_groups = groups[order]
        out["weights"] = _cell_weights(sorted_groups[entry_member], inverse, entry_busy,
                                       len(cells), int(groups.max(initial=0)) + 1)
        out["weights"] += [[(int(sorted_groups[i]), float(end[i] - start[i]), 1)] for i in big]
    return out


def _cell_weights(codes: np.ndarray, cell_of: np.ndarray, busy: np.ndarray, n_cells: int,
                  n_groups: int) -> list:
    """Per cell, ``[(group code, seconds, intervals), ...]`` most seconds first,
    from one entry per (interval part, cell): its group, cell and busy seconds."""
    pair = cell_of * n_groups + codes
    pairs, pair_inverse = np.unique(pair, return_inverse=True)
    seconds = np.bincount(pair_inverse, weights=busy, minlength=len(pairs))
    tasks = np.bincount(pair_inverse, minlength=len(pairs))
    rank = np.lexsort((-seconds, pairs // n_groups))
    weights: list = [[] for _ in range(n_cells)]
    for p in rank.tolist():
        weights[int(pairs[p] // n_groups)].append(
            (int(pairs[p] % n_groups), float(seconds[p]), int(tasks[p])))
    return weights


def step_max(time: np.ndarray, value: np.ndarray, px: float):
    """Resample a step function (``value[i]`` from ``time[i]`` on) to pixel columns.

    Each column holding steps becomes two points: its maximum from the column's
    start, and the level it leaves behind from the column's end (held through
    columns without steps).  Peaks are kept, whatever their width.

    >>> t, v = step_max(np.array([0.0, 0.1, 0.2, 2.5]), np.array([1.0, 5.0, 2.0, 0.0]), 1.0)
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


def cache_steps(cached: np.ndarray, freed: np.ndarray, metric: np.ndarray):
    """The step function ``sum(metric in cache)``: (times, level from each time on).

    Starts with a point at level 0, so the first rise is drawn.  At equal
    times, frees come first: handing memory over is no peak.
    """
    times = np.r_[cached, freed]
    deltas = np.r_[metric, -metric]
    order = np.lexsort((deltas, times))
    return np.r_[times[order[0]], times[order]], np.r_[0.0, np.cumsum(deltas[order])]


#: At most this many task groups get a bar of their own (the rest are summed).
METRIC_GROUPS = 16


#: Label of the worker time that belongs to no task: workers idle between or
#: outside tasks (waiting for work, handing results over, starting up) --
#: not a task group, so it is never ranked among them.
NO_GROUP = "(workers idle, outside tasks)"


def metric_table(metrics: Mapping, unit: str = "seconds") -> tuple[list, list, dict]:
    """Sum ``(span, group, activity, unit) -> value`` over spans, for one unit:
    (group labels, most first; activities in stacking order; {activity: values})."""
    sums: dict = {}
    for (_span, group, activity, u), value in metrics.items():
        if u != unit:
            continue
        label = NO_GROUP if group is None else str(group)
        per = sums.setdefault(label, {})
        per[activity] = per.get(activity, 0.0) + float(value)
    # (the time outside tasks is not ranked among the task groups: last)
    order = sorted(sums, key=lambda g: (g == NO_GROUP, -sum(sums[g].values()), g))
    idle = order[-1:] if NO_GROUP in sums else []
    order = order[:len(order) - len(idle)]
    if len(order) > METRIC_GROUPS:
        rest = order[METRIC_GROUPS - 1:]
        merged: dict = {}
        for g in rest:
            for a, v in sums[g].items():
                merged[a] = merged.get(a, 0.0) + v
        label = f"({len(rest)} other groups)"
        sums[label] = merged
        order = order[:METRIC_GROUPS - 1] + [label]
    order += idle
    activities = activity_order({a for per in sums.values() for a in per})
    columns = {a: [sums[g].get(a, 0.0) for g in order] for a in activities}
    return order, activities, columns



def duration_bins(values: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(counts, edges) of a histogram of durations on a log scale.

    Every panel of the report uses the same (log) axis type, so durations
    of any spread read alike.  Zero durations (a clock's resolution) count
    in the first bin; all-equal durations get one bar a factor of two wide.

    >>> counts, edges = duration_bins(np.array([0.001, 0.01, 0.1, 0.0]), 3)
    >>> counts.tolist(), bool(edges[0] <= 0.001 and edges[-1] >= 0.1)
    ([2, 1, 1], True)
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    positive = values[values > 0]
    if not len(positive):
        lo, hi = 1e-6, 2e-6
    else:
        lo, hi = float(positive.min()), float(positive.max())
    if hi <= lo * 1.0001:
        lo, hi = lo / 2 ** 0.5, hi * 2 ** 0.5
    edges = np.geomspace(lo, hi, bins + 1)
    counts, _ = np.histogram(np.clip(values, lo, hi), bins=edges)
    return counts, edges


def gapless_offsets(spans: Sequence[tuple[float, float]], gap: float) -> list[float]:
    """Seconds to add to each run's times so that runs ``(start, end)`` follow
    one another ``gap`` apart, in order of start, instead of hours apart.

    Runs that overlap in time stay where they are relative to each other.

    >>> gapless_offsets([(100.0, 110.0), (1000.0, 1005.0), (1001.0, 1002.0)], 1.0)
    [0.0, -889.0, -889.0]
    """
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    offsets = [0.0] * len(spans)
    shift, end = 0.0, None
    for i in order:
        start, stop = spans[i]
        if end is not None and start + shift > end + gap:
            shift = end + gap - start
        offsets[i] = shift
        end = stop + shift if end is None else max(end, stop + shift)
    return offsets
