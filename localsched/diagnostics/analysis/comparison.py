"""Two runs of the same code, group by group: what got slower.

``compare(before, after)`` sums each task group's task seconds (dask's
``key_split`` names, so tokens don't matter) in both runs.  A group is a
*regression* when its seconds grew by more than ``rel`` (default 10 %) of
its seconds before **and** by more than ``min_seconds`` (default 50 ms):
small groups' noise and big groups' jitter both stay quiet.  A group new in
``after`` is a regression when its seconds exceed ``min_seconds``.  The wall
times are shown beside, not judged.

``localsched compare BEFORE.json AFTER.json`` prints ``Comparison.table()``
and exits 1 when there is a regression (``--threshold``, ``--min-seconds``);
the report of runs merged side by side shows the same table.

>>> from localsched.diagnostics.records import TaskData
>>> from localsched.diagnostics.rundata import RunData
>>> a = RunData(tasks=[TaskData(('load-1', i), None, 0.0, 0.2, 1) for i in range(5)])
>>> b = RunData(tasks=[TaskData(('load-2', i), None, 0.0, 0.6, 1) for i in range(5)])
>>> c = compare(a, b)
>>> [(r.group, round(r.before, 3), round(r.after, 3)) for r in c.regressions]
[('load', 1.0, 3.0)]
>>> compare(a, a).regressions
[]
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from ...termsafe import terminal_text
from ..naming import format_seconds, shorten
from ..summary import summarize
from .groups import group_stats

__all__ = ["GroupChange", "Comparison", "compare", "RunPart", "split_side_by_side",
           "REL_THRESHOLD", "MIN_SECONDS"]

#: A group regressed when its seconds grew by more than this share ...
REL_THRESHOLD = 0.10
#: ... and by more than this many seconds.
MIN_SECONDS = 0.05


class GroupChange(NamedTuple):
    """One group in both runs: task counts and summed task seconds."""

    group: str
    before_tasks: int
    after_tasks: int
    before: float
    after: float

    @property
    def change(self) -> float:
        return self.after - self.before

    @property
    def ratio(self) -> float | None:
        return self.after / self.before if self.before > 0 else None


class Comparison(NamedTuple):
    """Every group's change (biggest growth first), the regressions among
    them, the thresholds used and the two runs' wall times (None: unknown)."""

    groups: list
    regressions: list
    rel: float
    min_seconds: float
    wall_before: float | None
    wall_after: float | None

    def table(self, names: tuple = ("before", "after")) -> str:
        """The comparison as a plain-text table (what the command prints;
        names escaped for a terminal: ``termsafe``)."""
        names = tuple(terminal_text(n) for n in names)
        rows = [("group", f"tasks {names[0]}", f"tasks {names[1]}", names[0], names[1],
                 "change", "")]
        flagged = {r.group for r in self.regressions}
        if self.wall_before is not None and self.wall_after is not None:
            rows.append(("(wall time)", "", "", format_seconds(self.wall_before),
                         format_seconds(self.wall_after), _change(self.wall_before,
                                                                 self.wall_after), ""))
        for r in self.groups:
            rows.append((shorten(terminal_text(r.group), 40), str(r.before_tasks),
                         str(r.after_tasks),
                         format_seconds(r.before), format_seconds(r.after),
                         _change(r.before, r.after),
                         "REGRESSION" if r.group in flagged else ""))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                           for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
                 for row in rows]
        verdict = (f"{len(self.regressions)} regression(s): "
                   + ", ".join(terminal_text(r.group) for r in self.regressions)
                   if self.regressions
                   else "no regression")
        lines.append(f"{verdict} (threshold: +{self.rel:.0%} and "
                     f"+{format_seconds(self.min_seconds)})")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"groups": [r._asdict() for r in self.groups],
                "regressions": [r.group for r in self.regressions], "rel": self.rel,
                "min_seconds": self.min_seconds, "wall_before": self.wall_before,
                "wall_after": self.wall_after}


def _change(a: float, b: float) -> str:
    if a > 0:
        return f"{(b - a) / a:+.0%}"
    return "new" if b > 0 else ""


def compare(before, after, rel: float = REL_THRESHOLD,
            min_seconds: float = MIN_SECONDS) -> Comparison:
    """Compare two runs (``RunData``) group by group (module docstring)."""
    if rel < 0 or min_seconds < 0:
        raise ValueError("compare: thresholds must be >= 0")
    a, b = group_stats(before.tasks), group_stats(after.tasks)
    rows = []
    for g in dict.fromkeys([*a, *b]):
        sa, sb = a.get(g), b.get(g)
        rows.append(GroupChange(g, sa.tasks if sa else 0, sb.tasks if sb else 0,
                                sa.total if sa else 0.0, sb.total if sb else 0.0))
    rows.sort(key=lambda r: (-r.change, r.group))
    regressions = [r for r in rows if r.change > min_seconds
                   and r.after > r.before * (1 + rel)]
    return Comparison(rows, regressions, rel, min_seconds, _wall(before), _wall(after))


def _wall(run) -> float | None:
    if not run.tasks and not run.walls:
        return None
    return summarize(run.tasks, run.failed, run.interrupted, walls=run.walls or None).wall


class RunPart(NamedTuple):
    """One of the runs a side-by-side merge holds (what ``compare`` reads)."""

    name: str
    tasks: list
    failed: list
    interrupted: list
    walls: list


def split_side_by_side(run) -> list | None:
    """The runs merged by ``RunData.side_by_side`` (``meta["runs"]`` marks
    where each begins), each as a :class:`RunPart`; None for a single run."""
    marks = sorted(run.meta.get("runs") or [], key=lambda m: m["start"])
    if len(marks) < 2:
        return None
    starts = [float(m["start"]) for m in marks]
    parts = [RunPart(str(m.get("name", f"run {i + 1}")), [], [], [], [])
             for i, m in enumerate(marks)]

    def part(t: float) -> RunPart:
        return parts[max(0, bisect_right(starts, t) - 1)]

    for r in run.tasks:
        part(r.start_time).tasks.append(r)
    for r in run.failed:
        part(r.start_time).failed.append(r)
    for r in run.interrupted:
        part(r.start_time).interrupted.append(r)
    for w in run.walls:
        part(w[0]).walls.append(w)
    return parts
