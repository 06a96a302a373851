"""What would cross between localsched's worker processes: the price the
``gil`` finding weighs before it says "processes".

On processes a result crosses from the worker that made it to the one that
uses it: pickled there, unpickled by the caller, pickled again with the next
batch and unpickled in the next worker (large buffers travel in shared
memory instead, at about memory speed).  A chain does not cross: the
planner keeps a task whose result only one task uses, and that task's only
input, in one worker when the result is costly to move
(``localsched.run.batch_weighed``).  So the edges counted are the others:
fan-ins, fan-outs, and the literal inputs the graph holds
(``GraphData.inputs``), which travel with every batch that uses them.

The price of what crosses: ``PICKLE_OBJECT`` a Python object met (the
literal inputs' count), ``PICKLE_RATE`` bytes a second (results' sizes as
measured, ``cache_metric`` bytes), and ``PICKLE_FRAME`` a pandas object
crossing (a result of a group the sampler saw inside pandas,
``percall.inside_library``), whatever its size.  And the hand-offs: the fix
moves the whole computation, each of its tasks ``PROCESS_TASK`` beyond its
own time on processes (its batch's round trip, a share of it).
"""

from __future__ import annotations

from ...utils import key_split
from .facts import Facts
from .percall import inside_library

__all__ = ["crossing", "crossing_edges", "PICKLE_OBJECT", "PICKLE_RATE", "PICKLE_FRAME",
           "PROCESS_TASK"]

#: Pickling over and back between processes: per Python object met (a
#: bag's 120,000 dicts, 1.6 million objects: 1.6-2.6 s here) and per byte
#: of flat payload (strings, buffers; arrays travel in shared memory).
PICKLE_OBJECT = 0.5e-6
PICKLE_RATE = 500e6
#: ... and per pandas object crossing, whatever its size: two hops (worker
#: to caller, caller to worker) of pickling and unpickling, each 148-252 µs
#: for a small DataFrame or Series here (an ndarray's, 14 µs).
PICKLE_FRAME = 400e-6
#: What each task of a computation costs on processes beyond its own time,
#: where batches are small (tasks of a millisecond or more): 200 chains of
#: three 1 ms tasks took 0.81-0.87 s on one worker process against 0.6 s
#: of tasks, a delayed pandas pipeline of 600 tasks 0.23-0.34 s more.
PROCESS_TASK = 0.4e-3


def crossing(f: Facts, g) -> tuple:
    """``(bytes, seconds)`` of what ``g``'s tasks would move to and from
    worker processes (``crossing_edges``, and the literal inputs the graph
    holds) and of the run's tasks' hand-offs there (``PROCESS_TASK``
    each); the bytes None where nothing that crosses was measured."""
    objects = size = 0.0
    measured = False
    tasks = f.stats[g].tasks if g in f.stats else 0
    for graph in f.run.graphs:
        inputs = getattr(graph, "inputs", None)
        if isinstance(inputs, dict) and g in inputs:
            measured = True
            o, b = inputs[g]
            objects, size = objects + o * tasks, size + b * tasks
            break  # (one graph's average per task stands for the group)
    sizes: dict = {}
    if f.run.cache_metric in ("bytes", "nbytes"):
        sizes = {r.key: float(r.metric) for r in f.run.cache if r.metric is not None}
        measured = measured or bool(sizes)
    pandas = inside_library(f, "pandas") if f.run.samples else set()
    moved, frames = crossing_edges(f, g, sizes, pandas)
    if not f.comps and sizes:  # (no dependencies recorded: every result counts)
        moved = sum(v for k, v in sizes.items() if key_split(k) == g)
    handoffs = len(f.run.tasks) * PROCESS_TASK
    if not measured and not frames:
        return None, handoffs
    size += moved
    return size, (objects * PICKLE_OBJECT + size / PICKLE_RATE + frames * PICKLE_FRAME
                  + handoffs)


def crossing_edges(f: Facts, g, sizes: dict, pandas: set) -> tuple:
    """``(bytes, pandas objects' crossings)`` of the results that would
    cross to or from ``g``'s tasks: each result passed between two tasks,
    either of ``g``, except along a chain (the result's only user, whose
    only input it is), and ``g``'s results no task uses (they go to the
    caller: one hop, half a crossing); a pandas object where either task's
    group is in ``pandas``."""
    size = 0.0
    frames = 0.0
    for comp in f.comps or ():
        keys = comp.keys
        groups = [key_split(k) for k in keys]
        users = [0] * len(keys)
        for deps in comp.deps:
            for j in deps:
                users[j] += 1
        for i, deps in enumerate(comp.deps):
            mine = groups[i] == g
            if mine and not users[i]:
                size += sizes.get(keys[i], 0.0)
                frames += 0.5 if groups[i] in pandas else 0.0
            for j in deps:
                if not (mine or groups[j] == g) or (users[j] == 1 and len(deps) == 1):
                    continue
                size += sizes.get(keys[j], 0.0)
                if groups[i] in pandas or groups[j] in pandas:
                    frames += 1
    return size, frames
