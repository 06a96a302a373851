"""Memory at the peak: the bytes of results held, and by which task groups.

A result is held from its task's end until the end of the task that
released it (the ``CacheData`` records: sizes measured where the result
lives -- in the worker, on a cluster by the cluster -- and lifetimes from
the keys each task's end freed).  The held total steps up at each
``cache_time`` and down at each ``free_time``; at equal times the steps up
come first, since a task stores its result before it releases its inputs.
The peak is the largest total (the first, if it recurs); ``by_group`` is
what each task group (dask's ``key_split``) held then, most first.

Under a memory budget (``RunData.budgets``) a result is not held while it
is on disk: from the end of its ``disk-write`` to the end of the
``disk-read`` that brought it back (or its release, if none did).

Only runs whose cache metric is bytes (``performance_report``,
``CacheProfiler(metric="nbytes")``) have sizes: any other run gives None,
"not measured".

>>> from localsched.diagnostics.collectors.records import CacheData
>>> from localsched.diagnostics.runs.rundata import RunData
>>> run = RunData(cache=[CacheData(('x-1', 0), None, 100, 0.0, 2.0),
...                      CacheData(('x-1', 1), None, 100, 1.0, 3.0),
...                      CacheData('total-2', None, 8, 3.0, 4.0)], cache_metric='bytes')
>>> memory_peak(run)
MemoryPeak(time=1.0, bytes=200.0, by_group={'x': 200.0})
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ...run.budget_record import DISK_READ, DISK_WRITE
from ..reporting.naming import groups_of

__all__ = ["MemoryPeak", "memory_peak", "held_over_time", "lifetimes", "BYTE_METRICS"]

#: Cache metrics that are sizes in bytes.
BYTE_METRICS = ("bytes", "nbytes")


class MemoryPeak(NamedTuple):
    """``time`` (epoch seconds), ``bytes`` held then, ``by_group``: group -> bytes."""

    time: float
    bytes: float
    by_group: dict


def _on_disk(run) -> dict:
    """``{key: [(off, back), ...]}``: when each spilled result was on disk
    (``back`` infinite when it was never read back)."""
    off: dict = {}
    for budget in getattr(run, "budgets", None) or ():
        written: dict = {}
        for _start, end, activity, key, _n in sorted(budget.events, key=lambda e: e[0]):
            if activity == DISK_WRITE:
                written[key] = end
            elif activity == DISK_READ and key in written:
                off.setdefault(key, []).append((written.pop(key), end))
        for key, end in written.items():
            off.setdefault(key, []).append((end, math.inf))
    return off


def _in_memory(run, cache: list) -> list:
    """The cache records cut where a budget had their results on disk."""
    off = _on_disk(run)
    if not off:
        return cache
    out = []
    for r in cache:
        start = r.cache_time
        for a, b in sorted(off.get(r.key, ())):
            a, b = max(a, r.cache_time), min(b, r.free_time)
            if a >= b:
                continue
            if a > start:
                out.append(r._replace(cache_time=start, free_time=a))
            start = max(start, b)
        if start < r.free_time or start == r.cache_time:
            out.append(r._replace(cache_time=start))
    return out


def _columns(run):
    """``(records, size, enter, leave)``: sizes unknown (NaN) or not finite
    count 0; a result never freed (``free_time`` None, NaN or infinite) is
    held until the run's last moment (``run_end``)."""
    import numpy as np

    cache = [r for r in run.cache if r.metric is not None]
    n = len(cache)
    enter = np.fromiter((r.cache_time for r in cache), dtype=float, count=n)
    leave = np.fromiter((np.nan if r.free_time is None else r.free_time for r in cache),
                        dtype=float, count=n)
    never = ~np.isfinite(leave)
    if never.any():
        end = run_end(run, enter, leave[~never])
        cache = [r._replace(free_time=end) if gone else r
                 for r, gone in zip(cache, never.tolist(), strict=True)]
    cache = _in_memory(run, cache)  # (under a budget: not while on disk)
    n = len(cache)
    size = np.fromiter((r.metric for r in cache), dtype=float, count=n)
    size[~np.isfinite(size)] = 0.0
    enter = np.fromiter((r.cache_time for r in cache), dtype=float, count=n)
    leave = np.fromiter((r.free_time for r in cache), dtype=float, count=n)
    return cache, size, enter, np.maximum(leave, enter)


