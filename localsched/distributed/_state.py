"""``ClusterState``: what a callback receives for a computation on a
cluster, built from the scheduler's own view of the graph (the ``graph``
event) and kept up to date from the event stream.

It is a :class:`localsched.view.StateView`, the interface every diagnostic
reads: dask's mapping fields (``dependencies``, ``dependents``,
``waiting``, ``waiting_data``, ``cache``, ``ready``, ``running``,
``finished``, ``released``) and localsched's attributes (``task``,
``outcome``, ``timing``, ``freed``, ``ntasks``, ``failed``,
``running_since``, ...), with what only a cluster has: ``lost``,
``dashboard_link``, ``cluster_metrics``, ``worker_monitors``.  Keys the
cluster already held when the graph arrived (persisted collections, futures
given as inputs, an earlier run's results) are in ``cache`` from the start
and never run: they fire no hooks.
"""

from __future__ import annotations

from ..view import RunOutcome, StateView, TaskRecord, dependency_positions

_NO_TASK = TaskRecord(None, 0.0, 0.0, None, [])

WAITING, QUEUED, DONE = 0, 1, 2


class ClusterState(StateView):
    """The state of one computation on a cluster (see the module docstring).

    Per task, for the posttask firing: ``task`` (its ``start`` and ``end``:
    the worker's compute start and end, on the caller's clock; ``freed``;
    ``nbytes``, the result's size as the cluster measured it;
    ``activities``, ``(activity, start, stop)`` of its other startstops:
    transfer, disk-read, disk-write; or None), ``worker`` (address).  At ``finish``: ``failed``
    (key -> ``(exception, start, end, worker_id)``), ``running_since``
    (key -> ``(start, worker_id)`` of tasks a worker was *executing* when
    the computation stopped), ``queued_since`` (key -> ``(dispatched,
    worker_id)`` of tasks handed to a worker that had not started them, or
    whose start could not be learnt), ``lost`` (``(key, dispatched, lost,
    worker_id)`` of attempts whose worker died), ``incomplete`` (the event
    stream did not confirm its end in time), ``client``,
    ``dashboard_link`` (the cluster's own dashboard) and ``clock_offset``
    (the scheduler's clock minus the caller's, already taken out of every
    time here)."""

    FIELDS = ("dependencies", "dependents", "waiting", "waiting_data", "cache", "ready",
              "running", "finished", "released")

    def __init__(self, client=None, outputs: frozenset = frozenset()):
        self.client = client
        self.outputs = outputs
        self.deps: dict = {}  # key -> list of dependency keys (tasks to run)
        self.status: dict = {}  # key -> WAITING / QUEUED / DONE
        self.refs: dict = {}  # key -> dependents not yet done
        self._dependents: dict | None = None
        self.dispatched: dict = {}  # key -> (time, worker address)
        self.cache: dict = {}
        self.finished: set = set()
        self.released: set = set()
        # What every loop hands its callbacks (localsched.view): the record
        # of the task whose posttask fires, and the run's outcome.
        self.task: TaskRecord = _NO_TASK
        self.outcome = RunOutcome()
        self.worker: str | None = None
        self.queued_since: dict = {}
        self.lost: list = []
        self.incomplete = False
        self.cluster_metrics: dict | None = None
        self.detail_errors: list = []
        self.dashboard_link: str | None = getattr(client, "dashboard_link", None)
        self.clock_offset = 0.0
        # task group -> seconds its tasks computed (the workers' startstops),
        # kept only when the workers' samples are asked for (their weight)
        self.group_seconds: dict | None = None

    def load(self, rows: list) -> None:
        """The scheduler's view of the graph: ``(key, dependencies, in
        memory)`` per task it touched."""
        deps, status, refs, cache = self.deps, self.status, self.refs, self.cache
        for key, kdeps, in_memory in rows:
            if in_memory:
                cache[key] = None
                continue
            deps[key] = kdeps
            status[key] = WAITING
        for kdeps in deps.values():
            for d in kdeps:
                refs[d] = refs.get(d, 0) + 1
                if d not in deps:
                    cache.setdefault(d, None)  # held by the cluster already
        self.outcome.ntasks = len(deps)

    # -- StateView (ntasks, failed, running_since, timing, freed: from the base) ------

    def task_graph(self) -> tuple:
        return dependency_positions(self.deps)

    def task_keys(self) -> list:
        """The keys of the tasks the cluster runs for this computation."""
        return list(self.deps)

    late = property(lambda self: self.outcome.late)

    @property
    def samples(self) -> list:
        return self.outcome.samples

    @samples.setter
    def samples(self, rows: list) -> None:
        self.outcome.samples = rows

    @property
    def span(self) -> tuple:
        return self.outcome.span

    def worker_monitors(self, since: float, until: float) -> tuple:
        """The workers' own monitor samples between ``since`` and ``until``
        (this process's clock): ``([(time, worker, mem MB, cpu %), ...],
        remote)`` (what the ResourceProfiler asks of a cluster run; see
        ``_detail.worker_monitors``)."""
        from ._detail import worker_monitors

        return worker_monitors(self.client, since, until, self.clock_offset)

    # -- moves (the computation makes them, in the caller's thread) ----------------

    def dispatch(self, key, t: float, worker) -> bool:
        """The task went to a worker; True if it was not done already."""
        self.dispatched[key] = (t, worker)
        if self.status.get(key) == DONE:
            return False
        self.status[key] = QUEUED
        return True

    def done(self, key) -> list:
        """The task ended: the keys its end released (none when it ran again
        after its result was lost with a worker)."""
        self.dispatched.pop(key, None)
        if self.status.get(key) == DONE:
            return []
        self.status[key] = DONE
        self.finished.add(key)
        self.cache[key] = None
        freed = []
        refs, outputs = self.refs, self.outputs
        for d in self.deps.get(key, ()):
            left = refs.get(d, 0) - 1
            refs[d] = left
            if left <= 0 and d not in outputs and d in self.cache:
                del self.cache[d]
                self.released.add(d)
                freed.append(d)
        return freed

    # -- dask's mapping ------------------------------------------------------------------

    def __getitem__(self, name: str):
        if name == "cache":
            return self.cache
        if name == "finished":
            return self.finished
        if name == "released":
            return self.released
        if name == "dependencies":
            return {k: set(v) for k, v in self.deps.items()}
        if name == "dependents":
            return {k: set(v) for k, v in self._dependents_map().items()}
        if name == "running":
            return {k for k, s in list(self.status.items()) if s == QUEUED}
        if name == "ready":
            return [k for k, s in list(self.status.items())
                    if s == WAITING and self._unfinished(k) == set()]
        if name == "waiting":
            out = {}
            for k, s in list(self.status.items()):
                if s == WAITING:
                    left = self._unfinished(k)
                    if left:
                        out[k] = left
            return out
        if name == "waiting_data":
            dependents = self._dependents_map()
            return {k: {d for d in dependents.get(k, ()) if self.status.get(d) != DONE}
                    for k in list(self.cache)}
        raise KeyError(name)

    def _unfinished(self, key) -> set:
        status = self.status
        return {d for d in self.deps.get(key, ()) if d in status and status[d] != DONE}

    def _dependents_map(self) -> dict:
        if self._dependents is None:
            out: dict = {}
            for k, kdeps in self.deps.items():
                for d in kdeps:
                    out.setdefault(d, []).append(k)
            self._dependents = out
        return self._dependents

    def __iter__(self):
        return iter(self.FIELDS)

    def __len__(self) -> int:
        return len(self.FIELDS)

    def __repr__(self) -> str:
        return f"<ClusterState: {len(self.finished)}/{self.ntasks} tasks finished>"
