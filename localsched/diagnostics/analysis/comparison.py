"""Runs of the same code, before and after a change: did it get slower?

``compare(before, after)`` judges what a change can make slower, as totals
(never per-task means: bigger chunks make each task longer and the run
faster):

- each task group's **CPU seconds** (the fine metrics' ``thread-cpu``,
  summed) -- what the group's code burns, which a busy machine barely
  moves.  A group that spends most of its time off the CPU (less than
  ``OFF_CPU_SHARE`` of its task seconds on it in the reference: sleeping,
  I/O, locks) is judged on its **task seconds** (summed durations) instead
  where waits can be judged -- with repeats, or one run a side on a quiet
  machine (below); a run without fine metrics always is.  Groups are dask's
  ``key_split`` names, so tokens don't matter;
- the **wall time** of the run(s) -- unless, with one run a side, either run
  says the machine was busy (``meta["header"]["load"]``: other processes
  took more than ``BUSY_CORES`` cores): a wall time then measures the
  neighbours and is shown, not judged.

``before`` and ``after`` are a ``RunData`` each, or lists of them:
*repeats* of the same code.  A measure regressed when **every** after-run
exceeds **every** before-run by more than ``rel`` and by more than
``min_seconds``: the spread of the repeats (the noise, shown) widens the
bound by itself.  ``rel`` defaults to ``DEFAULT_REL`` (50 %) with one run a
side -- ``BUSY_REL`` (70 %) when either says the machine was busy: CPU
seconds too stretch on a crowded machine -- and to ``REPEATS_REL`` (10 %)
with repeats.  A group new in ``after`` regressed when it exceeds
``min_seconds``.

A faster run is never a regression, and a run that failed or ran nothing
is never "no regression" (:class:`Comparison`).

``localsched compare [--repeats N] BEFORE... AFTER...`` prints
``Comparison.table()`` and exits with ``status`` (0: no regression, 1: a
regression or a failed run, 2: a file that cannot be read); the report of
runs merged side by side shows the same comparison, each run against the
first (task seconds: the merged fine metrics are not split by run).

>>> from localsched.diagnostics.collectors.records import TaskData
>>> from localsched.diagnostics.runs.rundata import RunData
>>> a = RunData(tasks=[TaskData(('load-1', i), None, 0.0, 0.2, 1) for i in range(5)])
>>> b = RunData(tasks=[TaskData(('load-2', i), None, 0.0, 0.6, 1) for i in range(5)])
>>> c = compare(a, b)
>>> [(r.group, round(r.before, 3), round(r.after, 3)) for r in c.regressions], c.status
([('load', 1.0, 3.0)], 1)
>>> compare(a, a).regressions, compare(a, a).status
([], 0)
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from ...system.termsafe import terminal_text
from ..reporting.naming import format_seconds, shorten
from ..reporting.summary import summarize
from .groups import group_stats

__all__ = ["GroupChange", "Comparison", "compare", "RunPart", "split_side_by_side",
           "DEFAULT_REL", "BUSY_REL", "REPEATS_REL", "MIN_SECONDS", "OFF_CPU_SHARE", "BUSY_CORES"]

#: A measure regressed when it grew by more than this share (one run a side:
#: the CPU seconds of identical 0.3 s reruns measured up to 30 % apart on a
#: quiet 2-core machine; a doubling is +100 %) ...
DEFAULT_REL = 0.5
#: ... or this one when either run says the machine was busy (CPU seconds
#: of identical reruns measured 35 % apart at a load average of 9 on 2 cores,
#: and 62 % apart beside two CPU hogs in a whole-suite run with other work) ...
BUSY_REL = 0.7
#: ... or this one, beyond the spread of the repeats (several runs a side) ...
REPEATS_REL = 0.10
#: ... and by more than this many seconds.
MIN_SECONDS = 0.05
#: A group on the CPU less than this share of its task seconds is judged on those.
OFF_CPU_SHARE = 0.25
#: Other processes' cores in use above which a single run's wall time is not judged.
BUSY_CORES = 0.5
#: (kept for callers of the old name)
REL_THRESHOLD = DEFAULT_REL


class GroupChange(NamedTuple):
    """One measure in both runs: a group's (or the wall time's) task counts,
    seconds (the least of the repeats), what was measured (``"CPU"``,
    ``"task"``, ``"wall"``) and the repeats' spread (None: one run)."""

    group: str
    before_tasks: int
    after_tasks: int
    before: float
    after: float
    measure: str = "task"
    noise: float | None = None

    @property
    def change(self) -> float:
        return self.after - self.before

    @property
    def ratio(self) -> float | None:
        return self.after / self.before if self.before > 0 else None


