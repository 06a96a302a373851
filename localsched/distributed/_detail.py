"""The worker tier's detail of cluster runs, in localsched's shared records.

:class:`WorkerTier` is a callback: around each ``localsched.distributed``
run it keeps

- ``activities``: :class:`~localsched.diagnostics.collectors.records.ActivityData` of
  every task, from the workers' own startstops (``compute``, ``transfer``
  of inputs from a peer, ``disk-read``/``disk-write`` when spilled);
- ``metrics``: dask.distributed's fine performance metrics of the run (the
  ``execute`` and ``gather-dep`` metrics, the difference of the scheduler's
  cumulative counters before and after the run, after making every worker
  report at once), in localsched's ``(span, group, activity, unit) ->
  value`` mapping, every worker thread's second of the run booked once
  (``book_worker_seconds``): ``execute`` entries keep their task group and
  activity; the rest of wall × worker threads is ``idle`` (group None);
  ``gather-dep`` entries (the workers' event loops fetching inputs beside
  the threads) have no group, the activity ``"gather-dep <activity>"`` and
  the unit ``"loop-seconds"`` instead of ``"seconds"``;
- ``samples``: the workers' statistical profile for the run's time window
  (distributed samples every 10 ms), one
  :class:`~localsched.diagnostics.collectors.records.SampleData` per sample, by task
  group (its ``time`` is the window's middle, its ``worker_id`` None: the
  cluster merges samples across workers; its ``seconds`` the group's
  compute seconds over its sample count);
- ``transfers``: ``(source worker, destination worker) -> bytes`` moved
  between workers during the run;
- ``worker_resources``: ``(time, worker, mem MB, cpu %)`` of every worker,
  from its own SystemMonitor (every 0.5 s, the worker's clock), and
  ``resources``: the same summed over the workers, as
  :class:`~localsched.diagnostics.collectors.records.ResourceData` (one sample per
  0.5 s step).  (The ResourceProfiler measures this process and its
  children: for a LocalCluster, the scheduler and every worker, summed.)

Runs that overlap on one cluster share its counters: their metrics and
transfers are mixed (the activities are not).

:class:`Detail` collects, around one computation and only when a callback
asks (FineMetrics, SampleProfiler, WorkerTier), the fine metrics and the
workers' samples, and sets them on the state before ``finish``, with
``state.outcome.extra["workers"]`` (the cluster's worker threads) and
``["window"]`` (the run's start and end the worker-seconds cover).  Every time
is converted to the caller's clock (``state.clock_offset``).
"""

from __future__ import annotations

import time

from ..callbacks import Callback, Needs
from ..utils import key_split

__all__ = ["WorkerTier"]

#: At most this many task groups have their profile fetched (one call each).
MAX_PROFILED_GROUPS = 20


class WorkerTier(Callback):
    """Collect the worker tier's detail of ``localsched.distributed`` runs.

    Other schedulers' runs are ignored.

    >>> from distributed import LocalCluster, Client
    >>> import localsched.distributed as ld
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as lc, \\
    ...         Client(lc) as c, WorkerTier() as tier:
    ...     ld.get({'x': (sum, [1, 2])}, 'x', client=c)
    3
    >>> [a.activity for a in tier.activities]
    ['compute']
    """

    def __init__(self, samples: bool = True):
        self.want_samples = samples
        # Read by the loops: collect the run's fine metrics and samples (set
        # on the state before finish); results are never read.
        self.needs = Needs(results=False, measure=True, sample=0.01 if samples else 0.0)
        self.activities: list = []
        self.metrics: dict = {}
        self.samples: list = []
        self.transfers: dict = {}
        self.worker_resources: list = []
        self.errors: list = []  # what could not be collected, as text
        self._runs: dict = {}
        self._submitted: float | None = None  # when the last graph was sent

    def clear(self) -> None:
        self.activities, self.metrics, self.samples, self.transfers = [], {}, [], {}
        self.worker_resources = []
        self.errors = []

    def __enter__(self):
        self.clear()
        return super().__enter__()

    @property
    def resources(self) -> list:
        """``worker_resources`` summed over the workers per 0.5 s step."""
        from ..diagnostics.collectors.records import ResourceData

        steps: dict = {}
        for t, _worker, mem, cpu in self.worker_resources:
            step = round(t * 2) / 2
            m, c = steps.get(step, (0.0, 0.0))
            steps[step] = (m + mem, c + cpu)
        return [ResourceData(t, m, c) for t, (m, c) in sorted(steps.items())]

    @property
    def metric_records(self) -> list:
        """``metrics`` as :class:`MetricData` rows."""
        from ..diagnostics.collectors.records import MetricData

        return [MetricData(span, group, activity, unit, v)
                for (span, group, activity, unit), v in self.metrics.items()]

    def _start(self, dsk):
        # (start fires before the graph is sent; start_state only once the
        # scheduler's view of it arrives, after its first transfers began)
        self._submitted = time.time()

    def _start_state(self, dsk, state):
        if getattr(state, "client", None) is not None:
            self._runs[id(state)] = min(self._submitted or time.time(), time.time())

    def _posttask(self, key, result, dsk, state, worker_id):
        if getattr(state, "client", None) is None:
            return
        ActivityData = _activity_type()
        self.activities.append(ActivityData(key, "compute", *state.timing, worker_id))
        for activity, start, stop in state.task.activities or ():
            self.activities.append(ActivityData(key, activity, start, stop, worker_id))

    def _finish(self, dsk, state, errored):
        from ..diagnostics.collectors.records import SampleData

        t0 = self._runs.pop(id(state), None)
        if t0 is None:
            return
        self.errors.extend(state.detail_errors)
        for k, v in (state.cluster_metrics or {}).items():
            self.metrics[k] = self.metrics.get(k, 0) + v
        if self.want_samples:
            self.samples.extend(SampleData(*s) for s in state.samples)
        from . import _plugin

        offset = getattr(state, "clock_offset", 0.0)
        try:
            for rows in state.client.run(_plugin.worker_transfers, t0 + offset,
                                         time.time() + offset).values():
                for source, dest, nbytes, _, _ in rows:
                    pair = (source, dest)
                    self.transfers[pair] = self.transfers.get(pair, 0) + nbytes
        except Exception as exc:  # noqa: BLE001 -- detail is best effort, said in errors
            self.errors.append(f"transfers: {exc!r}")
        try:
            rows, _remote = worker_monitors(state.client, t0 - 0.5, time.time() + 0.5, offset)
            self.worker_resources.extend(rows)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"resources: {exc!r}")


