"""What the findings' rules read, measured once per run: the scheduler kind,
workers, wall times, per-group task statistics, the fine metrics by
activity, the hand-off gaps and the idle time with nothing ready, and what
of those gaps and of the tasks' time was no scheduling nor work: waits for
a CPU (the load meter's run-queue wait: ``cpu_wait_share`` of the tasks,
at most ``gap_cpu_waits`` of the gaps) and, on threads, waits for the GIL
while another worker's Python held it (``gil_gaps``: gaps longer beside a
running task than alone).

Every number comes from the records; what a run did not record is None
or empty (an older JSON, dask's schedulers, a cluster without metrics).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from functools import cached_property
from itertools import accumulate

from ...utils import key_split
from ..reporting.summary import union_length
from .budget import disk_stall
from .critical import critical_path
from .graphs import computations
from .groups import group_stats, result_sizes
from .memory import memory_peak
from .replay import overhead_per_task, unlimited_makespan
from .usercode import started_by_libraries, user_functions

__all__ = ["Facts", "union_length", "GIL_FREE_SHARE", "GIL_FREE_LOOKS"]

#: A group the sampler looked at ``GIL_FREE_LOOKS`` times and found the GIL
#: held at fewer than ``GIL_FREE_SHARE`` of them leaves it free (NumPy, I/O):
#: gaps beside its tasks were no waits for the GIL (``Facts.gil_free``).
GIL_FREE_SHARE = 0.15
GIL_FREE_LOOKS = 20
#: Fewer looks leave it free too when they could hardly have found the GIL
#: held so seldom had the group's tasks held it at ``GIL_FREE_HELD`` of
#: them: less than ``GIL_FREE_CHANCE`` likely (19 looks, none held: 0.05 %;
#: 16 looks, 2 held: 7 %; 4 looks, none held: 20 %, too few to tell).
#: dask's ``map_overlap`` watched on threads, a 0.3 s run: its NumPy group
#: looked at 14-22 times, the GIL held at 0-2 of them (3 of 130 in all).
GIL_FREE_HELD = 1 / 3
GIL_FREE_CHANCE = 0.1


class Facts:
    """The measured facts of one ``RunData`` (computed on first use)."""

    def __init__(self, run):
        self.run = run

    @cached_property
    def comps(self) -> list | None:
        return computations(self.run)

    @cached_property
    def stats(self) -> dict:
        return group_stats(self.run.tasks)

    def size(self, group) -> float | None:
        """The median result size of ``group`` in bytes, if measured."""
        return result_sizes(self.run, group).get(group)

    @cached_property
    def peak(self):
        return memory_peak(self.run)

    @cached_property
    def busy(self) -> float:
        return sum(s.total for s in self.stats.values())

    @cached_property
    def workers(self) -> int:
        counts = [g.workers for g in self.run.graphs if g.workers]
        if counts:
            return max(counts)
        return max(1, len({r.worker_id for r in self.run.tasks}))

    @cached_property
    def kind(self) -> str:
        """``"cluster"``, ``"processes"``, ``"threads"`` or ``"sync"``."""
        run = self.run
        scheduler = str(run.meta.get("scheduler") or "")
        if scheduler in ("distributed", "cluster") or any(
                isinstance(r.worker_id, str) and "#" in r.worker_id for r in run.tasks[:100]):
            return "cluster"
        if scheduler in ("processes", "multiprocessing") or run.transfers or any(
                k[2] in ("deserialize", "start-up") for k in run.metrics):
            return "processes"
        if scheduler in ("sync", "single-threaded", "synchronous") or self.workers == 1:
            return "sync"
        return "threads"

    @cached_property
    def walls(self) -> list:
        """``(start, finish)`` of each computation."""
        if self.run.walls:
            return list(self.run.walls)
        return [(g.started, g.finished) for g in self.run.graphs]

    @cached_property
    def wall(self) -> float:
        """Seconds inside computations (overlaps once); tasks' span without walls."""
        if self.walls:
            return union_length(self.walls)
        bounds = [(r.start_time, r.end_time) for r in self.run.tasks]
        return max(b for _, b in bounds) - min(a for a, _ in bounds) if bounds else 0.0

    @cached_property
    def windows(self) -> list:
        """``(start, finish)`` of each run merged side by side
        (``meta["runs"]``; the last run's computations' end where its mark
        has no finish), [] for a single run: each is read in its own window,
        the time between them is nobody's."""
        marks = sorted((m for m in self.run.meta.get("runs") or [] if isinstance(m, dict)
                        and isinstance(m.get("start"), (int, float))),
                       key=lambda m: m["start"])
        if len(marks) < 2:
            return []
        starts = [float(m["start"]) for m in marks]
        ends: list = [[] for _ in marks]
        for a, b in self.walls:
            ends[max(0, bisect_right(starts, a) - 1)].append(b)
        out = []
        for m, start, mine in zip(marks, starts, ends, strict=True):
            finish = m.get("finish")
            if not isinstance(finish, (int, float)):
                finish = max(mine, default=start)
            out.append((start, max(start, float(finish))))
        return out

    @cached_property
    def block(self) -> float:
        """Seconds of the whole recording (``performance_report``'s block),
        else from the first computation's start to the last one's finish;
        for runs merged side by side, the sum of their own windows."""
        if self.windows:
            return sum(b - a for a, b in self.windows)
        meta = self.run.meta
        started, finished = meta.get("started"), meta.get("finished")
        if isinstance(started, (int, float)) and isinstance(finished, (int, float)) \
                and finished > started:
            return float(finished - started)
        if self.walls:
            return max(b for _, b in self.walls) - min(a for a, _ in self.walls)
        return self.wall

    @cached_property
    def caller(self) -> float:
        """Seconds of the recording before and between computations (the
        caller's own: building graphs, its other work), not after the last;
        for runs merged side by side, within each run (never between runs:
        ``windows``).  Only in a run whose code asked for two or more
        computations (``asked``): with one, the time before it and between
        it and those a library started inside the same call is that
        computation's graph being built -- nothing to fix."""
        if not self.windows:
            if _asked(self.walls, self.run.graphs) < 2:
                return 0.0
            return self._caller(self.walls, self.run.meta.get("started"), self.run.graphs)
        starts = [a for a, _b in self.windows]
        walls: list = [[] for _ in starts]
        graphs: list = [[] for _ in starts]
        for w in self.walls:
            walls[max(0, bisect_right(starts, w[0]) - 1)].append(w)
        for g in self.run.graphs:
            graphs[max(0, bisect_right(starts, g.started) - 1)].append(g)
        return sum(self._caller(w, start, g) for w, start, g
                   in zip(walls, starts, graphs, strict=True) if _asked(w, g) > 1)

    @cached_property
    def asked(self) -> int:
        """How many computations the user's code asked for: all of them
        but those a library started inside a call made for another
        (``usercode.started_by_libraries``, from the callers' stacks)."""
        return _asked(self.walls, self.run.graphs)

    @staticmethod
    def _caller(walls: list, started, graphs: list) -> float:
        """``caller`` over computations ``walls`` (and their ``graphs``) of a
        recording from ``started``."""
        walls = sorted(walls)
        if not walls:
            return 0.0
        # (a computation's own preparation -- compiling and ordering its graph,
        # before start_state -- is the scheduler's time, not the caller's)
        walls = sorted(walls + [(g.submitted, g.started) for g in graphs
                                if g.submitted is not None and g.submitted <= g.started])
        first = walls[0][0]
        before = first - started if isinstance(started, (int, float)) and started < first \
            else 0.0
        last = max(b for _, b in walls)
        return max(0.0, before + (last - first) - union_length(walls))

    @cached_property
    def overheads(self) -> list:
        """Per computation (as ``comps``): ``(hand-off gaps, seconds its graph
        was prepared, seconds its tasks' inputs and results travelled)``; the
        gaps without the workers' wait while a memory budget spilled or read
        back (``budget.disk_stall``: the ``spill`` finding's matter)."""
        prepared = {g.started: g.started - g.submitted for g in self.run.graphs
                    if g.submitted is not None and g.submitted <= g.started}
        # (by the computation whose window holds it: sorted once, a window's
        # total is two lookups in the running sum)
        travel = sorted((t.start_time, max(0.0, t.send) + max(0.0, t.receive))
                        for t in self.run.transfers)
        at = [t for t, _ in travel]
        total = [0.0, *accumulate(v for _, v in travel)]
        out = []
        for comp in self.comps or ():
            moved = total[bisect_right(at, comp.finished)] - total[bisect_left(at, comp.started)]
            gaps = max(0.0, comp.handoffs[0] - disk_stall(self.run, comp))
            out.append((gaps, prepared.get(comp.started, 0.0), moved))
        return out

    @cached_property
    def preparation(self) -> float:
        """Seconds the scheduler spent preparing graphs (compiling, ordering)
        before their computations started, while the workers waited."""
        return sum(g.started - g.submitted for g in self.run.graphs
                   if g.submitted is not None and g.submitted <= g.started)

    @cached_property
    def worker_seconds(self) -> float:
        return self.wall * self.workers

    def metric(self, activity: str, unit: str = "seconds") -> dict:
        """``{group: value}`` of one fine-metrics activity."""
        out: dict = {}
        for (_span, group, act, u), v in self.run.metrics.items():
            if act == activity and u == unit:
                out[group] = out.get(group, 0.0) + float(v)
        return out

    @cached_property
    def user_code(self) -> dict:
        """``{group: "function (file:line)"}``: the user's code each group
        ran, from the sampler's stacks (``usercode``)."""
        return user_functions(self.run.samples)

    @cached_property
    def critical(self):
        return critical_path(self.run, self.comps)

    @cached_property
    def chain_bound(self) -> tuple:
        """``(seconds the longest chain needs with its hand-offs, seconds from
        the first task's start to the last one's end)``, summed over the
        computations: what no number of workers can shorten, and what it bounds."""
        bound = span = 0.0
        for comp in self.comps or ():
            if comp.keys:
                bound += unlimited_makespan(comp, overhead_per_task(comp))
                span += max(comp.ends) - min(comp.starts)
        return bound, span

    @cached_property
    def handoff_gaps(self) -> float:
        """Worker-seconds between a task's end and its worker's next task
        when that task was ready already: scheduling and hand-offs."""
        return sum(comp.handoffs[0] for comp in self.comps or ())

    @cached_property
    def cpu_wait(self) -> float | None:
        """Seconds the run's threads (and its worker processes') waited for
        a CPU (``meta["load"]["cpu_wait"]``: Linux's run-queue wait), None
        where not measured."""
        load = self.run.meta.get("load")
        wait = load.get("cpu_wait") if isinstance(load, dict) else None
        return float(wait) if isinstance(wait, (int, float)) and wait >= 0 else None

    @cached_property
    def cpu_wait_share(self) -> float:
        """The share of the tasks' and hand-offs' time spent waiting for a
        CPU (0 where not measured): a thread waits for one only when it
        could run, so the wait is spread over that time."""
        wait = self.cpu_wait
        if not wait:
            return 0.0
        return min(1.0, wait / max(self.busy + self.handoff_gaps, 1e-9))

    @cached_property
    def gap_cpu_waits(self) -> list:
        """Per computation (as ``comps``): the most worker-seconds of its
        hand-off gaps that can have been waits for a CPU -- its share of
        the run's measured wait (by its tasks' and gaps' time), times its
        workers, at most its gaps (none where not measured).  Between two
        tasks a worker runs the scheduler's Python: it waits for a CPU
        itself (counted in the wait), or sleeps (not counted) while what
        every worker needs waits for one -- on threads the GIL's holder, on
        processes the parent's thread that hands out the tasks -- which
        holds back every worker at once: a wait holds up at most as many
        workers as there are."""
        comps = self.comps or ()
        wait = self.cpu_wait
        if not wait:
            return [0.0 for _ in comps]
        spans = [sum(c.durations) + c.handoffs[0] for c in comps]
        total = sum(spans)
        return [min(c.handoffs[0], wait * span / total * c.worker_count()) if total > 0
                else 0.0 for c, span in zip(comps, spans, strict=True)]

    def cpu_waited(self, group) -> float:
        """Seconds ``group``'s tasks waited for a CPU, of the run's measured
        wait (0 where not measured): by their share of the threads' CPU time
        where fine metrics took it (a thread waits for a CPU in proportion
        to the CPU it wants: a fair scheduler serves each demand alike;
        waiting for the GIL or for I/O it wants none), else of their time."""
        wait = self.cpu_wait
        stats = self.stats.get(group)
        if not wait or stats is None:
            return 0.0
        cpu = self.metric("thread-cpu")
        spent = sum(cpu.values())
        if group in cpu and spent > 0:
            noncpu = self.metric("thread-noncpu").get(group, 0.0)
            return min(noncpu, wait * cpu[group] / spent)
        return self.cpu_wait_share * stats.total

    @cached_property
    def gil_gaps(self) -> list:
        """Per computation (as ``comps``): ``(seconds, {group: seconds})``
        of its hand-off gaps that were waits for the GIL (``_gil_gaps``),
        by the group whose tasks ran on other workers meanwhile; on threads
        only (else nothing)."""
        comps = self.comps or ()
        if self.kind != "threads" or self.workers < 2:
            return [(0.0, {}) for _ in comps]
        groups = {g for g, s in self.stats.items() if s.total >= 0.1 * self.busy}
        cpu = self.metric("thread-cpu")
        held_by = {g: min(1.0, cpu[g] / s.total) for g, s in self.stats.items()
                   if g in cpu and s.total > 0}
        held_by.update((g, 0.0) for g in self.gil_free)
        group_of = {k: g for g, s in self.stats.items() for k in s.keys}
        found = [_gil_gaps(comp, groups - self.gil_free, held_by, group_of) for comp in comps]
        # (a thread waiting for the GIL sleeps: no more than the threads slept)
        total = sum(t for t, _ in found)
        slept = self.slept
        if slept is None or total <= slept:
            return found
        scale = slept / total
        return [(t * scale, {g: v * scale for g, v in by.items()}) for t, by in found]

    @cached_property
    def gil_looks(self) -> dict:
        """``{group: (looks, contended)}``: how often the sampler looked at
        a group's tasks, and at how many of those looks it waited for the
        GIL (``meta["gil_waits"]``; malformed entries left out)."""
        waits = self.run.meta.get("gil_waits")
        out = {}
        for g, w in (waits.items() if isinstance(waits, dict) else ()):
            try:
                out[g] = (float(w[0]), float(w[1]))
            except (TypeError, ValueError, IndexError):
                continue
        return out

    @cached_property
    def gil_free(self) -> set:
        """The groups whose tasks left the GIL free: the sampler looked at
        them ``GIL_FREE_LOOKS`` (20) times and waited for the GIL at fewer
        than ``GIL_FREE_SHARE`` (15 %) of its looks (``meta["gil_waits"]``);
        or fewer times, each wait for the GIL so rare that tasks holding it
        at a third of the looks would show more (``_seldom_held``).  A short
        run looks at a NumPy group a dozen times, not twenty."""
        out = set()
        for g, (looks, contended) in self.gil_looks.items():
            if looks >= GIL_FREE_LOOKS:
                if contended < GIL_FREE_SHARE * looks:
                    out.add(g)
            elif _seldom_held(looks, contended):
                out.add(g)
        return out

    @cached_property
    def slept(self) -> float | None:
        """Worker-seconds the run's threads neither ran nor waited for a CPU
        (the workers over the recording, less this process's CPU and its
        threads' waits for a CPU: ``meta["load"]``), None where not measured:
        the most they can have waited for the GIL."""
        load = self.run.meta.get("load")
        wait = self.cpu_wait
        if wait is None or not isinstance(load, dict):
            return None
        try:
            seconds, own = float(load["seconds"]), float(load["own_cpu"])
        except (KeyError, TypeError, ValueError):
            return None
        return max(0.0, self.workers * seconds - own - wait)

    @cached_property
    def starved(self) -> tuple:
        """``(worker-seconds idle with no task ready, {group: seconds its
        tasks ran during that time})``: over each computation, the time a
        worker had nothing to run because fewer tasks were ready or running
        than there were workers."""
        import numpy as np

        idle_total = 0.0
        by_group: dict = {}
        for comp in self.comps or ():
            n = comp.worker_count()
            if not comp.keys or n < 2:
                continue
            ready = np.asarray(comp.ready)
            ends = np.asarray(comp.ends)
            starts = np.asarray(comp.starts)
            times = np.concatenate([ready, ends, [comp.started, comp.finished]])
            steps = np.concatenate([np.ones(len(ready)), -np.ones(len(ends)), [0, 0]])
            order = np.lexsort((-steps, times))
            times, runnable = times[order], np.cumsum(steps[order])
            lengths = np.diff(times)
            short = np.maximum(0.0, n - runnable[:-1])
            idle = short * lengths
            idle_total += float(idle.sum())
            # (time at which fewer tasks were runnable than workers: a cumulative
            # curve, so each task's overlap with it is two lookups)
            starving = np.where(short > 0, lengths, 0.0)
            cum = np.concatenate([[0.0], np.cumsum(starving)])
            overlap = np.interp(ends, times, cum) - np.interp(starts, times, cum)
            for key, seconds in zip(comp.keys, overlap.tolist(), strict=True):
                if seconds > 0:
                    g = key_split(key)
                    by_group[g] = by_group.get(g, 0.0) + seconds
        return idle_total, dict(sorted(by_group.items(), key=lambda kv: -kv[1]))