class Comparison(NamedTuple):
    """Every group's change (biggest growth first) and the regressions among
    them; the thresholds; the wall times (None: unknown); ``wall``: the wall
    time as a ``GroupChange`` (None: unknown) and whether it was judged
    (``wall_note`` says why not) and regressed; ``faster``: the after-run
    was faster (its grown groups are not regressions); ``problems``: failed,
    interrupted or empty runs; ``repeats``: runs per side.

    A *faster* run is never a regression: when the wall time fell beyond the
    bound (where it is judged), or fell while the CPU (task) seconds of all
    groups did not grow, the groups that grew are shown as moved work.  A run
    with failed or interrupted tasks, or one that ran no task, is never "no
    regression" either: ``problems`` says why, and ``status`` is 1.
    """

    groups: list
    regressions: list
    rel: float
    min_seconds: float
    wall_before: float | None
    wall_after: float | None
    wall: GroupChange | None = None
    wall_regressed: bool = False
    wall_note: str = ""
    faster: bool = False
    grown: list = []
    problems: list = []
    repeats: tuple = (1, 1)

    @property
    def status(self) -> int:
        """The exit status: 1 on a regression or a problem, else 0."""
        return 1 if self.regressions or self.wall_regressed or self.problems else 0

    def verdict(self) -> str:
        """One line: what was found, and the bound used."""
        if self.problems:
            head = "FAILED: " + "; ".join(terminal_text(p) for p in self.problems)
        elif self.regressions or self.wall_regressed:
            names = [terminal_text(r.group) for r in self.regressions]
            if self.wall_regressed:
                names.insert(0, "(wall time)")
            head = f"{len(names)} regression(s): " + ", ".join(names)
        elif self.faster:
            head = "no regression: the after-run is faster"
            if self.grown:
                head += " (work moved into " + ", ".join(terminal_text(r.group)
                                                         for r in self.grown) + ")"
        else:
            head = "no regression"
        noise = "" if self.repeats == (1, 1) else \
            f", beyond the noise of {self.repeats[0]} and {self.repeats[1]} repeats"
        return (f"{head} (threshold: +{self.rel:.0%} and "
                f"+{format_seconds(self.min_seconds)}{noise})")

    def table(self, names: tuple = ("before", "after")) -> str:
        """The comparison as a plain-text table (what the command prints;
        names escaped for a terminal: ``termsafe``)."""
        names = tuple(terminal_text(n) for n in names)
        rows = [("group", f"tasks {names[0]}", f"tasks {names[1]}", "measure", names[0],
                 names[1], "change", "noise", "")]
        flagged = {r.group for r in self.regressions}
        moved = {r.group for r in self.grown}
        if self.wall is not None:
            w = self.wall
            rows.append(("(wall time)", "", "", "wall", format_seconds(w.before),
                         format_seconds(w.after), _change(w.before, w.after), _noise(w.noise),
                         "REGRESSION" if self.wall_regressed else self.wall_note))
        for r in self.groups:
            mark = "REGRESSION" if r.group in flagged else "moved" if r.group in moved else ""
            rows.append((shorten(terminal_text(r.group), 40), str(r.before_tasks),
                         str(r.after_tasks),
                         r.measure, format_seconds(r.before), format_seconds(r.after),
                         _change(r.before, r.after), _noise(r.noise), mark))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                           for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
                 for row in rows]
        lines.append(self.verdict())
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"groups": [r._asdict() for r in self.groups],
                "regressions": [r.group for r in self.regressions], "rel": self.rel,
                "min_seconds": self.min_seconds, "wall_before": self.wall_before,
                "wall_after": self.wall_after, "wall_regressed": self.wall_regressed,
                "faster": self.faster, "problems": list(self.problems),
                "status": self.status}