def worker_monitors(client, since: float, until: float, offset: float = 0.0) -> tuple:
    """Every worker's own monitor samples between ``since`` and ``until``
    (the caller's clock; ``offset``: the scheduler's minus the caller's):
    ``([(time, worker, mem MB, cpu %), ...], remote)``, ``remote`` when a
    worker runs outside this process and its descendants (whose samples a
    ResourceProfiler of this process does not count)."""
    import os

    import psutil

    from . import _plugin

    monitors = client.run(_plugin.worker_monitor, since + offset, until + offset)
    pids = client.run(os.getpid)
    rows = [(t - offset, worker, (mem or 0) / 1e6, cpu or 0.0)
            for worker, samples in monitors.items() for t, cpu, mem in samples]
    try:
        mine = {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        mine = set()
    mine.add(os.getpid())  # (workers in this process: LocalCluster(processes=False))
    return rows, not set(pids.values()) <= mine


def _activity_type():
    from ..diagnostics.collectors.records import ActivityData

    return ActivityData


class Detail:
    """What FineMetrics and SampleProfiler ask of a cluster computation,
    collected around it (only when one listens): the scheduler's cumulative
    fine metrics before and after (after making every worker report at
    once), and the workers' stack samples of its window by task group.  Set
    on the state before ``finish``: ``cluster_metrics`` and ``samples``."""

    def __init__(self, client, needs: Needs):
        self.client = client
        self.measure, self.sample = needs.measure, needs.sample
        self.t0 = time.time()
        self.before = None
        self.errors: list = []
        if self.measure:
            from . import _plugin

            try:
                # (the workers report what earlier computations metered with
                # their heartbeats: flush it first, or it lands in this run)
                client.run(_plugin.worker_flush)
                self.before = client.run_on_scheduler(_plugin.scheduler_metrics)
            except Exception as exc:  # noqa: BLE001 -- detail is best effort
                self.errors.append(f"metrics: {exc!r}")

    def collect(self, state) -> None:
        if state is None:
            return
        t1 = time.time()  # (the run's window: from before the graph was sent to now)
        state.detail_errors.extend(self.errors)
        if not (self.measure or self.sample) or self.client.status != "running":
            return
        from . import _plugin

        client = self.client
        try:
            client.run(_plugin.worker_flush)
        except Exception as exc:  # noqa: BLE001
            state.detail_errors.append(f"flush: {exc!r}")
        if self.before is not None:
            try:
                after = client.run_on_scheduler(_plugin.scheduler_metrics)
                threads = sum(client.nthreads().values())
                booked = book_worker_seconds(metrics_delta(self.before, after),
                                             t1 - self.t0, threads)
                span = state.span
                state.cluster_metrics = {(span,) + k[1:]: v for k, v in booked.items()}
                state.outcome.extra["workers"] = threads
                state.outcome.extra["window"] = (self.t0, t1)
            except Exception as exc:  # noqa: BLE001
                state.detail_errors.append(f"metrics: {exc!r}")
        if self.sample:
            try:
                # (up to now: the flush above folded the workers' current
                # profile cycles in, stamped with its own time)
                state.samples = profile_samples(client, state.finished, self.t0, time.time(),
                                                state.clock_offset, state.group_seconds)
            except Exception as exc:  # noqa: BLE001
                state.detail_errors.append(f"samples: {exc!r}")


#: The unit of the workers' event-loop time (``gather-dep``: fetching
#: inputs from peers), which runs beside the worker threads: not part of
#: the threads' worker-seconds.
LOOP = "loop-seconds"


def book_worker_seconds(metrics: dict, wall: float, threads: int) -> dict:
    """Every worker thread's second of the run booked once: the ``execute``
    metrics (a task's whole stay on a thread: ``thread-cpu``,
    ``thread-noncpu``, ``executor``, ``deserialize``, ``other``, ...) as
    they are; the rest of ``wall × threads`` as ``idle`` (group None:
    waiting for work or for inputs); ``gather-dep`` seconds, which the
    event loop spends beside the threads, in unit ``loop-seconds``.

    >>> booked = book_worker_seconds({((), "x", "thread-cpu", "seconds"): 3.0,
    ...                               ((), None, "gather-dep network", "seconds"): 0.5}, 2.0, 2)
    >>> for key, value in booked.items():
    ...     print(key, value)
    ((), 'x', 'thread-cpu', 'seconds') 3.0
    ((), None, 'gather-dep network', 'loop-seconds') 0.5
    ((), None, 'idle', 'seconds') 1.0
    """
    out: dict = {}
    busy = 0.0
    for (span, group, activity, unit), value in metrics.items():
        if unit == "seconds":
            if activity.startswith("gather-dep"):
                unit = LOOP
            else:
                busy += value
        key = (span, group, activity, unit)
        out[key] = out.get(key, 0.0) + value
    idle = wall * threads - busy
    if idle > 0:
        key = ((), None, "idle", "seconds")
        out[key] = out.get(key, 0.0) + idle
    return out


def metrics_delta(before: dict, after: dict) -> dict:
    """The scheduler's fine-metric counters' growth, in localsched's
    ``(span, group, activity, unit)`` layout (see ``WorkerTier``)."""
    out: dict = {}
    for k, v in after.items():
        d = v - before.get(k, 0)
        if not d:
            continue
        if k[0] == "execute" and len(k) in (4, 5):
            # (the scheduler's totals drop the span: execute, prefix,
            # activity, unit; a span's own totals keep it)
            group, activity, unit = k[-3:]
            key = ((), group, activity, unit)
        elif k[0] == "gather-dep" and len(k) == 3:
            key = ((), None, f"gather-dep {k[1]}", k[2])
        else:
            continue
        out[key] = out.get(key, 0) + d
    return out


def profile_samples(client, keys, t0: float, t1: float, offset: float = 0.0,
                    group_seconds: dict | None = None) -> list:
    """SampleData of the workers' profile between t0 and t1 (the caller's
    clock; ``offset``: the scheduler's minus the caller's; the profile is
    kept in 1 s cycles: the window is widened by a second each side), by
    task group of ``keys``.

    Each sample's ``seconds`` is the time it stands for: its group's
    compute seconds in the run (``group_seconds``, from the workers'
    startstops) over the group's samples in the window.  distributed's sampler
    wakes every 10 ms but waits for the GIL (a busy task holds it), so
    count × interval read 0.2 s for a 1.0 s spin; the interval stands in
    only for a group without measured seconds."""
    groups = sorted({key_split(k) for k in keys})[:MAX_PROFILED_GROUPS]
    middle = (t0 + t1) / 2
    out: list = []
    interval = _profile_interval()
    for group in groups:
        tree = client.profile(key=group, start=t0 - 1.0 + offset, stop=t1 + 1.0 + offset)
        mine: list = []
        _walk(tree, (), group, middle, mine, interval)
        spent = (group_seconds or {}).get(group)
        if spent and mine:
            seconds = spent / len(mine)
            mine = [s._replace(seconds=seconds) for s in mine]
        out.extend(mine)
    return out


def _profile_interval() -> float:
    """distributed's profiler interval (its records hold counts only)."""
    import dask
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("distributed.worker.profile.interval"),
                                 default="ms"))


