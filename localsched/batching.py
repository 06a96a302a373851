"""Which tasks a worker runs in one hand-off: the batch planner.

Handing a task to a worker costs several microseconds (a queue, a wake-up,
on processes a pipe); many dask tasks take less.  So a worker receives a
*batch*: a short run of tasks it executes in order, reporting each as it ends.

The rule that keeps memory depth-first: **a batch is a contiguous stretch of
the static order** (``order.order``), from the ready task that comes first
in it, skipping only tasks other workers already run or that are done, and
stopping at the first task that cannot run inside the batch (an input is
still being computed elsewhere).  Running a batch is then exactly running
that stretch of the sequential order, which the static order made
memory-lean; results only later tasks of the same batch use are dropped by
the worker after their last use and never travel back.  (Popping many ready
tasks from anywhere, e.g. 256 leaves of a tree whose parents are not yet
timed, held 68x more results than dask.)

Size: about ``BATCH_BUDGET`` seconds of work, judged by the measured mean
duration of each task's function.  A task whose function has not been
timed yet, or is slow, goes alone, so long tasks spread over all workers.

Records.  A worker reports each task as a plain tuple laid out as
``Record`` (plain tuples: they are made once per task in the hot path, and
pickle small); lists of them travel together.

>>> Record(3, True, 42, 1.0, 1.5, 7).value
42
"""

from __future__ import annotations

import heapq
from typing import Any, NamedTuple, Optional

from .graph import A_TASK, CALL, NESTED, NODE

__all__ = ["Planner", "Record", "BatchItem", "BATCH_BUDGET"]

# Task states, shared with the core.
WAITING, READY, RUNNING, DONE = 0, 1, 2, 3
STATE_NAMES = ("waiting", "ready", "running", "done")

# Seconds of (measured) work a batch is sized to: enough to make the
# hand-off to a worker cheap next to the work, small enough to balance.
BATCH_BUDGET = 2e-3


class Record(NamedTuple):
    """What a worker reports per task (sent as a plain tuple of this layout).

    ``ok`` is True (``value`` is the result, or None when only the batch
    needed it), False (``value`` is the exception) or None: an announcement
    that the batch starts with task ``index`` at ``start``.
    """

    index: int
    ok: Optional[bool]
    value: Any
    start: float
    end: float
    worker_id: Any


class BatchItem(NamedTuple):
    """One task of a batch, as the worker receives it (a plain tuple).

    ``store``: keep the result for later tasks of the batch; ``drop``: keys
    this task was the last in-batch user of; ``send``: the record carries
    the result (else None: nobody outside the batch needs it).
    """

    index: int
    key: Any
    spec: tuple
    store: bool
    drop: list
    send: bool


def spec_group(spec: tuple):
    """What a task's duration is estimated by: its function (as an id)."""
    kind = spec[0]
    if kind == CALL:
        return id(spec[1])
    if kind == NESTED and spec[1][0] == A_TASK:
        return id(spec[1][1])
    if kind == NODE:
        return id(getattr(spec[1], "func", None) or type(spec[1]))
    return kind  # aliases, other structures


class Planner:
    """Plans batches over a run's state (see the module docstring).

    ``run`` provides ``order``, ``priority``, ``status``, ``deps``,
    ``dependents``, ``specs``, ``keys``, ``is_output`` and the ready heap
    ``ready`` of ``(priority, index)``; entries whose task has left READY
    (joined an earlier batch) are skipped when popped.
    """

    def __init__(self, run, *, limit: Optional[int] = None, budget: float = BATCH_BUDGET):
        self.run = run
        self.limit = limit or 256
        self.budget = budget
        self.group_of = [spec_group(s) for s in run.specs]
        self.stats: dict = {}  # group -> [total seconds, count]
        self.mark = [0] * len(run.keys)  # serial of the batch a task joined
        self.serial = 0

    def observe(self, i: int, seconds: float) -> None:
        """Learn from a finished task's measured duration."""
        st = self.stats.get(self.group_of[i])
        if st is None:
            self.stats[self.group_of[i]] = [seconds, 1]
        else:
            st[0] += seconds
            st[1] += 1

    def estimate(self, i: int) -> Optional[float]:
        """Mean measured duration of i's function so far, or None."""
        st = self.stats.get(self.group_of[i])
        return None if st is None else st[0] / st[1]

    def has_ready(self) -> bool:
        """Whether a READY task is waiting (drops stale heap entries)."""
        ready, status = self.run.ready, self.run.status
        while ready and status[ready[0][1]] != READY:
            heapq.heappop(ready)
        return bool(ready)

    def next_batch(self) -> list:
        """Take the next batch (task indices in run order), marking them RUNNING.

        Call only when ``has_ready()``.
        """
        run = self.run
        status, order, deps, mark = run.status, run.order, run.deps, self.mark
        i = heapq.heappop(run.ready)[1]
        self.serial = serial = self.serial + 1
        status[i] = RUNNING
        mark[i] = serial
        batch = [i]
        spent = self.estimate(i)
        if spent is None or spent >= self.budget:
            return batch
        budget, limit, stats, group_of = self.budget, self.limit, self.stats, self.group_of
        p = run.priority[i] + 1
        end = len(order)
        while p < end and len(batch) < limit:
            j = order[p]
            p += 1
            s = status[j]
            if s == DONE or s == RUNNING:
                continue  # done, or another worker runs it
            for d in deps[j]:
                if status[d] != DONE and mark[d] != serial:
                    break  # an input is still computed elsewhere: stop here
            else:
                st = stats.get(group_of[j])
                if st is None:
                    break  # not timed yet: it goes alone, later
                e = st[0] / st[1]
                if spent + e > budget:
                    break
                status[j] = RUNNING
                mark[j] = serial
                batch.append(j)
                spent += e
                continue
            break
        return batch

    def items(self, batch: list, *, keep_all: bool, pack_data: bool):
        """The worker's view of ``batch``: BatchItem tuples, and the inputs
        to ship (``pack_data``: values of dependencies from outside the
        batch; else None)."""
        run = self.run
        keys, specs, deps, dependents, is_output = (
            run.keys, run.specs, run.deps, run.dependents, run.is_output)
        mark, serial = self.mark, self.serial
        if len(batch) == 1 and not pack_data:
            i = batch[0]
            return [(i, keys[i], specs[i], False, (), True)], None
        # What each task must keep for later tasks of the batch, and what it
        # was the last in-batch user of: the worker drops those, so a batch
        # holds no more results than a task-by-task run would.
        last_use: dict = {}
        for p, i in enumerate(batch):
            for d in deps[i]:
                if pack_data or mark[d] == serial:
                    last_use[d] = p
        drops: list = [[] for _ in batch]
        for d, p in last_use.items():  # (the scheduler keeps its own copy)
            drops[p].append(keys[d])
        items = []
        for p, i in enumerate(batch):
            # A result only later tasks of this batch use never travels back
            # (unless a callback or a local re-run may want it).
            send = keep_all or is_output[i] or any(mark[c] != serial for c in dependents[i]) \
                or not dependents[i]
            items.append((i, keys[i], specs[i], i in last_use and mark[i] == serial,
                          drops[p], send))
        data = None
        if pack_data:
            cache = run.cache
            data = {}
            for i in batch:
                for d in deps[i]:
                    if mark[d] != serial:
                        k = keys[d]
                        data[k] = cache[k]
        return items, data