def _change(a: float, b: float) -> str:
    if a > 0:
        return f"{(b - a) / a:+.0%}"
    return "new" if b > 0 else ""


def _noise(noise: float | None) -> str:
    return "" if noise is None else f"±{noise / 2:.0%}"


class _Side:
    """One side's runs, measured: walls, per-group (tasks, task s, CPU s|None)."""

    def __init__(self, runs: list):
        self.runs = runs
        self.walls: list = [_wall(r) for r in runs]
        self.groups: list = []
        for r in runs:
            cpu = _cpu_by_group(r)
            self.groups.append({g: (s.tasks, s.total, cpu.get(g) if cpu else None)
                                for g, s in group_stats(r.tasks).items()})
        self.failed = sum(len(r.failed) for r in runs)
        self.interrupted = sum(len(r.interrupted) for r in runs)
        self.empty = sum(1 for r in runs if not r.tasks and not r.failed)
        self.busy = [_others_cores(r) for r in runs]
        self.exits = [s for s in (_header(r).get("status") for r in runs)
                      if isinstance(s, int) and s]


def compare(before, after, rel: float | None = None,
            min_seconds: float = MIN_SECONDS) -> Comparison:
    """Compare runs (a ``RunData`` or a list of repeats a side; module docstring)."""
    b, a = _Side(_listed(before)), _Side(_listed(after))
    repeats = (len(b.runs), len(a.runs))
    busy = any(c is not None and c > BUSY_CORES for c in b.busy + a.busy)
    if rel is None:
        rel = REPEATS_REL if repeats != (1, 1) else BUSY_REL if busy else DEFAULT_REL
    if rel < 0 or min_seconds < 0:
        raise ValueError("compare: thresholds must be >= 0")
    waits = repeats != (1, 1) or not busy
    rows = [_group_row(g, b, a, waits) for g in dict.fromkeys(
        [g for side in (b, a) for run in side.groups for g in run])]
    rows.sort(key=lambda r: (-r.change, r.group))
    regressions = [r for r in rows if _slower(r, b, a, rel, min_seconds)]
    wall, judged, note = _wall_row(b, a, waits)
    wall_regressed = judged and wall is not None and \
        _beyond(a.walls, b.walls, rel, min_seconds)
    faster = wall is not None and not wall_regressed and (
        (judged and _beyond(b.walls, a.walls, rel, min_seconds))
        or (max(a.walls) < min(b.walls)
            and sum(r.after for r in rows) <= sum(r.before for r in rows)))
    grown: list = []
    if faster:
        grown, regressions = regressions, []
    return Comparison(rows, regressions, rel, min_seconds,
                      None if wall is None else wall.before,
                      None if wall is None else wall.after, wall, wall_regressed, note,
                      faster, grown, _problems(b, a), repeats)


def _listed(runs) -> list:
    many = isinstance(runs, list) or isinstance(runs, tuple) and not hasattr(runs, "_fields")
    runs = list(runs) if many else [runs]  # (a RunPart is one run)
    if not runs:
        raise ValueError("compare: no run on one side")
    return runs


def _values(side: _Side, group: str, measure: str) -> list:
    """The group's seconds in each run of the side (0.0 where it is absent)."""
    out = []
    for run in side.groups:
        entry = run.get(group)
        if entry is None:
            out.append(0.0)
        else:
            out.append(entry[2] if measure == "CPU" else entry[1])
    return out


