"""Plain records emitted by the profilers: no behaviour, only data.

All times are seconds since the epoch (``time.time()``), taken on the
machine's wall clock where the event happened -- the worker thread or the
worker process -- so records of different profilers line up on one axis.

``TaskData`` keeps dask's five fields, so code that unpacks dask's records
(``key, task, start, end, worker = record``) works unchanged; what dask does
not record (failed and interrupted tasks, the time spent shipping a task to a
process and its result back) has records of its own.

>>> TaskData('x', (len, [1]), 10.0, 10.5, 0).end_time - 10.0
0.5
>>> FailedTaskData('y', None, 1.0, 2.0, 0, 'ZeroDivisionError', 'division by zero').error
'ZeroDivisionError: division by zero'
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, NamedTuple

__all__ = [
    "TaskData",
    "FailedTaskData",
    "InterruptedTaskData",
    "TransferData",
    "ResourceData",
    "WorkerResourceData",
    "CacheData",
    "MetricData",
    "ActivityData",
    "SampleData",
    "GraphData",
]


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


class FailedTaskData(NamedTuple):
    """A task that raised: when it ran, where, and what it raised.

    The exception is kept as text (its type's name and ``str(exc)``), not as
    the object, so a record never keeps a traceback's frames alive.
    ``worker_id`` is None when the scheduler could not tell.
    """

    key: Hashable
    task: Any
    start_time: float
    end_time: float
    worker_id: int | None
    exc_type: str
    message: str

    @property
    def error(self) -> str:
        """``'Type: message'``, as a traceback's last line shows it."""
        return f"{self.exc_type}: {self.message}" if self.message else self.exc_type


class InterruptedTaskData(NamedTuple):
    """A task that had started but not ended when the computation stopped
    (Ctrl-C, or another task's error); ``stop_time`` is when it stopped."""

    key: Hashable
    task: Any
    start_time: float
    stop_time: float
    worker_id: int | None


class TransferData(NamedTuple):
    """Time a process-pool task spent travelling (epoch seconds).

    ``send_start`` .. ``start_time``: its inputs were pickled, sent and
    unpickled before it could start (only the first task of a batch pays
    this; the others' is 0); ``end_time`` .. ``receive_end``: its result
    travelled back to the scheduler.
    """

    key: Hashable
    worker_id: int
    send_start: float
    start_time: float
    end_time: float
    receive_end: float

    @property
    def send(self) -> float:
        """Seconds spent sending the inputs."""
        return self.start_time - self.send_start

    @property
    def receive(self) -> float:
        """Seconds spent getting the result back."""
        return self.receive_end - self.end_time


class ResourceData(NamedTuple):
    """One resource sample: epoch time, memory in MB (resident set size of the
    process and all its children), CPU percent (summed over them; 100 is
    one core fully busy)."""

    time: float
    mem: float
    cpu: float


class WorkerResourceData(NamedTuple):
    """One resource sample of one worker of a dask.distributed cluster, from
    the worker's own monitor: epoch seconds (the worker's clock), the
    worker's address, memory in MB, CPU percent."""

    time: float
    worker_id: str
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


# -- "Where the time went" (fine metrics, activities, samples) -------------
#
# The fine metrics are one flat mapping ``(span, group, activity, unit) ->
# value``, summed over tasks, workers and runs (dask.distributed keeps its
# ``("execute", span, prefix, activity, unit)`` the same way): easy to merge,
# diff and dump, and the same layout holds a cluster's metrics.  A
# ``MetricData`` is one entry of that mapping, for code that wants rows.
#
# ``span`` is a tuple of span names, outermost first (``()`` outside any
# ``localsched.span``).  ``group`` is the task group (``key_split`` of the
# key, as dask names prefixes), or None for what belongs to no task: a
# worker's ``idle`` time, the scheduler's own ``scheduler`` overhead.
# ``activity`` is one of ``thread-cpu``, ``thread-noncpu``, ``serialize``,
# ``deserialize``, ``transfer``, ``queued``, ``idle``, ``scheduler``, or a
# label the user chose (``metrics.meter("I/O")``); ``unit`` is ``seconds``,
# ``bytes``, ``count`` or the user's own.  The seconds activities of one task
# add up to its wall time (from the worker's start of its inputs' arrival to
# the scheduler's receipt of its result).


class MetricData(NamedTuple):
    """One entry of the fine-metrics mapping (see the comment above).

    >>> MetricData(('load',), 'read-csv', 'thread-cpu', 'seconds', 1.5).value
    1.5
    """

    span: tuple
    group: str | None
    activity: str
    unit: str
    value: float


class ActivityData(NamedTuple):
    """A timed stretch of one task's life, epoch seconds: what the task
    stream draws inside (or beside) the task's bar, and what the trace
    export nests inside its slice.  ``activity`` as in ``MetricData``
    (``deserialize``, ``queued``, ``serialize``, ``transfer``, a user's
    ``meter`` label; on a cluster also ``compute``, ``disk-read`` ...)."""

    key: Hashable
    activity: str
    start: float
    stop: float
    worker_id: Hashable


class SampleData(NamedTuple):
    """One stack sample of a thread that was running a task.

    ``time``: epoch seconds; ``worker_id``: as in ``TaskData``; ``group``:
    the task group it was running (None between tasks); ``stack``: frames
    outermost first, each a ``(filename, first line of the function,
    function name)`` tuple -- plain values, so samples pickle across
    processes and dump to JSON; trees and flame graphs are built on read;
    ``seconds``: the time it stands for (the sampler's real period, which
    is longer than its interval when it waits for the GIL).
    """

    time: float
    worker_id: Hashable
    group: str | None
    stack: tuple
    #: Seconds the sample stands for: since the sampler's previous look
    #: (None: unknown, e.g. older saved runs; then the profiler's interval).
    seconds: float | None = None


class GraphData(NamedTuple):
    """One computation's task graph, kept once per computation (not per task)
    so that the analysis (``localsched.diagnostics.analysis``) can follow
    dependencies: the critical path, the what-if replay.

    ``keys``: every key of the compiled graph (tasks and data), by position;
    ``deps``: for each position, the positions of its dependencies (a tuple);
    ``order``: the positions of the tasks that ran, in localsched's run order
    (its static priority), or None when the scheduler had none (dask's
    schedulers, a cluster); ``started``/``finished``: epoch seconds of the
    computation's start (``start_state``: its graph compiled and ordered)
    and finish; ``workers``: how many workers it had (None: unknown);
    ``submitted``: when the caller handed the graph over (the ``start``
    hook; None: unknown), so ``started - submitted`` is the scheduler's
    preparation; ``inputs``: ``{group: [objects, bytes]}`` of one task's
    literal inputs on average (``literals.graph_inputs``: what a process
    pool would pickle; None: not measured); ``stack``: the caller's frames
    when it handed the graph over, outermost first, ``(file, line,
    function)`` (``call_site.caller_stack``; None: not recorded).  The lists
    are the scheduler's own (never copied while recording): nothing is added
    per task.

    >>> g = GraphData(['a', 'b'], [(), (0,)], [0, 1], 1.0, 2.0, 2)
    >>> [g.keys[d] for d in g.deps[1]]
    ['a']
    """

    keys: list
    deps: list
    order: list | None
    started: float
    finished: float
    workers: int | None
    submitted: float | None = None
    inputs: dict | None = None
    stack: tuple | None = None
