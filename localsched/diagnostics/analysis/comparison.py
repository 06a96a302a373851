"""Runs of the same code, before and after a change: did it get slower?

``compare(before, after)`` judges, as totals (never per-task means: bigger
chunks make each task longer and the run faster), each task group's **CPU
seconds** (``thread-cpu``: waiting for a CPU is not in them; a group mostly
off the CPU, under ``OFF_CPU_SHARE`` (``BUSY_OFF_CPU_SHARE`` on a busy
machine, where threads wait for a CPU), is judged on its **task seconds**
where waits can be judged, and so is a run without fine metrics) and the
**wall time** (shown, not judged, with one run a side when either says
the machine was busy: other processes took over ``BUSY_CORES`` cores; with
repeats its bound then widens by its spread once more).

**At the same machine speed.**  On a shared or virtual machine the same
code burns up to twice the CPU seconds at one moment as at another (the
host's other tenants), so each run's seconds are first divided by its
*speed factor* against the first before-run (the ``machine`` column): the
ratio of the speed probe saved beside each run (``meta["speed"]``,
``collectors.machine_speed``: its timings while the run's tasks ran, where
its timeline has them) and that of the run's other groups, which ran at
the same moments -- their geometric mean where they agree, else the
probe's; a machine change only the probe sees leaves one run a side
inconclusive unless both factors agree on the verdict (``_Speeds``); with
repeats, the median of each side's factors (``_per_side``).

A measure regressed when **every** after-run exceeds **every** before-run
by more than ``rel`` and by more than ``min_seconds`` (the repeats' spread,
the noise, widens the bound by itself).  ``rel`` defaults to
``DEFAULT_REL`` (40 %) with one run a side, ``REPEATS_REL`` (10 %) with
repeats.  What the data cannot decide is **inconclusive** (``_judge``): with
the probe alone, growth within ``PROBE_BAND``; one run a side on a busy
machine, up to ``BUSY_SURE_REL`` (``SURE_REL`` without a probe).  A
faster run is never a regression, and a run that failed or ran nothing
never "no regression" (``Comparison``).

``localsched compare`` prints ``Comparison.table()`` and exits with
``status`` (0: no regression, 1: a regression or a failed run, 2: bad
input, 3: inconclusive); the report of runs merged side by side shows the
same comparison, each run against the first.

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
from ..collectors.machine_speed import speed_while
from ..reporting.naming import format_seconds, shorten
from ..reporting.summary import summarize
from .groups import group_stats

__all__ = ["GroupChange", "Comparison", "compare", "RunPart", "split_side_by_side",
           "DEFAULT_REL", "BUSY_REL", "REPEATS_REL", "SURE_REL", "MIN_SECONDS",
           "OFF_CPU_SHARE", "BUSY_OFF_CPU_SHARE", "BUSY_CORES", "DISAGREE", "PROBE_BAND",
           "REF_SECONDS", "INCONCLUSIVE", "PROBE_STEADY", "BUSY_SURE_REL", "cpu_by_group"]

#: A measure regressed when it grew by more than this share (one run a side,
#: at the reference's machine speed: ``benchmarks/README.md`` has the
#: spreads of identical reruns and of a doubled group, quiet and loaded) ...
DEFAULT_REL = 0.4
#: (kept for callers of the old name: a busy machine now brings the speed
#: probe, or an inconclusive verdict, not a wider bound)
BUSY_REL = DEFAULT_REL
#: ... or this one, beyond the spread of the repeats (several runs a side) ...
REPEATS_REL = 0.10
#: ... and by more than this many seconds.
MIN_SECONDS = 0.05
#: Busy, without the speed probe: growth beyond this share is a regression
#: all the same (the neighbours stretched identical reruns' CPU seconds by
#: up to 1.6x); between ``rel`` and it, inconclusive.
SURE_REL = 1.5
#: Busy, one run a side, at a measured machine speed: growth beyond this
#: share is a regression; between ``rel`` and it, inconclusive.  Beside a
#: bursty load the speed factor corrects a run's mean speed, not which
#: group the bursts hit: on CI one group of identical reruns read +46 % at
#: a speed the probe and the other group agreed on; doubled groups read
#: 1.62-2.74x beside loads here (``benchmarks/README.md``).
BUSY_SURE_REL = 0.9
#: A group on the CPU less than this share of its task seconds is judged on
#: those (it sleeps, reads, waits on locks) ...
OFF_CPU_SHARE = 0.25
#: ... or less than this one on a busy machine, where a CPU-bound group of
#: two threads measured 20-30 % beside three bursty processes (the rest
#: waiting for a CPU and the GIL: not its code's waits).
BUSY_OFF_CPU_SHARE = 0.05
#: Other processes' cores in use above which a single run's wall time is not judged.
BUSY_CORES = 0.5
#: The probe's and the other groups' speed factors agree within this ratio.
DISAGREE = 1.6
#: With the probe alone (no other group to agree with it), one run a side:
#: growth beyond ``rel`` times the first is inconclusive, beyond ``rel``
#: times the second a regression (and so for the wall time).
PROBE_BAND = (0.75, 1.75)
#: The probe's reading of a steady machine (identical quiet reruns' came
#: within this ratio): beyond it, and the other groups disagreeing, one run
#: a side is judged at both factors.
PROBE_STEADY = 1.3
#: What a speed factor rests on, weakest first.
BASES = ("none", "probe", "both")
#: A group is a speed reference for the others with this many CPU seconds a run.
REF_SECONDS = 0.01
#: The exit status of an inconclusive comparison.
INCONCLUSIVE = 3
#: (kept for callers of the old name)
REL_THRESHOLD = DEFAULT_REL


class GroupChange(NamedTuple):
    """One measure in both runs: a group's (or the wall time's) task counts,
    seconds (the least of the repeats, at the reference run's machine
    speed), what was measured (``"CPU"``, ``"task"``, ``"wall"``), the
    repeats' spread (None: one run) and ``machine``: how much slower the
    after-runs' machine was than the before-runs' (the speed factor; 1.0:
    the same or unknown)."""

    group: str
    before_tasks: int
    after_tasks: int
    before: float
    after: float
    measure: str = "task"
    noise: float | None = None
    machine: float = 1.0

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
    interrupted or empty runs; ``repeats``: runs per side;
    ``inconclusive``: the groups that grew beyond the bound on a busy
    machine the data cannot tell from the code (``doubted``: those whose
    speed factors disagree, one run a side; ``busy``: the other
    processes' cores, the most either run measured).

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
    inconclusive: list = []
    busy: float | None = None
    doubted: tuple = ()

    @property
    def status(self) -> int:
        """The exit status: 1 on a regression or a problem, 3
        (``INCONCLUSIVE``) when only an inconclusive growth is left, else 0."""
        if self.regressions or self.wall_regressed or self.problems:
            return 1
        return INCONCLUSIVE if self.inconclusive else 0

    def verdict(self) -> str:
        """One line: what was found, and the bound used."""
        if self.problems:
            head = "FAILED: " + "; ".join(terminal_text(p) for p in self.problems)
        elif self.regressions or self.wall_regressed:
            names = [terminal_text(r.group) for r in self.regressions]
            if self.wall_regressed:
                names.insert(0, "(wall time)")
            head = f"{len(names)} regression(s): " + ", ".join(names)
        elif self.inconclusive:
            busy = "" if self.busy is None or self.busy <= BUSY_CORES else \
                f"the machine was busy (other processes: {self.busy:.1f} cores); "
            why = ("at one of two machine speeds that disagree (the speed probe read a "
                   "change the other groups did not)"
                   if {r.group for r in self.inconclusive} & set(self.doubted) else
                   "but within what a busy machine makes of the same code, one run a side"
                   if busy else
                   "but within what the machine's changing speed can make of the same code")
            head = ("inconclusive: " + busy + ", ".join(terminal_text(r.group)
                                                         for r in self.inconclusive)
                    + f" grew beyond the threshold {why}; rerun with --repeats or on a "
                    "quieter machine")
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

    def cells(self, names: tuple = ("before", "after")) -> list:
        """The table's rows as text cells, the column names first (the
        wall time, then each group): what the command prints and the report
        of merged runs shows.  Names are as given (not escaped)."""
        rows = [("group", f"tasks {names[0]}", f"tasks {names[1]}", "measure", str(names[0]),
                 str(names[1]), "machine", "change", "noise", "")]
        flagged = {r.group for r in self.regressions}
        moved = {r.group for r in self.grown}
        unsure = {r.group for r in self.inconclusive}
        if self.wall is not None:
            w = self.wall
            rows.append(("(wall time)", "", "", "wall", format_seconds(w.before),
                         format_seconds(w.after), _machine(w.machine),
                         _change(w.before, w.after), _noise(w.noise),
                         "REGRESSION" if self.wall_regressed else self.wall_note))
        for r in self.groups:
            mark = ("REGRESSION" if r.group in flagged else "inconclusive" if r.group in unsure
                    else "moved" if r.group in moved else "")
            rows.append((str(r.group), str(r.before_tasks), str(r.after_tasks), r.measure,
                         format_seconds(r.before), format_seconds(r.after),
                         _machine(r.machine), _change(r.before, r.after), _noise(r.noise),
                         mark))
        return rows

    def machine_note(self, names: tuple = ("before", "after")) -> str:
        """What the ``machine`` column means, when a speed factor was applied ("" if none)."""
        if not any(r.machine != 1.0 for r in [*self.groups, *([self.wall] if self.wall else [])]):
            return ""
        return (f"(seconds at {names[0]}'s machine speed; 'machine': how much slower "
                f"{names[1]}'s was, by the speed probe and the other groups)")

    def table(self, names: tuple = ("before", "after")) -> str:
        """The comparison as a plain-text table (what the command prints;
        names escaped for a terminal: ``termsafe``)."""
        names = tuple(terminal_text(n) for n in names)
        rows = [(shorten(terminal_text(row[0]), 40), *row[1:])
                for row in self.cells(names)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                           for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
                 for row in rows]
        note = self.machine_note(names)
        if note:
            lines.append(note)
        lines.append(self.verdict())
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"groups": [r._asdict() for r in self.groups],
                "regressions": [r.group for r in self.regressions], "rel": self.rel,
                "min_seconds": self.min_seconds, "wall_before": self.wall_before,
                "wall_after": self.wall_after, "wall_regressed": self.wall_regressed,
                "faster": self.faster, "problems": list(self.problems),
                "inconclusive": [r.group for r in self.inconclusive],
                "status": self.status}


def _change(a: float, b: float) -> str:
    if a > 0:
        return f"{(b - a) / a:+.0%}"
    return "new" if b > 0 else ""


def _noise(noise: float | None) -> str:
    return "" if noise is None else f"±{noise / 2:.0%}"


def _machine(factor: float) -> str:
    return "" if factor == 1.0 else f"{factor - 1:+.0%}"


class _Side:
    """One side's runs, measured: walls, per-group (tasks, task s, CPU s|None),
    the speed probe's seconds (None: not recorded)."""

    def __init__(self, runs: list):
        self.runs = runs
        self.walls: list = [_wall(r) for r in runs]
        self.groups: list = []
        for r in runs:
            cpu = cpu_by_group(r)
            self.groups.append({g: (s.tasks, s.total, cpu.get(g) if cpu else None)
                                for g, s in group_stats(r.tasks).items()})
        self.failed = sum(len(r.failed) for r in runs)
        self.interrupted = sum(len(r.interrupted) for r in runs)
        self.empty = sum(1 for r in runs if not r.tasks and not r.failed)
        self.busy = [_others_cores(r) for r in runs]
        self.exits = [s for s in (_header(r).get("status") for r in runs)
                      if isinstance(s, int) and s]
        self.speed = [_probe(r) for r in runs]


