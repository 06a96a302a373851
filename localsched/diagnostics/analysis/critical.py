"""The critical path: the longest chain of dependent tasks, by measured time.

Within one computation a task cannot start before its inputs end, so the
chain whose measured durations add up to the most is a floor under its wall
time, however many workers there are.  Computations run one after another,
so a run's critical path is theirs joined in order (its ``seconds`` their
sum).  Durations are the tasks' own (start to end, as the workers measured
them); the hand-offs between them are not counted: the floor is what the
tasks alone need.

None when the run's dependencies were not recorded (a run saved before they
were, see ``graphs``).

>>> from localsched.diagnostics.collectors.records import TaskData, GraphData
>>> from localsched.diagnostics.runs.rundata import RunData
>>> run = RunData(tasks=[TaskData('a', None, 0.0, 1.0, 1), TaskData('b', None, 0.0, 5.0, 2),
...                      TaskData('c', None, 5.0, 6.0, 1)],
...               graphs=[GraphData(['a', 'b', 'c'], [(), (), (0, 1)], [0, 1, 2], 0.0, 6.0, 2)])
>>> critical_path(run)
CriticalPath(seconds=6.0, keys=['b', 'c'])
"""

from __future__ import annotations

from typing import NamedTuple

from .graphs import Computation, computations

__all__ = ["CriticalPath", "critical_path", "longest_chain"]


class CriticalPath(NamedTuple):
    """``seconds``: the chain's measured task time; ``keys``: the chain, in order."""

    seconds: float
    keys: list


def critical_path(run, comps: list | None = None) -> CriticalPath | None:
    """The run's critical path (see the module docstring), or None if not
    measured (``comps``: ``computations(run)`` if already at hand)."""
    comps = computations(run) if comps is None else comps
    if comps is None:
        return None
    seconds, keys = 0.0, []
    for comp in comps:
        s, chain = longest_chain(comp)
        seconds += s
        keys += [comp.keys[i] for i in chain]
    return CriticalPath(seconds, keys)


def longest_chain(comp: Computation, overhead: float = 0.0) -> tuple[float, list]:
    """``(seconds, positions)`` of one computation's longest chain, each task
    counting its duration plus ``overhead`` (the chain's seconds then leave
    out the last task's overhead); computed once per computation and overhead."""
    return comp._cached(("chain", overhead), lambda: _longest_chain(comp, overhead))


def _longest_chain(comp: Computation, overhead: float) -> tuple[float, list]:
    n = len(comp.keys)
    if not n:
        return 0.0, []
    finish = [0.0] * n
    via = [-1] * n
    for i, (ds, d) in enumerate(zip(comp.deps, comp.durations, strict=True)):
        best, arg = 0.0, -1
        for j in ds:
            f = finish[j]
            if f > best:
                best, arg = f, j
        finish[i] = best + d + overhead
        via[i] = arg
    last = max(range(n), key=finish.__getitem__)
    chain = []
    i = last
    while i >= 0:
        chain.append(i)
        i = via[i]
    chain.reverse()
    return finish[last] - overhead, chain
