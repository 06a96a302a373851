"""The numbers a person reads first, computed from plain task records.

``summarize`` needs neither bokeh nor numpy: ``Profiler.summary()`` works
wherever localsched does, and the HTML report shows the same object.

Definitions (all seconds):

* ``wall``: how long the computations took, from their ``start_state`` to
  their ``finish`` (overlapping computations counted once); without those
  times, from the earliest task start to the latest end.
* ``computations`` and ``span``: how many computations the walls are
  (0 when unknown), and the time from the first one's start to the last
  one's finish -- the length of the report's time axis, which also holds
  the gaps between computations (``wall <= span``).
* ``busy``: task execution summed over workers -- finished, failed and
  interrupted tasks alike (an interrupted one up to the stop).
* ``workers``: workers that ran at least one task.
* ``efficiency``: ``busy / (wall * workers)``; 1.0 means every worker
  computed all the time; None when there is nothing to divide by.

>>> from localsched.diagnostics.collectors.records import TaskData
>>> s = summarize([TaskData(('load-1a2b3c4d', 0), None, 0.0, 3.0, 1),
...                TaskData(('load-1a2b3c4d', 1), None, 0.0, 1.0, 2),
...                TaskData('total-9f8e7d6c', None, 3.0, 4.0, 1)])
>>> s.wall, s.tasks, s.workers, s.busy, s.efficiency
(4.0, 3, 2, 5.0, 0.625)
>>> [(g.name, g.count, g.total, g.mean, g.share) for g in s.groups]
[('load', 2, 4.0, 2.0, 0.8), ('total', 1, 1.0, 1.0, 0.2)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from ...system.termsafe import terminal_text
from .naming import format_seconds, groups_of, short_repr

__all__ = ["Summary", "GroupSummary", "summarize", "groups_of", "format_seconds", "short_repr",
           "union_length"]


@dataclass(frozen=True)
class GroupSummary:
    """One task group: tasks, total and mean seconds, share of all busy time (0..1)."""

    name: str
    count: int
    total: float
    mean: float
    share: float


@dataclass(frozen=True)
class Summary:
    """What a profile says at a glance; see the module docstring for the definitions.

    ``groups`` holds the ``top`` groups by total time, most first;
    ``other_groups`` counts the groups left out.  ``as_dict()`` gives plain
    dicts and lists (for JSON); ``str()`` and ``repr()`` a small table.
    """

    wall: float
    tasks: int
    failed: int
    interrupted: int
    workers: int
    busy: float
    efficiency: float | None
    groups: tuple
    other_groups: int = 0
    computations: int = 0
    span: float = 0.0
    #: a dask.distributed cluster's own dashboard (``client.dashboard_link``)
    dashboard: str | None = None

    def as_dict(self) -> dict:
        """The summary as plain dicts and lists."""
        return asdict(self)

    def lines(self) -> list:
        """The summary as lines of text (what ``str()`` joins)."""
        eff = "n/a" if self.efficiency is None else f"{self.efficiency:.0%}"
        out = [
            f"wall time {format_seconds(self.wall)}{self.spread()}, {self.tasks:,} tasks run, "
            f"{self.failed:,} failed, {self.interrupted:,} interrupted",
            f"{self.workers} worker{'s' if self.workers != 1 else ''}, "
            f"busy {format_seconds(self.busy)}, parallel efficiency {eff}",
        ]
        if self.dashboard:
            out.append(f"cluster dashboard {terminal_text(self.dashboard)}")
        if self.groups:  # (names escaped: the lines are for a terminal)
            names = [terminal_text(g.name) for g in self.groups]
            width = max(len("group"), *map(len, names))
            out.append(f"{'group':<{width}}  {'tasks':>9}  {'total':>9}  {'mean':>9}  share")
            for name, g in zip(names, self.groups, strict=True):
                out.append(f"{name:<{width}}  {g.count:>9,}  {format_seconds(g.total):>9}  "
                           f"{format_seconds(g.mean):>9}  {g.share:>5.0%}")
            if self.other_groups:
                out.append(f"({self.other_groups} more groups)")
        return out

    def spread(self) -> str:
        """' in 5 computations over 7.0 s' when the computations left gaps
        between them (the time axis is longer than the wall time), else ''."""
        if self.computations < 2 or self.span <= self.wall * 1.01:
            return ""
        return f" in {self.computations} computations over {format_seconds(self.span)}"

    def _repr_html_(self) -> str:
        """A notebook shows the summary as the report's table."""
        from .tables import summary_html

        return summary_html(self)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return "Summary(\n  " + "\n  ".join(self.lines()) + "\n)"


def union_length(intervals: Iterable) -> float:
    """Seconds covered by ``(start, stop)`` intervals, overlaps counted once.

    >>> union_length([(0, 2), (1, 3), (5, 6)])
    4.0
    """
    total = 0.0
    end = None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def summarize(results: Sequence, failed: Sequence = (), interrupted: Sequence = (),
              walls: Sequence | None = None, top: int = 10,
              dashboard: str | None = None) -> Summary:
    """A :class:`Summary` of task records.

    ``results`` are TaskData, ``failed`` FailedTaskData and ``interrupted``
    InterruptedTaskData; ``walls`` the ``(start, finish)`` epoch seconds of
    the computations (``Profiler.walls``), if known.
    """
    spans = [(r.key, r.start_time, r.end_time, r.worker_id)
             for records in (results, failed) for r in records]
    spans += [(r.key, r.start_time, r.stop_time, r.worker_id) for r in interrupted]
    span = 0.0
    if walls:
        wall = union_length(walls)
        span = max(b for _, b in walls) - min(a for a, _ in walls)
    elif spans:
        wall = max(s[2] for s in spans) - min(s[1] for s in spans)
    else:
        wall = 0.0
    totals: dict = {}
    counts: dict = {}
    busy = 0.0
    for (_key, start, end, _), group in zip(spans, groups_of(s[0] for s in spans), strict=False):
        d = max(end - start, 0.0)
        busy += d
        totals[group] = totals.get(group, 0.0) + d
        counts[group] = counts.get(group, 0) + 1
    workers = len({s[3] for s in spans if s[3] is not None})
    efficiency = busy / (wall * workers) if wall > 0 and workers else None
    ranked = sorted(totals, key=lambda g: (-totals[g], g))
    groups = tuple(
        GroupSummary(g, counts[g], totals[g], totals[g] / counts[g],
                     totals[g] / busy if busy > 0 else 0.0)
        for g in ranked[:top]
    )
    return Summary(wall=wall, tasks=len(results), failed=len(failed),
                   interrupted=len(interrupted), workers=workers, busy=busy,
                   efficiency=efficiency, groups=groups,
                   other_groups=max(len(ranked) - top, 0), dashboard=dashboard,
                   computations=len(walls or ()), span=max(span, wall))