class _Speeds:
    """Speed factors of every run against the reference run (the first
    before-run).  Two signals: the speed probe's ratio, and the weighted
    median of the run's other groups' CPU ratios (they ran at the same
    moments).  Agreeing within ``DISAGREE``, the factor is their geometric
    mean: half of a change in the other groups' own code cannot make a
    group look slower.  Disagreeing, the other groups' code changed or the
    probe misread (readings were seen 1.7-2.4x off): the probe counts, but
    where it reads a machine changed beyond ``PROBE_STEADY``, with one run a
    side a change must hold at the groups' factor too.  Without a
    probe the other groups may only excuse (a factor above 1), never accuse.
    Task seconds of a group that waits, and the wall time, take the factor
    to the power of their share on the CPU."""

    def __init__(self, b: _Side, a: _Side):
        self.runs = [*b.groups, *a.groups]
        probes = [*b.speed, *a.speed]
        ref = probes[0]
        self.probe = [p[1] / ref[1] if p is not None and ref is not None and p[0] == ref[0]
                      else None for p in probes]

    def cross(self, i: int, leave_out: str | None) -> float | None:
        """The weighted median of run ``i``'s other groups' CPU ratios to the
        reference run's (None: no group to compare with)."""
        ref, run = self.runs[0], self.runs[i]
        pairs = sorted((e[2] / r[2], r[2]) for g, r in ref.items()
                       if g != leave_out and (e := run.get(g)) is not None
                       and r[2] is not None and e[2] is not None
                       and min(r[2], e[2]) >= REF_SECONDS)
        half, acc = sum(w for _, w in pairs) / 2, 0.0
        for ratio, weight in pairs:
            acc += weight
            if acc >= half:
                return ratio
        return None

    def factor(self, i: int, group: str | None, share: float) -> tuple:
        """Run ``i``'s speed factor for ``group`` (None: the run as a whole,
        against all its groups), to the power ``share`` (its share on the
        CPU); what it rests on: ``"both"`` (the probe and the other groups
        agree), ``"probe"`` or ``"none"``; and the other groups' factor
        where they deny a machine change the probe reads (else the factor
        again): with one run a side a verdict must hold at both."""
        probe = self.probe[i]
        cross = self.cross(i, group) if i else None
        agree = probe is not None and cross is not None \
            and max(probe, cross) <= DISAGREE * min(probe, cross)
        basis = "none"
        if group is None:  # (the wall: the probe's factor; the groups' only as the other)
            f, basis = (1.0, "none") if probe is None else (probe, "probe")
        elif probe is not None and cross is not None and agree:
            f, basis = (probe * cross) ** 0.5, "both"
        elif probe is not None:
            f, basis = probe, "probe"
        else:  # (without a probe the other groups excuse, never accuse)
            f = max(1.0, cross) if cross is not None else 1.0
        # (a machine changed well beyond a steady one's that only the probe
        # sees: one reading was seen 2.4x off, and a change of the other
        # groups' code looks the same -- with one run a side, both count)
        doubted = probe is not None and cross is not None and not agree \
            and max(probe, 1 / probe) > PROBE_STEADY
        other = cross if doubted and cross is not None else f
        power = min(1.0, max(0.0, share))
        return f ** power, basis, other ** power