def run_end(run, enter, freed) -> float:
    """The last moment of the run's records (its results entering and being
    freed, its tasks' ends, its walls): when a never-freed result leaves."""
    ends = [float(enter.max())]
    if len(freed):
        ends.append(float(freed.max()))
    if run.tasks:
        ends.append(max(r.end_time for r in run.tasks))
    ends += [b for _, b in run.walls]
    return max(ends)


def lifetimes(run) -> list:
    """``(record, size, enter, leave)`` of each sized result, as the peak
    counts them (never freed: held to the run's end)."""
    cache, size, enter, leave = _columns(run)
    return list(zip(cache, size.tolist(), enter.tolist(), leave.tolist(), strict=True))


def _measured(run) -> bool:
    return run.cache_metric in BYTE_METRICS and bool(run.cache)


def memory_peak(run) -> MemoryPeak | None:
    """The peak of bytes held (see the module docstring), or None if not measured."""
    if not _measured(run):
        return None
    import numpy as np

    cache, size, enter, leave = _columns(run)
    if not cache:
        return None
    times = np.concatenate([enter, leave])
    steps = np.concatenate([size, -size])
    order = np.lexsort((-steps, times))  # by time; at one time, steps up first
    held = np.cumsum(steps[order])
    at = int(np.argmax(held))
    when = float(times[order][at])
    total = float(held[at])
    inside = np.flatnonzero((enter <= when) & (leave >= when) & (size > 0))
    by_group: dict = {}
    for i, g in zip(inside.tolist(), groups_of(cache[i].key for i in inside.tolist()),
                    strict=True):
        by_group[g] = by_group.get(g, 0.0) + float(size[i])
    by_group = dict(sorted(by_group.items(), key=lambda kv: (-kv[1], kv[0])))
    return MemoryPeak(when, total, by_group)


def held_over_time(run, points: int = 400, top: int = 8) -> tuple | None:
    """``(times, {group: bytes held at each time})`` for a stacked area: the
    ``top`` groups by their own peak, the rest summed as ``"other groups"``;
    ``times`` spans the records, ``points`` of them plus the run's peak and
    each change's moment where there are fewer changes than points.  None if
    not measured."""
    if not _measured(run):
        return None
    import numpy as np

    cache, size, enter, leave = _columns(run)
    if not cache:
        return None
    groups = groups_of(r.key for r in cache)
    lo, hi = float(enter.min()), float(leave.max())
    changes = np.unique(np.concatenate([enter, leave]))
    if len(changes) <= points:
        times = changes
    else:
        times = np.linspace(lo, hi, points)
    peak = memory_peak(run)
    if peak is not None:
        times = np.unique(np.append(times, peak.time))
    names = sorted(set(groups))
    code_of = {g: c for c, g in enumerate(names)}
    codes = np.fromiter((code_of[g] for g in groups), dtype=np.int64, count=len(groups))
    # (each group's records once, in one sort: linear however many groups)
    by_code = np.argsort(codes, kind="stable")
    cuts = np.searchsorted(codes[by_code], np.arange(len(names) + 1))
    steps = {}
    peaks: dict = {}
    for c, g in enumerate(names):
        mine = by_code[cuts[c]:cuts[c + 1]]
        t = np.concatenate([enter[mine], leave[mine]])
        s = np.concatenate([size[mine], -size[mine]])
        order = np.lexsort((-s, t))
        t, cum = t[order], np.cumsum(s[order])
        steps[g] = (t, cum)
        peaks[g] = max(0.0, float(cum.max())) if len(cum) else 0.0
    ranked = sorted(names, key=lambda g: (-peaks[g], g))

    def series(t, cum, at_peak) -> object:
        at = np.searchsorted(t, times, side="right") - 1  # (after every step up to then)
        values = np.where(at >= 0, cum[np.maximum(at, 0)], 0.0)
        if peak is not None:  # (at the peak: as memory_peak counts it, steps up first)
            values[times == peak.time] = at_peak
        return np.maximum(values, 0.0)

    out = {g: series(*steps[g], peak.by_group.get(g, 0.0) if peak else 0.0)
           for g in ranked[:top]}
    rest = ranked[top:]
    if rest:
        mine = np.concatenate([by_code[cuts[code_of[g]]:cuts[code_of[g] + 1]] for g in rest])
        t = np.concatenate([enter[mine], leave[mine]])
        s = np.concatenate([size[mine], -size[mine]])
        order = np.lexsort((-s, t))
        at_peak = sum(peak.by_group.get(g, 0.0) for g in rest) if peak else 0.0
        out["other groups"] = series(t[order], np.cumsum(s[order]), at_peak)
    return times, out