def _covered(starts, ends, weights):
    """``(times, cumulative)``: the intervals' weights summed, at most 1, as
    a cumulative curve over time (a window's share: two lookups)."""
    import numpy as np

    times = np.concatenate([starts, ends])
    order = np.argsort(times, kind="stable")
    steps = np.concatenate([weights, -weights])[order]
    times = times[order]
    level = np.clip(np.cumsum(steps), 0.0, 1.0)
    return times, np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])


def _codes(values: list) -> tuple:
    """``({value: code}, codes)``: each value as a small integer (numpy)."""
    import numpy as np

    ids = {v: i for i, v in enumerate(dict.fromkeys(values))}
    return ids, np.fromiter(map(ids.__getitem__, values), dtype=np.int64, count=len(values))


def _seldom_held(looks: float, contended: float) -> bool:
    """Whether ``contended`` or fewer of ``looks`` (under
    ``GIL_FREE_LOOKS``) finding the GIL held is less than
    ``GIL_FREE_CHANCE`` likely for tasks holding it at ``GIL_FREE_HELD`` of
    the looks (the binomial distribution's tail)."""
    if not (0 < looks < GIL_FREE_LOOKS and 0 <= contended <= looks):
        return False  # (a saved run's malformed counts among them)
    n, p = int(looks), GIL_FREE_HELD
    chance = sum(math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(int(contended) + 1))
    return chance < GIL_FREE_CHANCE