def compare(before, after, rel: float | None = None,
            min_seconds: float = MIN_SECONDS) -> Comparison:
    """Compare runs (a ``RunData`` or a list of repeats a side; module docstring)."""
    b, a = _Side(_listed(before)), _Side(_listed(after))
    repeats = (len(b.runs), len(a.runs))
    loads = [c for c in b.busy + a.busy if c is not None]
    busy = bool(loads) and max(loads) > BUSY_CORES
    if rel is None:
        rel = REPEATS_REL if repeats != (1, 1) else DEFAULT_REL
    if rel < 0 or min_seconds < 0:
        raise ValueError("compare: thresholds must be >= 0")
    waits = repeats != (1, 1) or not busy
    speeds = _Speeds(b, a)
    rows, values = [], {}
    for g in dict.fromkeys([g for side in (b, a) for run in side.groups for g in run]):
        row, values[g] = _group_row(g, b, a, waits, speeds,
                                    BUSY_OFF_CPU_SHARE if busy else OFF_CPU_SHARE)
        rows.append(row)
    rows.sort(key=lambda r: (-r.change, r.group))
    verdicts = {g: _judge(v, rel, min_seconds, busy, repeats != (1, 1))
                for g, v in values.items()}
    grew = [r for r in rows if verdicts[r.group] == "regression"]
    inconclusive = [r for r in rows if verdicts[r.group] == "inconclusive"]
    wall, judged, note, walls = _wall_row(b, a, waits, speeds)
    wall_rel = rel if repeats != (1, 1) else rel * PROBE_BAND[1]
    if busy and wall is not None and wall.noise:  # (the neighbours' noise, once more)
        wall_rel += wall.noise
    wall_regressed = judged and wall is not None and all(
        _beyond(after, before, wall_rel, min_seconds) for before, after in walls)
    faster = wall is not None and not wall_regressed and (
        (judged and all(_beyond(before, after, rel, min_seconds) for before, after in walls))
        or (max(a.walls) < min(b.walls)
            and sum(r.after for r in rows) <= sum(r.before for r in rows)))
    grown: list = []
    if faster:
        grown, grew, inconclusive = grew + inconclusive, [], []
    return Comparison(rows, grew, rel, min_seconds,
                      None if wall is None else wall.before,
                      None if wall is None else wall.after, wall, wall_regressed, note,
                      faster, grown, _problems(b, a), repeats, inconclusive,
                      max(loads) if loads else None,
                      tuple(g for g, v in values.items()
                            if repeats == (1, 1) and v[3] != (v[0], v[1])))


