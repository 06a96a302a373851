"""The static, memory-aware order in which tasks should run.

The policy: run the graph depth-first from its outputs, finishing one branch
before starting the next, so that an intermediate result is consumed -- and
released -- soon after it is produced.  Among a task's dependencies, the one
whose sub-graph needs the most simultaneously live results goes first
(Sethi-Ullman numbering: for a tree, evaluating the hungriest branch first
minimises the peak number of live results).

``order`` returns the tasks as a post-order of that depth-first walk, which
is a valid topological order; schedulers use the position as priority (lower
runs first), so ready tasks are always picked to finish the current branch.

A tree reduction of four leaves: each pair is reduced as soon as it exists,
so at most four results are ever live (the first pair's sum, the
second pair's two leaves and their new sum).  The first-listed branch goes
first; among leaves, which cannot change memory, the last-listed (as dask):

>>> deps = [(), (), (0, 1), (), (), (3, 4), (2, 5)]   # 0..6; 6 is the root
>>> order(deps, [False] * 7, outputs=[6])
[1, 0, 2, 4, 3, 5, 6]
>>> peak_live([1, 0, 2, 4, 3, 5, 6], deps)
4

Cycles are found here too:

>>> order([(1,), (0,)], [False, False], outputs=[0])
Traceback (most recent call last):
  ...
localsched.plan.graph.CycleError: cycle in graph: 0 -> 1 -> 0
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress

from .graph import CycleError

__all__ = ["order", "order_and_consumers", "peak_live", "find_cycle"]


def order(deps: list[tuple[int, ...]], is_data: Sequence[bool], outputs: list[int],
          keys: list | None = None) -> list[int]:
    """The run order of the tasks the ``outputs`` need (indices), as above.

    Tasks no output depends on are left out, and so is data (``is_data[i]``).
    ``keys`` (optional) are used only to name the keys of a cycle.
    Raises CycleError if the needed part of the graph has a cycle.
    """
    return order_and_consumers(deps, is_data, outputs, keys)[0]


def order_and_consumers(deps: list[tuple[int, ...]], is_data: Sequence[bool], outputs: list[int],
                        keys: list | None = None) -> tuple[list[int], list[list[int]]]:
    """``order(...)`` and, for each index, the tasks in it that consume it
    (the schedulers need both; the walk builds both)."""
    out, consumers, need, resort, shared = _post_order(deps, is_data, outputs, keys)
    if not (resort or shared):
        return out, consumers  # a forest: the walk already is the order
    return _release_walk(deps, consumers, is_data, outputs, need, resort, len(out)), consumers


def _post_order(deps: list[tuple[int, ...]], is_data: Sequence[bool], outputs: list[int],
                keys: list | None) -> tuple[list[int], list[list[int]], list[int], bool, bool]:
    """Pass 1: depth-first post-order from the outputs, children as listed.

    It culls, finds cycles (an edge back to a task still on the walk),
    computes each task's Sethi-Ullman need when its children are done, and
    who consumes each result among the tasks that run.  Returns the order,
    the consumers, the needs, whether some task lists a less hungry
    dependency first (``resort``) and whether some result has several
    consumers (``shared``).

    Children are pushed in reverse, so the first-listed is walked first
    (for trees and dask.array graphs this holds fewer results than the
    other way round).  Except when every child is a leaf (no inputs of its
    own): then the order cannot change memory, and the last-listed goes
    first, as in dask's order -- users (and dask's own tests) see a task's
    independent inputs computed last-to-first.
    """
    n = len(deps)
    state = bytearray(n)  # 0 unseen, 1 on the walk, 2 emitted
    need = [0] * n
    for i in compress(range(n), is_data):
        state[i] = 2  # need 0: in memory before the run starts
    out: list = []
    append = out.append
    consumers: list = [[] for _ in range(n)]
    resort = shared = False
    # (This loop runs once per task: one and two dependencies are spelled
    # out; a task none of whose dependencies is left to walk is emitted at
    # once, without a second visit.)
    for root in outputs:
        if state[root]:
            continue
        walk = [root]
        while walk:
            v = walk[-1]
            s = state[v]
            if s == 0:
                ds = deps[v]
                if ds:
                    state[v] = 1
                    top = len(walk)
                    if len(ds) == 1:
                        d = ds[0]
                        sd = state[d]
                        if sd == 0:
                            walk.append(d)
                        elif sd == 1:
                            raise _cycle(deps, d, v, keys)
                    else:
                        if len(ds) == 2:
                            if deps[ds[0]] or deps[ds[1]]:
                                ds = ds[::-1]
                        elif deps[ds[0]] or not _all_leaves(ds, deps):
                            ds = ds[::-1]
                        for d in ds:
                            sd = state[d]
                            if sd == 0:
                                walk.append(d)
                            elif sd == 1:
                                raise _cycle(deps, d, v, keys)
                    if len(walk) != top:
                        continue  # emitted when its dependencies are
                    ds = deps[v]
            elif s == 2:
                walk.pop()  # (pushed twice, emitted already)
                continue
            else:
                ds = deps[v]
            # Emit v: its dependencies are all done.
            walk.pop()
            state[v] = 2
            append(v)
            if not ds:
                need[v] = 1
                continue
            if len(ds) == 1:
                need[v] = need[ds[0]] or 1
            elif len(ds) == 2:
                a, b = need[ds[0]], need[ds[1]]
                if a < b:
                    resort = True
                    need[v] = b
                else:
                    need[v] = a + 1 if a == b else a
            elif len(ds) == 3:  # (``_need_of``, spelled out: a stencil's tasks)
                a, b, c = need[ds[0]], need[ds[1]], need[ds[2]]
                if not a >= b >= c:
                    resort = True
                    a, b, c = sorted((a, b, c), reverse=True)
                need[v] = max(a, b + 1, c + 2)
            else:
                need[v], unsorted = _need_of(ds, need)
                resort = resort or unsorted
            for d in ds:
                c = consumers[d]
                if c:
                    shared = True
                c.append(v)
    return out, consumers, need, resort, shared


def _need_of(ds: Sequence[int], need: list[int]) -> tuple[int, bool]:
    """The Sethi-Ullman need of a task with dependencies ``ds`` (hungriest
    first: each one's need plus the results already held), and whether
    ``ds`` does not list them hungriest first."""
    needs = [need[d] for d in ds]
    ns = sorted(needs, reverse=True)
    return max([x + j for j, x in enumerate(ns)]), ns != needs


def _cycle(deps: list[tuple[int, ...]], d: int, v: int, keys: list | None) -> CycleError:
    """The error for the edge ``v -> d`` that closes a cycle."""
    return CycleError(_cycle_names(find_cycle(deps, d, v), keys))


def _release_walk(deps: list[tuple[int, ...]], consumers: list[list[int]],
                  is_data: Sequence[bool], outputs: list[int], need: list[int], resort: bool,
                  ntasks: int) -> list[int]:
    """Pass 2: the depth-first walk (hungriest dependency first when
    ``resort``), plus one rule for results with several consumers:

    A task whose inputs are all computed runs at once if that lets some
    input go, because it is that input's last consumer: one result more,
    at least one less.  Without the rule, a walk that computes shared inputs
    for one consumer keeps them all alive until the walk reaches the others
    (two reductions over the same leaves would hold every leaf).
    """
    n = len(deps)
    state = bytearray(n)  # 0 unseen, 1 on the walk, 2 emitted
    rem = [len(c) for c in consumers]  # consumers not yet emitted
    missing = [0] * n  # inputs not yet emitted
    for i in range(n):
        if is_data[i]:
            state[i] = 2
        else:
            missing[i] = len(deps[i])
    for i in range(n):
        if is_data[i]:
            for c in consumers[i]:
                missing[c] -= 1
    out: list = []
    append = out.append
    ds: Sequence[int]

    def emit(v: int) -> None:
        work = [v]
        while work:
            x = work.pop()
            if state[x] == 2:
                continue
            state[x] = 2
            append(x)
            for u in deps[x]:
                r = rem[u] - 1
                rem[u] = r
                if r == 1:  # one consumer left: is it ready to release u?
                    for last in consumers[u]:
                        if state[last] != 2:
                            if not missing[last]:
                                work.append(last)
                            break
            for c in consumers[x]:
                m = missing[c] - 1
                missing[c] = m
                if not m and state[c] != 2:
                    for u in deps[c]:
                        if rem[u] == 1:
                            work.append(c)
                            break

    for root in outputs:
        if state[root]:
            continue
        walk = [root]
        while walk:
            v = walk[-1]
            s = state[v]
            if s == 0:
                state[v] = 1
                ds = deps[v]
                if len(ds) == 1:
                    if not state[ds[0]]:
                        walk.append(ds[0])
                elif ds:
                    # As in pass 1: the first-listed is walked first (leaves
                    # only: the last-listed); with ``resort`` the least
                    # hungry is pushed first, so the hungriest is walked first.
                    if not _all_leaves(ds, deps):
                        ds = ds[::-1]
                    if resort:
                        ds = _by_need(ds, need)
                    for d in ds:
                        if not state[d]:
                            walk.append(d)
            else:
                walk.pop()
                if s == 1:
                    emit(v)
    assert len(out) == ntasks
    return out


def _by_need(ds: Sequence[int], need: list[int]) -> Sequence[int]:
    """``ds`` least hungry first, ties as listed (``sorted`` by ``need``;
    three or fewer, the commonest, by hand: a third of ``sorted``'s time)."""
    if len(ds) > 3:
        return sorted(ds, key=need.__getitem__)
    if len(ds) == 2:
        x, y = ds
        return (y, x) if need[y] < need[x] else ds
    x, y, z = ds
    nx, ny, nz = need[x], need[y], need[z]
    if ny < nx:
        x, y, nx, ny = y, x, ny, nx
    if nz < ny:
        y, z, ny = z, y, nz
        if ny < nx:
            x, y = y, x
    return (x, y, z)


def _all_leaves(ds: Sequence[int], deps: list[tuple[int, ...]]) -> bool:
    """Whether every one of ``ds`` has no inputs of its own."""
    for d in ds:
        if deps[d]:
            return False
    return True


def _cycle_names(cycle: list[int], keys: list | None) -> list:
    return [keys[i] for i in cycle] if keys is not None else cycle


def find_cycle(deps: list, start: int, end: int) -> list:
    """The cycle closed by the edge ``end -> start``: a path of dependencies
    from ``start`` back to ``end``, as indices that start and end with ``start``."""
    # Breadth-first from start over dependencies until we reach end (the
    # walk back from end stops at start: its own parent is never read).
    parent = {start: start}
    frontier = [start]
    while frontier and end not in parent:
        nxt = []
        for v in frontier:
            for d in deps[v]:
                if d not in parent:
                    parent[d] = v
                    nxt.append(d)
        frontier = nxt
    path = [end]
    while path[-1] != start:
        path.append(parent[path[-1]])
    path.reverse()  # start ... end
    return path + [start]


def peak_live(run_order: list, deps: list) -> int:
    """Peak number of results held when tasks run one at a time in ``run_order``.

    A result is live from when its task runs until its last dependent has run;
    results nobody depends on (the outputs) stay live to the end.
    """
    left = [0] * len(deps)
    for i in run_order:
        for d in deps[i]:
            left[d] += 1
    ran = bytearray(len(deps))
    live = peak = 0
    for i in run_order:
        ran[i] = 1
        live += 1
        if live > peak:
            peak = live
        for d in deps[i]:
            left[d] -= 1
            if not left[d] and ran[d]:
                live -= 1
    return peak