def _gil_gaps(comp, groups: set, held_by: dict, group_of: dict) -> tuple:
    """``(seconds, {group: seconds})``: in ``comp``'s hand-off gaps (a
    worker's wait between a task and its next one, ready already), the
    time other workers ran tasks beyond what a hand-off takes when no task
    runs beside it (the median such gap; else the tenth percentile of all
    gaps).  On threads a worker between tasks needs the GIL: a task of
    Python code beside it holds that worker back, one that releases the GIL
    (NumPy, I/O) does not, and its gaps stay as short as the scheduler
    makes them.  Each task beside a gap counts by its group's ``held_by``
    share: the share of its time on CPU (a task waiting for a CPU holds the
    GIL without running: that wait is the CPU's), none where the sampler
    found the GIL free (``Facts.gil_free``).  By group (``group_of``: each
    key's): the gaps' share beside each of ``groups``."""
    import numpy as np

    n = len(comp.keys)
    if n < 2:
        return 0.0, {}
    starts = np.asarray(comp.starts, dtype=float)
    ends = np.asarray(comp.ends, dtype=float)
    workers = _codes(comp.worker_ids)[1]
    ready = np.asarray(comp.ready, dtype=float)
    order = np.lexsort((starts, workers))
    a, b = order[:-1], order[1:]
    same = (workers[a] == workers[b]) & (ready[b] <= ends[a]) & (starts[b] > ends[a])
    lo, hi = ends[a][same], starts[b][same]
    if not len(lo):
        return 0.0, {}
    # (a gap's own worker runs nothing during it: what covers it ran elsewhere)
    ids, which = _codes(list(map(group_of.get, comp.keys)))
    weights = np.array([held_by.get(g, 1.0) for g in ids], dtype=float)[which]
    if not weights.any():
        return 0.0, {}
    times, cum = _covered(starts, ends, weights)
    beside = np.interp(hi, times, cum) - np.interp(lo, times, cum)
    length = hi - lo
    alone = length[beside <= 1e-9]
    usual = float(np.median(alone)) if len(alone) >= 10 else float(np.percentile(length, 10))
    held = np.clip(np.minimum(beside, length - usual), 0.0, None)
    total = float(held.sum())
    by_group: dict = {}
    if total > 0:
        share = np.divide(held, beside, out=np.zeros_like(held), where=beside > 0)
        for g in groups & ids.keys():
            mine = which == ids[g]
            if mine.any():
                t, c = _covered(starts[mine], ends[mine], weights[mine])
                part = (np.interp(hi, t, c) - np.interp(lo, t, c)) * share
                by_group[g] = float(part.sum())
    return total, by_group


def _asked(walls: list, graphs: list) -> int:
    """``Facts.asked`` of one run's computations ``walls`` and ``graphs``."""
    return len(walls) - started_by_libraries([getattr(g, "stack", None) for g in graphs])