def _listed(runs) -> list:
    many = isinstance(runs, list) or isinstance(runs, tuple) and not hasattr(runs, "_fields")
    runs = list(runs) if many else [runs]  # (a RunPart is one run)
    if not runs:
        raise ValueError("compare: no run on one side")
    return runs


def _group_row(g: str, b: _Side, a: _Side, waits: bool, speeds: _Speeds,
               off_cpu: float) -> tuple:
    """The group's row, and its seconds in each run of either side (at the
    reference's machine speed; 0.0 where it is absent); ``waits``: time off
    the CPU can be judged (quiet or repeated), below the share ``off_cpu``."""
    entries = [run.get(g) for side in (b, a) for run in side.groups]
    present = [e for e in entries if e is not None]
    measure = "CPU" if present and all(e[2] is not None for e in present) else "task"
    ref = [e for e in (run.get(g) for run in b.groups) if e is not None]
    share = 1.0
    if measure == "CPU" and waits:
        if ref and sum(e[2] for e in ref) < off_cpu * sum(e[1] for e in ref):
            measure = "task"  # (mostly off the CPU: sleeping, I/O, locks)
    if measure == "task":  # (the share of its seconds on the CPU, where known)
        known = [e for e in ref if e[2] is not None]
        total = sum(e[1] for e in known)
        share = sum(e[2] for e in known) / total if known and total > 0 else 0.0
    n = len(b.groups)
    found = [speeds.factor(i, g, share) for i in range(len(entries))]
    factors, bases = _per_side([f[0] for f in found], n), [f[1] for f in found]
    seconds = [0.0 if e is None else (e[2] if measure == "CPU" else e[1]) for e in entries]
    values = [s / f for s, f in zip(seconds, factors, strict=True)]
    others = [s / f for s, f in zip(seconds, _per_side([f[2] for f in found], n), strict=True)]
    vb, va = values[:n], values[n:]
    tb = max((run[g][0] for run in b.groups if g in run), default=0)
    ta = max((run[g][0] for run in a.groups if g in run), default=0)
    machine = _geomean(factors[n:]) / _geomean(factors[:n])
    basis = "none" if measure != "CPU" else min(bases[1:], key=BASES.index, default="none")
    return GroupChange(g, tb, ta, min(vb), min(va), measure, _spread(vb, va),
                       round(machine, 6)), (vb, va, basis, (others[:n], others[n:]))


