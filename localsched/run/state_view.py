"""What a callback receives: the state view, one record per task, one outcome per run.

Users import these names from ``localsched.view`` (the public front, which
re-exports this module); they live here, in the run, because the loops
build them and the front only reads the run.

Hooks keep dask's signatures (``posttask(key, result, dsk, state,
worker_id)`` ...).  ``state`` is a :class:`State`: dask's read-only Mapping
of the scheduler state (``state["cache"]``, ``state["ready"]`` ...), built
on access from the run's :class:`~localsched.run.machine.RunState`, plus two
typed attributes that say what happened:

- ``state.task``: the :class:`TaskRecord` of the task whose posttask fires
  (its worker-measured start and end, worker, the keys its end released,
  and what only some runs measure: travel, probe, activities, size);
- ``state.outcome``: the run's :class:`RunOutcome`, filled as the run goes
  and complete at ``finish`` (failed and interrupted tasks, the caller's
  span, what worker processes sent back: late hand-offs, stack samples; the
  scheduler's overhead; and while a callback asks for them, every task's
  record, so that callbacks which only read what happened need no hook
  per task).

``state.timing``, ``state.freed``, ``state.failed``, ``state.running_since``
and ``state.ntasks`` read those two (the names the docs document).

:class:`StateView` is the interface every diagnostic reads, whatever loop
produced the state: ``State`` (local loops) and companion mode's
``ClusterState`` are StateViews; dask's own schedulers hand their
callbacks a plain dict, which ``state_view(state)`` wraps (``DaskState``)
so that the diagnostics ask the same questions of all three, never
``getattr``.

The view points at the RunState; nothing points back at the view, so the
run is freed as soon as its last user lets go.

>>> from localsched.run.machine import RunState
>>> state = State(RunState({'a': 1, 'b': (abs, 'a')}, 'b'))
>>> len(state), state["waiting"], state["ready"], state["cache"]
(9, {}, ['b'], {'a': 1})
>>> state.task = TaskRecord('b', 1.0, 1.5, 7, [])
>>> state.timing, state.task.worker_id
((1.0, 1.5), 7)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..worker.records_wire import TaskRecord  # (declared with the other layouts of a record)
from .budget_record import BudgetRecord
from .machine import DONE, WAITING, RunState
from .task_records import TaskRecords

__all__ = ["State", "TaskRecord", "RunOutcome", "StateView", "DaskState", "state_view"]


@dataclass
class RunOutcome:
    """One computation's outcome (``state.outcome``), complete at ``finish``.

    ``ntasks``: tasks that will run; ``span``: the caller's
    ``localsched.span`` names when it started; ``failed``: key ->
    ``(exception, start, end, worker_id)`` of tasks that raised;
    ``running_since``: key -> ``(start, worker_id)`` of tasks still running
    when it stopped; ``late``: ``(keys, start, pickling seconds, stop,
    received)`` per hand-off of results from a worker process (measured
    runs); ``samples``: ``(time, worker_id, key, stack)`` stack samples
    taken in worker processes; ``overhead``: ``(scheduler CPU seconds,
    worker-seconds idle)`` (measured runs); ``extra``: what one kind of
    loop adds (a cluster: its client, lost attempts ...); ``records``: None,
    or while a callback needs them (``Needs.records``) the record of every
    finished task, appended as each ends (before its posttask hooks fire),
    complete at ``finish``: a :class:`~localsched.run.task_records.TaskRecords`,
    a sequence of tuples of :class:`TaskRecord`'s fields
    (``TaskRecord._make(r)`` names them; in hot loops unpack them or read
    ``r[TASK_START]``, ``records_wire``'s positions), kept by column so
    that a long run's records are no objects for the garbage collector to
    track.  ``memory``: None, or with a memory
    budget (``memory_limit=``) its :class:`~localsched.run.budget_record.BudgetRecord`
    (thresholds, held and spilled bytes over time, spill events).
    """

    ntasks: int = 0
    span: tuple = ()
    failed: dict = field(default_factory=dict)
    running_since: dict = field(default_factory=dict)
    late: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    overhead: tuple | None = None
    extra: dict = field(default_factory=dict)
    records: TaskRecords | None = None
    memory: BudgetRecord | None = None


_NO_TASK = TaskRecord(None, 0.0, 0.0, None, [])


class StateView(Mapping):
    """What a diagnostic reads of a computation, whatever loop runs it.

    dask's mapping fields (``state["cache"]``, ``state["finished"]`` ...),
    and: ``task`` (the :class:`TaskRecord` whose posttask fires), ``outcome``
    (the :class:`RunOutcome`), ``ntasks``, ``task_keys()`` (the keys of the
    tasks that run), ``failed``, ``running_since`` (None when the loop does
    not say: dask's schedulers), ``timing`` and ``freed`` (of ``task``);
    what only a cluster has: ``lost`` (attempts whose worker died),
    ``dashboard_link`` (its own dashboard), ``cluster_metrics`` (its
    workers' fine metrics) and ``worker_monitors(since, until)`` (its
    workers' resource samples, None elsewhere).
    """

    __slots__ = ()

    task: TaskRecord
    outcome: RunOutcome
    #: (key, dispatched, lost, worker_id) of attempts whose worker died
    lost: Sequence[tuple] = ()
    dashboard_link: str | None = None
    cluster_metrics: dict | None = None

    @property
    def ntasks(self) -> int:
        return self.outcome.ntasks

    def task_keys(self) -> list:
        """The keys of the ``ntasks`` tasks this computation runs."""
        raise NotImplementedError

    @property
    def failed(self) -> dict:
        return self.outcome.failed

    @property
    def running_since(self) -> dict | None:
        return self.outcome.running_since

    def task_graph(self) -> tuple | None:
        """``(keys, deps, order)``: the graph's keys by position, each
        position's dependencies (a tuple of positions) and the positions of
        the tasks in run order (None where the loop does not say); None when
        the loop knows no dependencies."""
        return None

    @property
    def timing(self) -> tuple:
        """``(start, end)`` of the task whose posttask fires."""
        task = self.task
        return (task.start, task.end)

    @property
    def freed(self) -> Sequence[Any]:
        """The keys whose results the end of that task released."""
        return self.task.freed

    def worker_monitors(self, since: float, until: float) -> tuple | None:
        """A cluster's workers' own resource samples (see ClusterState);
        None: the loop has none."""
        return None

    def at_work(self) -> tuple:
        """``(keys, ended)``: the keys of the tasks running at this moment
        (``state["running"]`` where the loop cannot tell better) and the
        keys of the tasks that ended whose records (and posttask hooks) have
        not arrived yet (none where the loop cannot tell): a live view's
        figures."""
        return set(self["running"]), []


class DaskState(StateView):
    """dask's own schedulers' plain dict state, read as a StateView: no task
    record, an empty outcome (dask's schedulers say nothing but the hooks),
    ``running_since`` None.

    >>> view = DaskState({'cache': {'a': 1}, 'dependencies': {'a': set(), 'b': {'a'}},
    ...                   'ready': ['b'], 'waiting': {}, 'running': set(), 'finished': set()})
    >>> view.ntasks, view.task_keys(), view['cache'], view.running_since
    (1, ['b'], {'a': 1}, None)
    """

    __slots__ = ("_state", "outcome")

    task = _NO_TASK

    def __init__(self, state: Mapping):
        self._state = state
        self.outcome = RunOutcome()

    @property
    def ntasks(self) -> int:
        state = self._state
        return sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))

    def task_keys(self) -> list:
        # the graph's keys but data (in the cache, with nothing computed yet)
        cache = self._state["cache"]
        return [k for k in self._state["dependencies"] if k not in cache]

    @property
    def running_since(self) -> None:
        return None

    def task_graph(self) -> tuple | None:
        deps = self._state.get("dependencies")
        return dependency_positions(deps) if isinstance(deps, Mapping) else None

    def __getitem__(self, name: str):
        return self._state[name]

    def __iter__(self):
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)

    def __repr__(self) -> str:
        return f"<DaskState: {len(self._state['finished'])}/{self.ntasks} tasks finished>"


def dependency_positions(deps: Mapping) -> tuple:
    """key -> dependency keys as ``(keys, deps by position, None)``, the
    layout of :meth:`StateView.task_graph` (keys named only as dependencies
    are appended, with none of their own).

    >>> dependency_positions({'b': ['a'], 'c': ['a', 'b']})
    (['b', 'c', 'a'], [(2,), (2, 0), ()], None)
    """
    keys = list(deps)
    index = {k: i for i, k in enumerate(keys)}
    for kdeps in deps.values():
        for d in kdeps:
            if d not in index:
                index[d] = len(keys)
                keys.append(d)
    positions = [tuple(index[d] for d in kdeps) for kdeps in deps.values()]
    positions += [()] * (len(keys) - len(positions))
    return keys, positions, None


def state_view(state: Mapping) -> StateView:
    """The StateView of a hook's ``state``: itself, or dask's dict wrapped
    (a new wrapper per call: read it, key runs by the state itself)."""
    return state if isinstance(state, StateView) else DaskState(state)


class State(StateView):
    """The scheduler state handed to callbacks: a read-only Mapping with
    dask's documented fields.

    - ``cache`` (live dict key -> result), ``finished`` (live set of finished
      keys), ``released`` (live set of keys whose results left the cache);
    - ``dependencies`` and ``dependents`` (key -> set of keys, per lookup);
    - ``ready`` (list of keys, next first), ``running`` (set), ``waiting``
      (Mapping key -> set of unfinished dependencies, for tasks not yet
      ready), ``waiting_data`` (dict key -> set of unfinished dependents, for
      cached keys): snapshots built on access from what is live, so an
      access costs O(ready + running + cache), never a walk of the graph
      (``len(state["waiting"])`` included).

    And ``task`` (:class:`TaskRecord`) and ``outcome`` (:class:`RunOutcome`):
    see the module docstring; the rest of :class:`StateView`.
    """

    FIELDS = ("dependencies", "dependents", "waiting", "waiting_data", "cache", "ready",
              "running", "finished", "released")

    # Slots: callbacks read state.task once per task.
    __slots__ = ("_machine", "cache", "finished", "released", "task", "outcome", "_static",
                 "__weakref__")

    def __init__(self, machine: RunState, outcome: RunOutcome | None = None):
        self._machine = machine
        self.cache: dict = machine.cache
        self.finished: set = machine.finished
        self.released: set = machine.released
        self.task: TaskRecord = _NO_TASK
        self.outcome = outcome if outcome is not None else RunOutcome(machine.ntasks)
        self._static: dict = {}

    # -- StateView (timing, freed, ntasks, failed, running_since: from the base) -------

    def task_keys(self) -> list:
        """The keys of the ``ntasks`` tasks this computation runs, in run
        order (a new list, built in C: a progress display's groups)."""
        return list(map(self._machine.keys.__getitem__, self._machine.order))

    def at_work(self) -> tuple:
        """See ``StateView.at_work`` (``RunState.at_work``)."""
        return self._machine.at_work()

    def task_graph(self) -> tuple:
        """``(keys, deps, order)``: the compiled graph's keys by position,
        each position's dependencies (a tuple of positions) and the positions
        of the tasks this computation runs, in run order -- the scheduler's
        own lists, not copied (read them, never change them)."""
        machine = self._machine
        return machine.keys, machine.deps, machine.order

    # -- the Mapping --------------------------------------------------------------

    def __getitem__(self, name: str):
        if name == "cache":
            return self.cache
        if name == "finished":
            return self.finished
        if name == "released":
            return self.released
        machine = self._machine
        if name in ("dependencies", "dependents"):
            if name not in self._static:
                self._static[name] = _Adjacency(machine, name == "dependencies")
            return self._static[name]
        if name == "ready":
            return machine.ready_keys()
        if name == "running":
            return machine.running_keys()
        if name == "waiting":
            return _Waiting(machine)
        if name == "waiting_data":
            keys, status, index, dependents = (machine.keys, machine.status, machine.index,
                                               machine.dependents)
            # (a snapshot of the keys: callbacks such as dask's ProgressBar
            # read the state from their own thread while the run goes on)
            return {k: {keys[j] for j in dependents[index[k]] if status[j] != DONE}
                    for k in list(machine.cache)}
        raise KeyError(name)

    def __iter__(self):
        return iter(self.FIELDS)

    def __len__(self) -> int:
        return len(self.FIELDS)

    def __repr__(self) -> str:
        return f"<State: {len(self.finished)}/{self.outcome.ntasks} tasks finished>"


class _Waiting(Mapping):
    """``state["waiting"]``: key -> its unfinished dependencies, for tasks not
    yet ready.  Its length counts the states' bytes, in C (dask's
    ProgressBar asks for it ten times a second); a lookup costs one task's
    dependencies; only iterating it walks the graph."""

    def __init__(self, machine: RunState):
        self._machine = machine

    def __getitem__(self, key):
        m = self._machine
        i = m.index.get(key)
        if i is None or not m.in_run[i] or m.status[i] != WAITING:
            raise KeyError(key)
        keys, status = m.keys, m.status
        return {keys[d] for d in m.deps[i] if status[d] != DONE}

    def __iter__(self):
        m = self._machine
        keys, status = m.keys, m.status
        return (keys[i] for i in m.order if status[i] == WAITING)

    def __len__(self) -> int:
        return self._machine.waiting_count()

    def __repr__(self) -> str:
        return repr(dict(self))


class _Adjacency(Mapping):
    """``state["dependencies"]`` / ``state["dependents"]``: key -> set of keys,
    computed per lookup from the compiled graph (building the whole dict
    would cost more than a typical callback spends on a run)."""

    def __init__(self, machine: RunState, forward: bool):
        self._machine = machine
        self._forward = forward

    def __getitem__(self, key):
        m = self._machine
        i = m.index[key]
        if not m.in_run[i]:
            raise KeyError(key)
        keys = m.keys
        adjacency = m.deps if self._forward else m.dependents
        return {keys[j] for j in adjacency[i]}

    def __iter__(self):
        return map(self._machine.keys.__getitem__, self._machine.needed)

    def __len__(self) -> int:
        return len(self._machine.needed)
