"""FineMetrics: where the time went, per span, task group and activity.

One flat mapping ``(span, group, activity, unit) -> value``, summed over the
tasks of every computation run inside the ``with`` block (the layout of
dask.distributed's fine performance metrics, without the leading
``"execute"``; see the comment in ``records.py``):

>>> import time
>>> from localsched.local import get_sync
>>> from localsched import metrics
>>> def load(n):
...     with metrics.meter("I/O"):
...         time.sleep(0.001)
...     metrics.digest_metric("rows", n, "count")
...     return n
>>> with FineMetrics() as fm:
...     get_sync({('load', 1): (load, 10), ('load', 2): (load, 5)}, [('load', 1), ('load', 2)])
(10, 5)
>>> fm.by("group", "activity", unit="count")
{('load', 'rows'): 15.0}
>>> sorted(fm.by("activity"))
['I/O', 'hand-off', 'idle', 'thread-cpu', 'thread-noncpu']
>>> sorted(fm.by("activity", unit=CALLER))
['scheduler']

Every worker-second is booked once: each worker has one timeline from the
computation's start to its finish, cut into activities (a task's CPU, its
other wall time, the user's ``metrics.meter`` labels; around the tasks
idle, hand-off and, on processes, start-up and travel), so that in
``seconds`` ``sum(fm.by("activity").values()) == wall × workers``.  The
caller's own costs are ``caller-seconds``.  The activities, one by one:
:class:`FineMetrics`.

Collecting is cheap and only while a FineMetrics is active: a worker reads
its thread's CPU clock once per hand-off and sends the seconds as one note
before the tasks they cover, split among them by wall time when read
(``localsched.run.task_records``): nothing is built per task for it, and
nothing of FineMetrics runs per task (it reads the run's task records,
``Needs(records=True)``); the mapping is built when read.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...callbacks import Needs
from ...utils import key_split
from ...view import TaskRecord, state_view
from ...worker.records_wire import PROBE_CPU, PROBE_METRICS
from .accounting import BatchStart, clip_tasks, gaps
from .budgets import disk_metrics, snapshot
from .collector import Collector, FinishedRun, LiveRun
from .records import ActivityData, MetricData

__all__ = ["FineMetrics", "FIELDS", "CALLER"]

#: The fields of a metric's key, in order.
FIELDS = ("span", "group", "activity", "unit")

#: The unit of the caller's own costs (its thread's CPU): not worker-seconds.
CALLER = "caller-seconds"


class _TaskRow(NamedTuple):
    """What fine metrics read of a task's record."""

    key: Any
    start: float
    end: float
    worker_id: Any
    probe: Any
    activities: tuple | None


def _task_rows(run: FinishedRun) -> list[_TaskRow]:
    """Each task of a run, from its task records (``TaskRecord``'s fields)."""
    return [_TaskRow(key, start, end, wid, probe, acts)
            for key, start, end, wid, _freed, _transfer, probe, acts, *_ in run.events]


def _batch_start(probe, acts) -> tuple:
    """(BatchStart or None, seconds the caller spent pickling the batch's
    inputs or None) of a task's probe: only a batch's first task says when
    the batch started (``localsched.worker.records_wire.Probe``)."""
    if probe is None:
        return None, None
    _cpu, _metrics, _received, started, fresh, _nbytes = probe
    if started is None:
        return None, None
    marks = {name: (a, b) for name, a, b in acts} if acts else {}
    if "transfer" in marks:  # processes: pickled in the caller, received in the worker
        (d0, d1), received = marks["serialize"], marks["transfer"][1]
        imported = marks["start-up"][1] if "start-up" in marks else None
        return BatchStart(started, d1, received, fresh, imported), d1 - d0
    return BatchStart(started), None


