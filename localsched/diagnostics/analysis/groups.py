"""Per task group: how many tasks, their seconds, their durations' median,
their results' sizes -- the numbers findings and comparisons start from.

Groups are dask's ``key_split`` names (``localsched.diagnostics.reporting.naming``),
so runs of the same code compare by group whatever the keys' tokens.

>>> from localsched.diagnostics.collectors.records import TaskData
>>> stats = group_stats([TaskData(('x-1', i), None, 0.0, 0.1 * (i + 1), 1) for i in range(3)])
>>> s = stats['x']; (s.tasks, round(s.total, 6), round(s.median, 6), round(s.longest, 6))
(3, 0.6, 0.2, 0.3)
"""

from __future__ import annotations

from typing import NamedTuple

from ..reporting.naming import groups_of

__all__ = ["GroupStats", "group_stats", "result_sizes"]


class GroupStats(NamedTuple):
    """One group's finished tasks: ``tasks`` (how many), ``total``/``median``/
    ``longest`` seconds, and ``durations`` (a numpy array) with their ``keys``."""

    tasks: int
    total: float
    median: float
    longest: float
    durations: object
    keys: list


def group_stats(tasks) -> dict:
    """``{group: GroupStats}`` of finished task records, most time first."""
    import numpy as np

    tasks = list(tasks)
    groups = groups_of(r.key for r in tasks)
    durations = np.fromiter((r.end_time - r.start_time for r in tasks), dtype=float,
                            count=len(tasks))
    members: dict = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = {}
    for g, idx in members.items():
        d = np.maximum(durations[idx], 0.0)
        out[g] = GroupStats(len(idx), float(d.sum()), float(np.median(d)), float(d.max()), d,
                            [tasks[i].key for i in idx])
    return dict(sorted(out.items(), key=lambda kv: (-kv[1].total, kv[0])))


def result_sizes(run, only=None) -> dict:
    """``{group: median result size in bytes}`` where sizes were measured
    (``only``: of that group alone)."""
    if run.cache_metric not in ("bytes", "nbytes"):
        return {}
    import numpy as np

    from ...utils import key_split

    members: dict = {}
    for r in run.cache:
        if r.metric is not None:
            g = key_split(r.key)
            if only is None or g == only:
                members.setdefault(g, []).append(float(r.metric))
    return {g: float(np.median(v)) for g, v in members.items()}
