"""What-if: the wall time of the same run on N workers, replayed from what
was measured.

Each computation is replayed with localsched's own scheduling policy
(``localsched.run.machine``): the ready tasks form a stack; at the start it
holds the tasks with no inputs, the first in run order on top; when a task
ends, the dependents it made ready go on top, the first in run order last
(so on top), and every free worker takes the top task.  A task takes its
measured duration, and each task costs its worker the run's measured
per-task overhead after it (``overhead_per_task``): the mean gap, on one
worker, between a task's end and the start of its next task when that next
task was already ready -- the hand-off a worker pays whatever the number of
workers.  Around the tasks, the computation's measured start-up (its start
to the first task) and wind-down (the last task's end to its finish), and
between computations the caller's own time, are kept as measured.

What the replay does not know: tasks that slow each other down (Python
code holding the GIL on threads -- the ``gil`` finding says so --, fewer
cores than workers, memory bandwidth), and batching (a worker running a
few small tasks per hand-off): it predicts from durations as they were.

None when the run's dependencies were not recorded (see ``graphs``).

>>> from localsched.diagnostics.collectors.records import TaskData, GraphData
>>> from localsched.diagnostics.runs.rundata import RunData
>>> tasks = [TaskData(('x', i), None, float(i), i + 1.0, 1) for i in range(4)]
>>> g = GraphData([('x', i) for i in range(4)], [()] * 4, [0, 1, 2, 3], 0.0, 4.0, 1)
>>> run = RunData(tasks=tasks, graphs=[g])
>>> simulate(run, workers=1), simulate(run, workers=2), simulate(run, workers=8)
(4.0, 2.0, 1.0)
"""

from __future__ import annotations

import heapq

from .critical import longest_chain
from .graphs import Computation, computations

__all__ = ["simulate", "what_if", "overhead_per_task", "makespan", "unlimited_makespan",
           "ready_times", "even_split_saving", "WHAT_IF_WORKERS"]

#: The worker counts of the report's what-if table.
WHAT_IF_WORKERS = (1, 2, 4, 8, 16)


def simulate(run, workers: int) -> float | None:
    """The predicted wall-clock seconds of ``run`` on ``workers`` workers
    (see the module docstring), or None if not measured."""
    if int(workers) < 1:
        raise ValueError(f"workers must be at least 1, got {workers!r}")
    found = what_if(run, (int(workers),))
    return None if found is None else found["workers"][int(workers)]


def what_if(run, counts=WHAT_IF_WORKERS, comps: list | None = None) -> dict | None:
    """``{"workers": {n: predicted seconds}, "floor": critical path seconds,
    "overhead": per-task overhead (s), "recorded": {"workers", "seconds"}}``
    for each ``n`` in ``counts``, or None if not measured (``comps``:
    ``computations(run)`` if already at hand)."""
    comps = computations(run) if comps is None else comps
    if comps is None:
        return None
    counts = sorted({int(n) for n in counts})
    totals = dict.fromkeys(counts, 0.0)
    floor = fixed_total = 0.0
    overheads = []
    for comp in comps:
        if not comp.keys:
            fixed_total += max(0.0, comp.finished - comp.started)
            continue
        o = overhead_per_task(comp)
        overheads.append((o, len(comp.keys)))
        fixed = (max(0.0, min(comp.starts) - comp.started)
                 + max(0.0, comp.finished - max(comp.ends)))
        fixed_total += fixed
        unlimited = unlimited_makespan(comp, o)
        previous = None
        for n in counts:
            if previous is not None and previous <= unlimited * (1 + 1e-12):
                span = previous  # (more workers than the graph can use)
            else:
                span = previous = makespan(comp, n, o)
            totals[n] += span
        floor += longest_chain(comp)[0]
    caller = _caller_seconds(comps)
    recorded = [c.worker_count() for c in comps if c.keys]
    tasks = sum(k for _, k in overheads)
    return {
        "workers": {n: totals[n] + fixed_total + caller for n in counts},
        "floor": floor,
        "overhead": sum(o * k for o, k in overheads) / tasks if tasks else 0.0,
        "recorded": {"workers": max(recorded) if recorded else None,
                     "seconds": sum(c.finished - c.started for c in comps) + caller},
    }


def _caller_seconds(comps: list) -> float:
    """Time between computations (the caller's own): their span less their walls."""
    if len(comps) < 2:
        return 0.0
    span = max(c.finished for c in comps) - min(c.started for c in comps)
    return max(0.0, span - sum(c.finished - c.started for c in comps))


def ready_times(comp: Computation) -> list:
    """When each task's last input ended (the computation's start for none)."""
    return comp.ready


def overhead_per_task(comp: Computation) -> float:
    """The mean gap between a task's end and its worker's next task's start,
    over the gaps where that next task was ready before the first one ended
    (so the worker had work and paid only the hand-off); 0 with no such gap."""
    total, count = comp.handoffs
    return total / count if count else 0.0


def unlimited_makespan(comp: Computation, overhead: float) -> float:
    """The makespan with a worker for every task: each task starts when its
    inputs are done (the longest chain, each link paying the overhead)."""
    return longest_chain(comp, overhead)[0]


def even_split_saving(comp: Computation, workers: int, slow: dict) -> float:
    """Seconds the computation would have saved had the ``slow`` tasks
    (``{position: a usual duration}``) been split evenly: its replay as it
    was, less the more of its replay with those tasks as usual and its work
    (all of it: the slow tasks' too) spread evenly over ``workers``.  Nothing
    when the rest of the work filled the other workers while they ran."""
    o = overhead_per_task(comp)
    durations = list(comp.durations)
    was = makespan(comp, workers, o)
    usual = [slow.get(i, d) for i, d in enumerate(durations)]
    even = (sum(durations) + o * (len(durations) - 1)) / max(1, workers)
    return max(0.0, was - max(makespan(comp, workers, o, usual), even))


def makespan(comp: Computation, workers: int, overhead: float,
             durations: list | None = None) -> float:
    """Seconds from the first task's start to the last one's end, replayed on
    ``workers`` workers with localsched's ready stack (module docstring);
    ``durations``: the tasks' own, in place of the measured ones."""
    n = len(comp.keys)
    if not n:
        return 0.0
    waiting = list(comp._cached("inputs", lambda: list(map(len, comp.deps))))
    users = comp.users
    cost = [d + overhead for d in (comp.durations if durations is None else durations)]
    if workers == 1:  # (one worker always has a ready task: it never idles)
        return max(0.0, sum(cost) - overhead)
    ready = [i for i in range(n - 1, -1, -1) if not waiting[i]]  # (first in order on top)
    running: list = []
    push, pop, take = heapq.heappush, heapq.heappop, ready.pop
    free = workers
    t = 0.0
    while ready and free:
        i = take()
        push(running, (cost[i], i))
        free -= 1
    while running:
        t, i = pop(running)
        free += 1
        mine = users[i]
        if len(mine) == 1:  # (the commonest: one dependent)
            u = mine[0]
            w = waiting[u] = waiting[u] - 1
            if not w:
                ready.append(u)
        elif mine:
            new = []
            for u in mine:
                w = waiting[u] = waiting[u] - 1
                if not w:
                    new.append(u)
            if new:
                new.sort(reverse=True)  # (the first in run order on top)
                ready.extend(new)
        while ready and free:
            j = take()
            push(running, (t + cost[j], j))
            free -= 1
    return max(0.0, t - overhead)