def _walk(node: dict, stack: tuple, group: str | None, t: float, out: list,
          seconds: float | None = None) -> None:
    """Expand distributed's counting tree into one SampleData per sample."""
    from ..diagnostics.collectors.records import SampleData

    children = node.get("children") or {}
    ident = node.get("identifier", "root")
    if ident != "root":
        stack = stack + (_frame(node),)
    own = node.get("count", 0) - sum(c.get("count", 0) for c in children.values())
    if own > 0:
        # (distributed 2026.8 leaves the innermost frame's count at 0: its
        # samples show on the parent; give them the whole stack)
        leaf_stack, leaf = stack, node
        while True:
            zero = [c for c in (leaf.get("children") or {}).values() if not c.get("count")]
            if not zero:
                break
            leaf = zero[0]
            leaf_stack = leaf_stack + (_frame(leaf),)
        for _ in range(own):
            out.append(SampleData(t, None, group, leaf_stack, seconds))
    for child in children.values():
        if child.get("count"):
            _walk(child, stack, group, t, out, seconds)


def _frame(node: dict) -> tuple:
    """``(filename, first line of the function, name)`` of a tree node (its
    identifier is ``name;filename;first line``)."""
    desc = node.get("description") or {}
    try:
        first = int(node.get("identifier", "").rsplit(";", 1)[-1])
    except ValueError:
        first = desc.get("line_number", 0)
    return (desc.get("filename", "?"), first, desc.get("name", "?"))