def _group_row(g: str, b: _Side, a: _Side, waits: bool) -> GroupChange:
    """The group's row; ``waits``: time off the CPU can be judged (quiet or repeated)."""
    entries = [run.get(g) for side in (b, a) for run in side.groups]
    present = [e for e in entries if e is not None]
    measure = "CPU" if present and all(e[2] is not None for e in present) else "task"
    if measure == "CPU" and waits:
        ref = [e for e in (run.get(g) for run in b.groups) if e is not None]
        if ref and sum(e[2] for e in ref) < OFF_CPU_SHARE * sum(e[1] for e in ref):
            measure = "task"  # (mostly off the CPU: sleeping, I/O, locks)
    vb, va = _values(b, g, measure), _values(a, g, measure)
    tb = max((run[g][0] for run in b.groups if g in run), default=0)
    ta = max((run[g][0] for run in a.groups if g in run), default=0)
    return GroupChange(g, tb, ta, min(vb), min(va), measure, _spread(vb, va))


def _spread(vb: list, va: list) -> float | None:
    """The largest relative spread of one side's repeats (None: one run a side)."""
    spreads = [(max(v) - min(v)) / min(v) for v in (vb, va) if len(v) > 1 and min(v) > 0]
    return max(spreads) if spreads else (None if len(vb) == len(va) == 1 else 0.0)


def _beyond(higher: list, lower: list, rel: float, min_seconds: float) -> bool:
    """Every value of ``higher`` exceeds every one of ``lower`` by more than the bound."""
    lo, hi = min(higher), max(lower)
    return lo > hi * (1 + rel) and lo - hi > min_seconds


def _slower(r: GroupChange, b: _Side, a: _Side, rel: float, min_seconds: float) -> bool:
    vb, va = _values(b, r.group, r.measure), _values(a, r.group, r.measure)
    if max(vb) <= 0:  # new in after
        return min(va) > min_seconds
    return _beyond(va, vb, rel, min_seconds)


def _wall_row(b: _Side, a: _Side, waits: bool) -> tuple:
    """(the wall row or None, judged, why not judged)."""
    if any(w is None for w in b.walls + a.walls):
        return None, False, ""
    row = GroupChange("(wall time)", 0, 0, min(b.walls), min(a.walls), "wall",
                      _spread(b.walls, a.walls))
    if not waits:
        return row, False, "not judged: machine busy"
    return row, True, ""


def _problems(b: _Side, a: _Side) -> list:
    out = []
    for side, name in ((a, "after"), (b, "before")):
        if side.failed:
            out.append(f"{side.failed} task(s) failed in the {name}-run")
        if side.interrupted:
            out.append(f"{side.interrupted} task(s) interrupted in the {name}-run")
        if side.empty:
            out.append(f"the {name}-run ran no task")
        if side.exits:
            out.append(f"the {name}-run's script exited with status {side.exits[0]}")
    return out


def _wall(run) -> float | None:
    if not run.tasks and not run.walls:
        return None
    return summarize(run.tasks, run.failed, run.interrupted, walls=run.walls or None).wall


def _cpu_by_group(run) -> dict:
    """``{group: CPU seconds}`` from the fine metrics ({} without them)."""
    out: dict = {}
    for (_span, group, activity, unit), value in (getattr(run, "metrics", None) or {}).items():
        if activity == "thread-cpu" and unit == "seconds" and group is not None:
            out[group] = out.get(group, 0.0) + float(value)
    return out


def _others_cores(run) -> float | None:
    """Cores other processes used during the run (its header's load), or None."""
    load = _header(run).get("load") or {}
    value = load.get("others_cores") if isinstance(load, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def _header(run) -> dict:
    header = (getattr(run, "meta", None) or {}).get("header")
    return header if isinstance(header, dict) else {}


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