def _per_side(factors: list, n: int) -> list:
    """Each run's speed factor, or with repeats its side's median (the
    first ``n``: the before-runs): one probe reading 2x off (its thread on
    a core the tasks were not) can neither hide nor fake a change."""
    out = []
    for side in (factors[:n], factors[n:]):
        ranked = sorted(side)
        mid = len(ranked) // 2
        median = ranked[mid] if len(ranked) % 2 else (ranked[mid - 1] * ranked[mid]) ** 0.5
        out += side if len(side) == 1 else [median] * len(side)
    return out


def _geomean(values: list) -> float:
    product = 1.0
    for v in values:
        product *= v
    return product ** (1 / len(values))


def _spread(vb: list, va: list) -> float | None:
    """The largest relative spread of one side's repeats (None: one run a side)."""
    spreads = [(max(v) - min(v)) / min(v) for v in (vb, va) if len(v) > 1 and min(v) > 0]
    return max(spreads) if spreads else (None if len(vb) == len(va) == 1 else 0.0)


def _beyond(higher: list, lower: list, rel: float, min_seconds: float) -> bool:
    """Every value of ``higher`` exceeds every one of ``lower`` by more than the bound."""
    lo, hi = min(higher), max(lower)
    return lo > hi * (1 + rel) and lo - hi > min_seconds


def _judge(values: tuple, rel: float, min_seconds: float, busy: bool,
           repeated: bool) -> str | None:
    """``"regression"``, ``"inconclusive"`` or None for a group's seconds
    ``(before-runs, after-runs, basis, the same at the other groups' speed
    factors)``: the bounds a speed factor's basis allows; with one run a
    side a regression must hold at both factors, and growth at either is
    inconclusive (module docstring)."""
    basis = values[2]
    if repeated or basis == "both":
        low, high = rel, rel
    elif basis == "probe":
        low, high = rel * PROBE_BAND[0], rel * PROBE_BAND[1]
    else:
        low, high = rel, (max(rel, SURE_REL) if busy else rel)
    if busy and not repeated:  # (where the bursts hit which group: only repeats tell)
        high = max(high, BUSY_SURE_REL)
    if _beyond_or_new(values, high, min_seconds) \
            and (repeated or _beyond_or_new(values[3], high, min_seconds)):
        return "regression"
    return "inconclusive" if _beyond_or_new(values, low, min_seconds) or (
        not repeated and _beyond_or_new(values[3], low, min_seconds)) else None


