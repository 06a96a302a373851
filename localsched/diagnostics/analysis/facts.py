"""What the findings' rules read, measured once per run: the scheduler kind,
workers, wall times, per-group task statistics, the fine metrics by
activity, the hand-off gaps and the idle time with nothing ready.

Every number comes from the records; what a run did not record is None
or empty (an older JSON, dask's schedulers, a cluster without metrics).
"""

from __future__ import annotations

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
from .usercode import user_functions

__all__ = ["Facts", "union_length"]


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
    def block(self) -> float:
        """Seconds of the whole recording (``performance_report``'s block),
        else from the first computation's start to the last one's finish."""
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
        caller's own: building graphs, its other work), not after the last."""
        walls = sorted(self.walls)
        if not walls:
            return 0.0
        # (a computation's own preparation -- compiling and ordering its graph,
        # before start_state -- is the scheduler's time, not the caller's)
        walls = sorted(walls + [(g.submitted, g.started) for g in self.run.graphs
                                if g.submitted is not None and g.submitted <= g.started])
        started = self.run.meta.get("started")
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
