"""What a growing batch holds: the planner's count of results kept alive.

A worker's batch runs beside the others' like a second sequential run, so
each of its results still wanted by a task outside it adds to the
computation's peak (see "What a batch holds" in ``localsched.run.batching``).
``Held`` follows a batch as the planner grows it, task by task, and says
after each prefix how many results it holds (``holds``): the planner stops
the batch past ``max_live`` and cuts it where it holds the fewest.

Only *counted* results are followed.  A result is not counted when a
sequential run in the same order would hold it as long anyway (it is
*parked*: ``Held.counts``), or when it is tiny (a number, a short string:
no memory at stake).  So a batch of tiny results holds nothing, and on
threads (no inputs to count, no recalled or large groups to watch) the
planner builds no ``Held`` for it until its first result that may be
large (``Held(..., tiny_after=n)``: the batch so far, n tiny results after
its first, counts nothing).

Whether a task's result was made in the batch is read from the planner's
``mark`` (the serial of the batch each task joined), not kept here.
"""

from __future__ import annotations

__all__ = ["Held"]


class Held:
    """What a growing batch holds (see the module docstring): how many of
    its results are still wanted after each prefix (``holds``; in a batch
    of large results, (large ones, all) pairs); also the groups it took
    (``groups``) and the inputs it takes from outside (``outside``,
    processes only)."""

    __slots__ = ("deps", "dependents", "is_output", "waiting", "max_live", "mark", "serial",
                 "large", "unused", "count", "holds", "big", "nbig", "groups", "outside")

    def __init__(self, planner, i: int, large: set | None, *, tiny: bool, tiny_after: int = 0):
        """Start counting with the batch's first task i (``tiny``: its group
        has made only tiny results); ``tiny_after``: the batch already took
        that many more tasks, all of them tiny."""
        assert large is None or not tiny_after, "a batch of large results is counted from its start"
        run = planner.run
        self.deps, self.dependents = run.deps, run.dependents
        self.is_output, self.waiting = run.is_output, run.waiting
        self.max_live = planner.max_live
        self.mark, self.serial = planner.mark, planner.serial
        self.large = large
        self.unused: dict = {}  # counted result -> its users not (yet) in the batch
        self.count = 0 if tiny else self.counts(i)
        if large is None:
            self.holds: list = [self.count] * (1 + tiny_after)
        else:
            self.big = {i}  # the large results among them (as far as known)
            self.nbig = 1
            self.holds = [(1, self.count)]
        self.groups = {planner.group_of[i]}
        self.outside: set = set() if planner.max_inputs is None else set(run.deps[i])

    def add(self, j: int, tiny: bool, group) -> None:
        """Count j, just taken: its result (unless ``tiny``), and the
        counted results of the batch whose last user it is."""
        count = self.count if tiny else self.count + self.counts(j)
        unused, is_output, large = self.unused, self.is_output, self.large
        if unused:
            for d in self.deps[j]:
                u = unused.get(d)
                if u is not None:
                    unused[d] = u - 1
                    if u == 1 and not is_output[d]:
                        count -= 1
                        if large is not None and d in self.big:
                            self.nbig -= 1
        self.count = count
        if large is None:
            self.holds.append(count)
        else:
            if group in large:
                self.big.add(j)
                self.nbig += 1
            self.holds.append((self.nbig, count))

    def counts(self, j: int) -> int:
        """1 (and j is followed) if j's result, made in the batch, adds to
        what the batch holds; 0 if a sequential run holds it as long
        whatever the batch does: a result each of whose users still waits
        for more than ``max_live`` other inputs, more than a batch may hold
        (the ``sum`` of 5,000 tasks, a shuffle's gather: no batch could
        bring that user within reach), or an output nothing uses that uses
        no result of the batch (``dask.compute(*[f(x) for x in items])``;
        the root of a reduction the batch closes still counts, so the batch
        ends there rather than start other work)."""
        waiting, dependents, max_live = self.waiting, self.dependents[j], self.max_live
        counted = False
        for c in dependents:
            if waiting[c] <= max_live + 1:
                counted = True
                break
        if not (counted or dependents):  # (nothing uses it)
            mark, serial = self.mark, self.serial
            counted = not self.is_output[j] or any(mark[d] == serial for d in self.deps[j])
        if not counted:
            return 0
        self.unused[j] = len(dependents)
        return 1