def _beyond_or_new(values: tuple, rel: float, min_seconds: float) -> bool:
    """The after-runs' ``values[1]`` exceed the before-runs' ``values[0]``
    beyond the bound, or the group is new and exceeds ``min_seconds``."""
    vb, va = values[:2]
    if max(vb) <= 0:  # new in after
        return min(va) > min_seconds
    return _beyond(va, vb, rel, min_seconds)


def _wall_row(b: _Side, a: _Side, waits: bool, speeds: _Speeds) -> tuple:
    """(the wall row or None, judged, why not judged, [(before walls, after
    walls)] at the reference's machine speed: the probe's ratio to the power
    of the run's share of task seconds on the CPU; with one run a side also
    at the other groups' where they disagree: a change must hold at both)."""
    if any(w is None for w in b.walls + a.walls):
        return None, False, "", None
    found = []
    for i, run in enumerate([*b.groups, *a.groups]):
        known = [e for e in run.values() if e[2] is not None]
        total = sum(e[1] for e in known)
        share = sum(e[2] for e in known) / total if known and total > 0 else 0.0
        found.append(speeds.factor(i, None, share))
    n = len(b.walls)
    factors = _per_side([f[0] for f in found], n)
    walls = [w / f for w, f in zip(b.walls + a.walls, factors, strict=True)]
    row = GroupChange("(wall time)", 0, 0, min(walls[:n]), min(walls[n:]), "wall",
                      _spread(walls[:n], walls[n:]),
                      round(_geomean(factors[n:]) / _geomean(factors[:n]), 6))
    judged = [(walls[:n], walls[n:])]
    if n == len(a.walls) == 1:  # (one run a side: a change must hold at the groups' factor too)
        judged.append((walls[:1], [a.walls[0] / found[1][2]]))
    if not waits:
        return row, False, "not judged: machine busy", judged
    return row, True, "", judged


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


def cpu_by_group(run) -> dict:
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


def _probe(run) -> tuple | None:
    """``(probe name, seconds)`` of the run's speed probe (``meta["speed"]``):
    its timings while the run's tasks ran where its timeline has them (the
    rest of the recording ran at other moments), else its mean; or None."""
    speed = (getattr(run, "meta", None) or {}).get("speed")
    if not isinstance(speed, dict):
        return None
    seconds = speed_while(speed, _task_spans(run))
    if seconds is None:
        seconds = speed.get("seconds")
    if not isinstance(seconds, (int, float)) or not 0 < seconds < float("inf"):
        return None
    return str(speed.get("probe")), float(seconds)


def _task_spans(run) -> list:
    """When the run's tasks ran: their (start, end) merged, sorted."""
    spans = sorted([(r.start_time, r.end_time) for r in [*run.tasks, *run.failed]]
                   + [(r.start_time, r.stop_time) for r in run.interrupted])
    out: list = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _header(run) -> dict:
    header = (getattr(run, "meta", None) or {}).get("header")
    return header if isinstance(header, dict) else {}


class RunPart(NamedTuple):
    """One of the runs a side-by-side merge holds (what ``compare`` reads):
    its records, and from its mark its CPU seconds per group (``metrics``,
    as ``thread-cpu``), its header and speed probe (``meta``)."""

    name: str
    tasks: list
    failed: list
    interrupted: list
    walls: list
    metrics: dict
    meta: dict


def split_side_by_side(run) -> list | None:
    """The runs merged by ``RunData.side_by_side`` (``meta["runs"]`` marks
    where each begins, and what ``compare`` reads of each run that the merge
    sums: CPU seconds per group, the header, the speed probe), each as a
    :class:`RunPart`; None for a single run."""
    marks = sorted((m for m in run.meta.get("runs") or [] if isinstance(m, dict)),
                   key=lambda m: m["start"])
    if len(marks) < 2:
        return None
    starts = [float(m["start"]) for m in marks]
    parts = [RunPart(str(m.get("name", f"run {i + 1}")), [], [], [], [], _part_cpu(m),
                     {k: m[k] for k in ("header", "speed") if isinstance(m.get(k), dict)})
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


def _part_cpu(mark: dict) -> dict:
    """A merged run's CPU seconds per group (its mark's ``cpu``) as fine metrics."""
    cpu = mark.get("cpu")
    if not isinstance(cpu, dict):
        return {}
    return {((), str(g), "thread-cpu", "seconds"): float(v) for g, v in cpu.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}
