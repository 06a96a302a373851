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
['I/O', 'scheduler', 'thread-cpu', 'thread-noncpu']

Activities, per task (seconds):

- ``thread-cpu``: CPU time of the thread that ran it (``time.thread_time``);
- ``thread-noncpu``: its wall time minus that: waiting for the GIL, for
  I/O, sleeping;
- a ``metrics.meter`` label: the wall time of the metered blocks, taken out
  of the two above, so that a task's activities add up to its wall time;
- on processes, for the first task of a batch, how its inputs travelled:
  ``serialize`` (pickled in the caller), ``transfer`` (until the worker
  process had them: the pool's queue and the pipe), ``deserialize``
  (unpickled in the worker); and for a task whose result travels back:
  ``queued`` (the result waited in the worker for the next hand-off),
  ``serialize`` (pickled in the worker), ``transfer`` (the pipe, unpickling
  in the caller, and until the scheduler read it).  A hand-off of several
  results bills its pickling and transfer to each of them, so each task's
  activities add up to its own life, from the arrival of its inputs to the
  receipt of its result;
- under dask's own schedulers, which measure nothing: ``compute`` (the
  wall time, not broken down).

Per computation, with group None: ``scheduler``, the CPU time the caller's
thread spent in the computation besides running tasks (compiling, ordering,
the scheduling loop, the callbacks: this one's too); ``idle``,
worker-seconds during which a worker was free and no task was ready (thread
and process pools).

Collecting costs about a microsecond per task, only while a FineMetrics is
active: the scheduler reads the thread's CPU clock once per task boundary
and ships plain tuples; the mapping is built when read.
"""

from __future__ import annotations

from typing import Optional

from ..utils import key_split
from ..callbacks import Needs
from .collector import Collector, FinishedRun
from .records import ActivityData, MetricData

__all__ = ["FineMetrics", "FIELDS"]

#: The fields of a metric's key, in order.
FIELDS = ("span", "group", "activity", "unit")


class FineMetrics(Collector):
    """Collect fine performance metrics of every computation in the block.

    ``metrics``: the mapping ``(span, group, activity, unit) -> value``;
    ``results``: :class:`ActivityData`, the timed stretches inside a task's
    life (metered blocks; on processes the travel of inputs and results);
    ``by(...)`` and ``to_rows()`` break the mapping down.

    Works on the sync, thread and process schedulers (a foreign pool passed
    as ``pool=`` records wall time only, as ``compute``).

    >>> from localsched.local import get_sync
    >>> with FineMetrics() as fm:
    ...     get_sync({('x', 1): (sum, [1, 2])}, ('x', 1))
    3
    >>> {k[2] for k in fm.metrics if k[1] == 'x'} == {'thread-cpu', 'thread-noncpu'}
    True
    """

    # Measure each task; its posttask never reads the result (results may
    # stay in the workers).
    needs = Needs(results=False, measure=True)

    record_type = ActivityData

    def _reset_built(self) -> None:
        self._built = []
        self._metrics: dict = {}

    def _posttask(self, key, result, dsk, state, worker_id):
        run = self._current  # (Collector._events, inlined: this runs once per task)
        if run[0] is not state:
            run = self._current = self._live[id(state)]
        # (state.task is a TaskRecord, unpacked in C: this runs once per task)
        _, start, end, _, _, _, probe, activities, _ = state.task
        run[1].append((key, start, end, worker_id, probe, activities))

    def _dask_posttask(self, key, result, dsk, state, worker_id):
        import time

        end = time.time()
        run = self._run_of(state)
        run[1].append((key, run[4].pop(key, end), end, worker_id, None, None))

    def _at_finish(self, run: tuple, state):
        outcome = getattr(state, "outcome", None)  # (None: dask's schedulers' plain dict)
        if outcome is None:
            return ((), None, [], None)
        cluster = getattr(state, "cluster_metrics", None) or outcome.extra.get("cluster_metrics")
        return (outcome.span, outcome.overhead, list(outcome.late), cluster)

    def _build(self, run: FinishedRun) -> None:
        span, overhead, late, cluster = run.extra or ((), None, [], None)
        metrics, activities = self._metrics, self._built
        if cluster is not None:
            # A localsched.distributed run: the workers' own fine metrics
            # (dask.distributed's execute and gather-dep), and the tasks'
            # startstops other than compute (transfer, disk-read/-write) as
            # activities only: their time is in those metrics already.
            for k, v in cluster.items():
                metrics[k] = metrics.get(k, 0.0) + v
            for key, _t0, _t1, wid, _probe, acts in run.events:
                for name, start, stop in acts or ():
                    activities.append(ActivityData(key, name, start, stop, wid))
            return
        def add(group, activity, value, unit="seconds"):
            k = (span, group, activity, unit)
            metrics[k] = metrics.get(k, 0.0) + value

        for key, t0, t1, wid, probe, acts in run.events:
            g = key_split(key)
            wall = t1 - t0
            if probe is None:
                add(g, "compute", max(0.0, wall))
            else:
                cpu, user = probe[0], probe[1]
                metered_wall = metered_cpu = 0.0
                if user:
                    for label, unit, value, ucpu, start, stop in user:
                        add(g, label, value, unit)
                        if ucpu is not None:  # a meter block: taken out of the rest
                            metered_wall += value
                            metered_cpu += ucpu
                            activities.append(ActivityData(key, label, start, stop, wid))
                rest = max(0.0, wall - metered_wall)
                cpu = min(max(0.0, cpu - metered_cpu), rest)
                add(g, "thread-cpu", cpu)
                add(g, "thread-noncpu", rest - cpu)
            if acts:
                for name, start, stop in acts:
                    add(g, name, max(0.0, stop - start))
                    activities.append(ActivityData(key, name, start, stop, wid))
        if late:
            ends = {key: (t1, wid) for key, _t0, t1, wid, _, _ in run.events}
            for keys, start, dumped, stop, received in late:
                for key in keys:
                    end, wid = ends.get(key, (start, None))
                    g = key_split(key)
                    stretches = (("queued", end, start), ("serialize", start, start + dumped),
                                 ("transfer", start + dumped, max(received, start + dumped)))
                    for name, a, b in stretches:
                        add(g, name, max(0.0, b - a))
                        activities.append(ActivityData(key, name, a, b, wid))
        if overhead is not None:
            scheduler, idle = overhead
            add(None, "scheduler", scheduler)
            if idle:
                add(None, "idle", idle)

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
        from .tables import records_frame

        return records_frame(self.to_rows(), MetricData)

    def to_rows(self) -> list:
        """The mapping as :class:`MetricData` rows, largest value first."""
        rows = [MetricData(*k, v) for k, v in self.metrics.items()]
        rows.sort(key=lambda r: -r.value)
        return rows

    def by(self, *fields: str, unit: Optional[str] = "seconds",
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
