"""Plain records emitted by the profilers: no behaviour, only data.

All times are seconds since the epoch (``time.time()``), taken on the
machine's wall clock where the event happened -- the worker thread or the
worker process -- so records of different profilers line up on one axis.

>>> TaskData('x', (len, [1]), 10.0, 10.5, 0).end_time - 10.0
0.5
"""

from __future__ import annotations

from typing import Any, Hashable, NamedTuple

__all__ = ["TaskData", "ResourceData", "CacheData"]


class TaskData(NamedTuple):
    """One executed task: when it ran (epoch seconds) and on which worker.

    ``worker_id`` is the thread ident for the thread and sync schedulers and
    the process id for the process scheduler.
    """

    key: Hashable
    task: Any
    start_time: float
    end_time: float
    worker_id: int


class ResourceData(NamedTuple):
    """One resource sample: epoch time, memory in MB (resident set size of the
    process and all its children), CPU percent (summed over them; 100 is
    one core fully busy)."""

    time: float
    mem: float
    cpu: float


class CacheData(NamedTuple):
    """One result's stay in the scheduler's cache: ``metric`` of the result
    (1 by default), and the epoch times it entered and left the cache."""

    key: Hashable
    task: Any
    metric: float
    cache_time: float
    free_time: float
