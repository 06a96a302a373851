"""Each computation's tasks as the analysis needs them: measured times and
dependencies, by position in the run order.

A run keeps its dependencies once per computation (``RunData.graphs``,
:class:`~localsched.diagnostics.collectors.records.GraphData`) and its tasks as
records.  ``computations(run)`` joins the two: for each computation, the
tasks that finished (a record each), in localsched's run order -- or, where
the scheduler had none (dask's schedulers, a cluster), in the order they
started -- with each one's dependencies among them as positions in that
order.  A dependency always comes before its dependents (``topological``
repairs an order that clocks of different machines got wrong).  A task
that did not finish is left out with its edges.

None when the run has tasks but no graph: saved before graphs were kept,
or recorded by something that keeps none -- "not measured".

>>> from localsched.diagnostics.collectors.records import TaskData, GraphData
>>> from localsched.diagnostics.runs.rundata import RunData
>>> run = RunData(tasks=[TaskData('b', None, 1.0, 3.0, 7), TaskData('a', None, 0.0, 1.0, 7)],
...               graphs=[GraphData(['x', 'a', 'b'], [(), (0,), (1,)], [1, 2], 0.0, 3.0, 1)])
>>> [(c.keys, c.deps, c.durations, c.ready) for c in computations(run)]
[(['a', 'b'], [(), (0,)], [1.0, 2.0], [0.0, 1.0])]
"""

from __future__ import annotations

from bisect import bisect_right

__all__ = ["Computation", "computations", "topological"]


class Computation:
    """One computation's finished tasks, in run order (position = priority).

    Lists by position: ``keys``, ``starts``, ``ends``, ``worker_ids``,
    ``deps`` (positions, earlier in this order, of each task's
    dependencies); ``started``/``finished`` (epoch seconds), ``workers``
    (how many it had, None: unknown).  What several analyses need is
    computed once, on first use: ``durations``, ``users``, ``ready``,
    ``handoffs``."""

    __slots__ = ("keys", "starts", "ends", "worker_ids", "deps", "started", "finished",
                 "workers", "_cache")

    def __init__(self, keys, starts, ends, worker_ids, deps, started, finished, workers):
        self.keys, self.starts, self.ends, self.worker_ids = keys, starts, ends, worker_ids
        self.deps, self.started, self.finished, self.workers = deps, started, finished, workers
        self._cache: dict = {}

    def _cached(self, name, make):
        value = self._cache.get(name)
        if value is None:
            value = self._cache[name] = make()
        return value

    @property
    def durations(self) -> list:
        """Each task's measured seconds (never negative)."""
        return self._cached("durations", lambda: [
            b - a if b > a else 0.0 for a, b in zip(self.starts, self.ends, strict=True)])

    @property
    def users(self) -> list:
        """Each task's dependents (positions)."""
        def make():
            users: list = [[] for _ in self.keys]
            for i, ds in enumerate(self.deps):
                for d in ds:
                    users[d].append(i)
            return users
        return self._cached("users", make)

    @property
    def ready(self) -> list:
        """When each task's last input ended (the computation's start for none)."""
        def make():
            ends, started = self.ends, self.started
            return [max([ends[d] for d in ds]) if ds else started for ds in self.deps]
        return self._cached("ready", make)

    @property
    def handoffs(self) -> tuple:
        """``(seconds, count)`` of the gaps between a task's end and its
        worker's next task's start where that next task was ready before
        the first one ended: the worker had work and paid only the hand-off."""
        def make():
            import numpy as np

            n = len(self.keys)
            if n < 2:
                return (0.0, 0)
            codes: dict = {}
            workers = np.fromiter((codes.setdefault(w, len(codes)) for w in self.worker_ids),
                                  dtype=np.int64, count=n)
            starts = np.asarray(self.starts, dtype=float)
            ends = np.asarray(self.ends, dtype=float)
            ready = np.asarray(self.ready, dtype=float)
            order = np.lexsort((starts, workers))
            a, b = order[:-1], order[1:]
            same = (workers[a] == workers[b]) & (ready[b] <= ends[a])
            gaps = np.maximum(starts[b] - ends[a], 0.0)[same]
            return (float(gaps.sum()), int(len(gaps)))
        return self._cached("handoffs", make)

    def worker_count(self) -> int:
        """Workers it had, or else how many ran a task (at least 1)."""
        return self.workers or max(1, len(set(self.worker_ids)))


def computations(run) -> list | None:
    """The computations of ``run`` (see the module docstring), by start."""
    if not run.graphs:
        return None if run.tasks else []
    graphs = sorted(run.graphs, key=lambda g: g.started)
    starts = [g.started for g in graphs]
    indexes: list = [None] * len(graphs)
    taken: list = [{} for _ in graphs]

    def index(j: int) -> dict:
        if indexes[j] is None:
            indexes[j] = {k: i for i, k in enumerate(graphs[j].keys)}
        return indexes[j]

    if len(graphs) == 1:  # (the common case: one computation, no search)
        index0 = index(0)
        taken[0] = {r.key: r for r in run.tasks if r.key in index0}
        return [_computation(graphs[0], index0, taken[0])]
    for record in run.tasks:
        j = max(0, bisect_right(starts, record.start_time) - 1)
        for c in (j, j - 1, j + 1):  # (a clock a little off: a neighbour)
            if 0 <= c < len(graphs) and record.key in index(c):
                taken[c][record.key] = record
                break
    return [_computation(g, index(j), taken[j]) for j, g in enumerate(graphs)]


def _computation(g, index: dict, records: dict) -> Computation:
    keys = g.keys
    if g.order is not None:
        # (each task once, even where a file's keys decode equal: "a" and
        # {"repr": "a"} -- one record stands for one task)
        taken: set = set()
        ran = []
        for p in g.order:
            k = keys[p]
            if k in records and k not in taken:
                taken.add(k)
                ran.append(p)
    else:
        ran = sorted((index[k] for k in records), key=lambda p: records[keys[p]].start_time)
    rank = [-1] * len(keys)
    for r, p in enumerate(ran):
        rank[p] = r
    gdeps = g.deps
    deps = [tuple(rank[d] for d in gdeps[p] if rank[d] >= 0) for p in ran]
    order = topological(deps)
    if order is not None:  # (an order that put a task before its input)
        ran = [ran[i] for i in order]
        rank = [-1] * len(keys)
        for r, p in enumerate(ran):
            rank[p] = r
        deps = [tuple(rank[d] for d in gdeps[p] if rank[d] >= 0) for p in ran]
    chosen = list(map(records.__getitem__, map(keys.__getitem__, ran)))
    columns: list = list(zip(*chosen, strict=True)) if chosen else [()] * 5
    return Computation(list(columns[0]), list(columns[2]), list(columns[3]),
                       list(columns[4]), deps, g.started, g.finished, g.workers)


def topological(deps: list) -> list | None:
    """None when every task's dependencies come before it; else a
    dependency-first order of the positions (stable: Kahn's algorithm taking
    the earliest position first).

    >>> topological([(), (0,)]) is None, topological([(1,), ()])
    (True, [1, 0])
    """
    if all(d < i for i, ds in enumerate(deps) for d in ds):
        return None
    import heapq

    waiting = [len(ds) for ds in deps]
    users: list = [[] for _ in deps]
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)
    ready = [i for i, w in enumerate(waiting) if not w]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if not waiting[u]:
                heapq.heappush(ready, u)
    if len(out) < len(deps):  # (a cycle: impossible in a graph that ran; keep the rest)
        out += [i for i in range(len(deps)) if waiting[i]]
    return out