class FineMetrics(Collector):
    """Collect fine performance metrics of every computation in the block.

    ``metrics``: the mapping ``(span, group, activity, unit) -> value``;
    ``results``: :class:`ActivityData`, the timed stretches inside a task's
    life (metered blocks; on processes the travel of inputs and results);
    ``by(...)`` and ``to_rows()`` break the mapping down.

    Works on the sync, thread and process schedulers (a foreign pool passed
    as ``pool=`` records wall time only, as ``compute``).

    The activities.  Each worker has one timeline from the
    computation's start to its finish, cut into activities (see
    ``localsched.diagnostics.collectors.accounting``), so that in ``seconds`` (worker-seconds)
    ``sum(fm.by("activity").values()) == wall × workers``:

    - a task's own life: ``thread-cpu`` (CPU time of the thread that ran it,
      ``time.thread_time``: on pools read once per hand-off, about every
      millisecond and after every longer task, the stretch's CPU split among
      its tasks by wall time), ``thread-noncpu`` (its wall time minus that:
      waiting for the GIL, for I/O, sleeping), and each ``metrics.meter``
      label (the wall time of the metered blocks, taken out of the two others);
    - around the tasks, per worker: ``idle`` (waiting for work), ``hand-off``
      (between two tasks: storing results, handing records over), and on
      processes ``start-up`` (a worker process's first batch ever waited for
      the process to start), ``transfer`` (a batch's inputs on their way after
      the caller pickled them, while the worker was free), ``deserialize``
      (inputs received until the batch's first task starts) and ``serialize``
      (the worker pickling results it hands back, split evenly among them);
      ``serialize``/``transfer``/``deserialize`` belong to the task group they
      served, the rest to no group (None);
    - under dask's own schedulers, which measure nothing: ``compute`` (the
      wall time, not broken down).

    The caller's own costs are ``caller-seconds`` (group None): ``scheduler``,
    the CPU time the caller's thread spent in the computation besides running
    tasks (compiling, ordering, the scheduling loop, the callbacks: this one's
    too), and on processes ``serialize``, the part of it spent pickling inputs.
    Under a memory budget (``memory_limit=``) the values it spilled and read
    back are ``disk-write`` and ``disk-read`` of the task group whose result
    moved (dask.distributed's names), in ``caller-seconds`` (wall seconds of
    the writes and reads: the CPU they took is in ``scheduler`` too), ``bytes``
    and ``count`` (``localsched.diagnostics.collectors.budgets``).

    >>> from localsched.local import get_sync
    >>> with FineMetrics() as fm:
    ...     get_sync({('x', 1): (sum, [1, 2])}, ('x', 1))
    3
    >>> {k[2] for k in fm.metrics if k[1] == 'x'} == {'thread-cpu', 'thread-noncpu'}
    True
    """

    # Measure each task; no hook per task: it reads the run's records
    # (results may stay in the workers).
    needs = Needs(results=False, measure=True, records=True)

    record_type = ActivityData

    def _reset_built(self) -> None:
        self._built = []
        self._metrics: dict = {}

    def _dask_posttask(self, key, result, dsk, state, worker_id):
        import time

        end = time.time()
        run = self._run_of(state)
        run.events.append(TaskRecord(key, run.starts.pop(key, end), end, worker_id, []))

    def _at_finish(self, run: LiveRun, state):
        view = state_view(state)
        outcome = view.outcome  # (dask's schedulers: an empty one)
        return (outcome.span, outcome.overhead, list(outcome.late), view.cluster_metrics,
                outcome.extra.get("workers", 1), snapshot(state))

    def _build(self, run: FinishedRun) -> None:
        span, overhead, late, cluster, workers, budget = (run.extra
                                                          or ((), None, [], None, 1, None))
        metrics, activities = self._metrics, self._built
        disk = disk_metrics(budget, span)  # (a budget's spilling: the caller's)
        for k, v in disk.items():
            metrics[k] = metrics.get(k, 0.0) + v
        events = _task_rows(run)
        if cluster is not None:
            # A localsched.distributed run: the workers' own fine metrics
            # (dask.distributed's execute and gather-dep), and the tasks'
            # startstops other than compute (transfer, disk-read/-write) as
            # activities only: their time is in those metrics already.
            for k, v in cluster.items():
                metrics[k] = metrics.get(k, 0.0) + v
            for key, _t0, _t1, wid, _probe, acts in events:
                for name, start, stop in acts or ():
                    activities.append(ActivityData(key, name, start, stop, wid))
            return

        def add(group, activity, value, unit="seconds"):
            k = (span, group, activity, unit)
            metrics[k] = metrics.get(k, 0.0) + value

        measured = bool(events) and all(e.probe is not None for e in events)
        if not measured:  # dask's schedulers (or a foreign pool): wall time only
            for key, t0, t1, _wid, _probe, _acts in events:
                add(key_split(key), "compute", max(0.0, t1 - t0))
            return
        tasks, caller_pickling = [], 0.0
        for key, t0, t1, wid, probe, acts in events:
            batch, sent = _batch_start(probe, acts)
            if sent is not None:
                caller_pickling += sent
            tasks.append((key, t0, t1, wid, batch))
        tasks = clip_tasks(tasks, run.started, run.finished)
        probes = {e.key: e.probe for e in events}
        for key, t0, t1, wid, _batch in tasks:
            self._own(add, key, t1 - t0, probes[key], wid)
        worker_of = {key: wid for key, _t0, _t1, wid, _batch in tasks}
        handoffs = [(worker_of.get(keys[0]), keys, start, dumped, stop)
                    for keys, start, dumped, stop, _received in late if keys]
        for piece in gaps(tasks, handoffs, run.started, run.finished, workers):
            name = piece.activity
            grouped = name in ("serialize", "transfer", "deserialize")
            add(key_split(piece.key) if grouped else None, name, piece.stop - piece.start)
            if piece.key is not None:
                activities.append(ActivityData(piece.key, name, piece.start, piece.stop,
                                               piece.worker_id))
        if overhead is not None:  # caller-seconds: the caller's thread, not a worker's
            scheduler = overhead[0]
            pickling = min(caller_pickling, scheduler)
            add(None, "scheduler", scheduler - pickling, CALLER)
            if pickling:
                add(None, "serialize", pickling, CALLER)

    def _own(self, add, key, wall: float, probe, wid) -> None:
        """A task's own life: its metered blocks, then its CPU and the rest."""
        g = key_split(key)
        cpu, user = probe[PROBE_CPU], probe[PROBE_METRICS]
        metered_wall = metered_cpu = 0.0
        if user:
            for label, unit, value, ucpu, start, stop in user:
                add(g, label, value, unit)
                if ucpu is not None:  # a meter block: taken out of the rest
                    metered_wall += value
                    metered_cpu += ucpu
                    self._built.append(ActivityData(key, label, start, stop, wid))
        rest = max(0.0, wall - metered_wall)
        cpu = min(max(0.0, cpu - metered_cpu), rest)
        add(g, "thread-cpu", cpu)
        add(g, "thread-noncpu", rest - cpu)

    def timeline(self) -> list:
        """Every worker's timeline as :class:`ActivityData`: its tasks (as
        ``"task"``) and the pieces between them (start-up, idle, hand-off,
        travel), one record per stretch; per worker they cover the
        computation once."""
        out: list = []
        with self._build_lock:
            runs = list(self._raw)
        for run in runs:
            _span, _overhead, late, cluster, workers, _budget = (run.extra
                                                                 or ((), None, [], None, 1, None))
            events = _task_rows(run)
            if cluster is not None or not events or any(e.probe is None for e in events):
                continue
            tasks = clip_tasks([(e.key, e.start, e.end, e.worker_id,
                                 _batch_start(e.probe, e.activities)[0])
                                for e in events], run.started, run.finished)
            worker_of = {key: wid for key, _t0, _t1, wid, _batch in tasks}
            handoffs = [(worker_of.get(keys[0]), keys, start, dumped, stop)
                        for keys, start, dumped, stop, _received in late if keys]
            out.extend(ActivityData(key, "task", t0, t1, wid) for key, t0, t1, wid, _ in tasks)
            out.extend(ActivityData(p.key, p.activity, p.start, p.stop, p.worker_id)
                       for p in gaps(tasks, handoffs, run.started, run.finished, workers))
        return out

    # -- reading ------------------------------------------------------------------

    @property
    def metrics(self) -> dict:
        """``(span, group, activity, unit) -> value``, summed (a copy)."""
        with self._build_lock:
            self._ensure_built()
            return dict(self._metrics)

    def to_pandas(self):
        """The metrics as a pandas DataFrame, one row per ``(span, group,
        activity, unit)`` with its ``value``, largest first."""
        from ..reporting.tables import records_frame

        return records_frame(self.to_rows(), MetricData)

    def to_rows(self) -> list:
        """The mapping as :class:`MetricData` rows, largest value first."""
        rows = [MetricData(span, group, activity, unit, v)
                for (span, group, activity, unit), v in self.metrics.items()]
        rows.sort(key=lambda r: -r.value)
        return rows

    def by(self, *fields: str, unit: str | None = "seconds",
           inclusive: bool = False) -> dict:
        """Sum the metrics of ``unit`` (None: all units, then ``"unit"``
        should be among ``fields``) by one or more of ``span``, ``group``,
        ``activity``, ``unit``.

        One field: ``{value: total}``; several: ``{(values...): total}``.
        ``inclusive`` (with ``"span"``): a span's total includes the spans
        nested in it (``("load",)`` counts ``("load", "parse")`` too).

        >>> fm = FineMetrics()
        >>> fm._metrics = {(("a",), "x", "thread-cpu", "seconds"): 1.0,
        ...                (("a", "b"), "x", "thread-cpu", "seconds"): 2.0}
        >>> fm.by("span")
        {('a',): 1.0, ('a', 'b'): 2.0}
        >>> fm.by("span", inclusive=True)
        {('a',): 3.0, ('a', 'b'): 2.0}
        """
        if not fields:
            raise TypeError("by() needs at least one of " + ", ".join(map(repr, FIELDS)))
        for f in fields:
            if f not in FIELDS:
                raise ValueError(f"unknown field {f!r}; fields are {', '.join(FIELDS)}")
        if inclusive and "span" not in fields:
            raise ValueError("inclusive=True breaks down by span: include 'span' in fields")
        where = [FIELDS.index(f) for f in fields]
        out: dict = {}
        for k, v in self.metrics.items():
            if unit is not None and k[3] != unit:
                continue
            spans = [k[0][:n] for n in range(1, len(k[0]) + 1)] if inclusive else [k[0]]
            if inclusive and not k[0]:
                spans = [()]
            for s in spans:
                values = tuple(s if p == 0 else k[p] for p in where)
                name = values[0] if len(values) == 1 else values
                out[name] = out.get(name, 0.0) + v
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self._raw)} computations>"
