"""The scheduler side of companion mode: a SchedulerPlugin that streams one
client's task events back to it, and the small functions the client runs on
the scheduler and the workers.

This module is shipped to the scheduler *by value* (cloudpickle), so a
scheduler without localsched installed can run it: it imports only the
standard library and distributed, and nothing from localsched.

Why a scheduler plugin.  The exact per-task times exist only in the
worker's task-finished message, which the scheduler hands unchanged to
``SchedulerPlugin.transition(key, "processing", "memory", **msg)``
(``startstops``, ``worker``, ``thread``, ``nbytes``).  A WorkerPlugin sees
the true execution start, but one message per task start from the workers
costs a large share of wall time on tiny tasks (``benchmarks/README.md``);
the scheduler sees every task in one place, and batching its events costs
nothing measurable.  So
``pretask`` fires when the scheduler dispatches a task to a worker, and the
true start is in the worker's startstops.

Events are buffered and sent every ``FLUSH_INTERVAL`` seconds straight to
the one client that asked (``Scheduler.send_all``, the path the event
broker uses, without keeping a copy in a topic).  The barrier: the client
logs an event on ``MARK_TOPIC``; the plugin sees it (``log_event`` hook),
flushes, and sends the mark after everything before it, on the same
ordered stream.

Each event is a tuple, first item the kind:

- ``("graph", requested keys, [(key, dependency keys, in memory), ...])``:
  an ``update_graph`` of this client (any API: ``get``, ``compute``,
  ``submit``...), with every task it touched, before any of them moves;
- ``("dispatch", key, time, worker)``: waiting/queued -> processing;
- ``("done", key, time, worker, thread, startstops, nbytes)``:
  processing -> memory, with the worker's own report;
- ``("erred", key, time, worker, thread, startstops, text)``: the task
  raised, or its worker died too often (KilledWorker);
- ``("lost", key, time, worker, stimulus id)``: processing ->
  released/waiting (its worker died or left, and the scheduler will run it
  again; or it was cancelled);
- ``("worker-left", address)``;
- ``("mark", token)``: the barrier.

Times are the scheduler's clock (``scheduler_clock``); the client converts.
"""

from __future__ import annotations

import time as _time
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

#: Seconds between two sends of buffered events.
FLUSH_INTERVAL = 0.01
#: The topic a client logs a barrier on (``{"client": id, "token": t}``).
MARK_TOPIC = "localsched-mark"
#: Version of the event layout, part of the plugin's name.
VERSION = 2


def plugin_name(client_id: str) -> str:
    return f"localsched-stream-v{VERSION}-{client_id}"


def topic_name(client_id: str) -> str:
    return f"localsched-stream-v{VERSION}-{client_id}"


def scheduler_clock(dask_scheduler=None) -> float:
    """The scheduler's wall clock (looked up at each call: a test may shift
    it in a scheduler process)."""
    return _time.time()


class StreamPlugin(SchedulerPlugin):
    """Stream the task events of one client's graphs to that client."""

    idempotent = True

    def __init__(self, client_id: str):
        self.client_id = client_id
        self.name = plugin_name(client_id)
        self.topic = topic_name(client_id)
        self.watch: set = set()  # keys of this client's graphs, until forgotten
        self.buffer: list = []
        self.pending = False  # a flush is scheduled
        self.scheduler: Any = None

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def update_graph(self, scheduler, *, client=None, tasks=(), keys=(), **kwargs) -> None:
        if client != self.client_id:
            return
        self.watch.update(tasks)
        known = scheduler.tasks
        rows = []
        for key in tasks:
            ts = known.get(key)
            if ts is None:
                continue
            rows.append((key, [d.key for d in ts.dependencies], ts.state == "memory"))
        self._add(("graph", list(keys), rows))

    def transition(self, key, start, finish, *args, stimulus_id=None, **kw) -> None:
        if key not in self.watch:
            return
        ev: tuple
        if finish == "processing":
            ts = self.scheduler.tasks.get(key)
            ws = ts.processing_on if ts is not None else None
            ev = ("dispatch", key, _time.time(), ws.address if ws is not None else None)
        elif start == "processing" and finish == "memory":
            ev = ("done", key, _time.time(), kw.get("worker"), kw.get("thread"),
                  kw.get("startstops"), kw.get("nbytes"))
        elif finish == "erred":
            if start != "processing":
                return  # a dependent of a failed task: not a failure of its own
            ev = ("erred", key, _time.time(), kw.get("worker"), kw.get("thread"),
                  kw.get("startstops"), kw.get("exception_text") or "")
        elif start == "processing":
            ev = ("lost", key, _time.time(), kw.get("worker"), stimulus_id or "")
        else:
            if finish == "forgotten":
                self.watch.discard(key)
            return
        self._add(ev)

    def _add(self, ev) -> None:
        self.buffer.append(ev)
        if not self.pending:
            self.pending = True
            self.scheduler.loop.call_later(FLUSH_INTERVAL, self.flush)

    def flush(self) -> None:
        self.pending = False
        if not self.buffer:
            return
        batch, self.buffer = self.buffer, []
        msg = {"op": "event", "topic": self.topic, "event": (_time.time(), batch)}
        if self.client_id in self.scheduler.client_comms:
            self.scheduler.send_all({self.client_id: [msg]}, worker_msgs={})

    def log_event(self, topic, msg) -> None:
        if topic == MARK_TOPIC and isinstance(msg, dict) and msg.get("client") == self.client_id:
            self.buffer.append(("mark", msg.get("token")))
            self.flush()

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        self._add(("worker-left", worker))

    def remove_client(self, scheduler, client: str) -> None:
        if client == self.client_id:
            self.watch.clear()
            self.buffer.clear()
            # (not while the scheduler iterates over its plugins)
            scheduler.loop.add_callback(scheduler.remove_plugin, name=self.name)


# -- run on the scheduler ------------------------------------------------------------


def error_cause(keys: list, dask_scheduler=None):
    """``(key, run_spec, dependency keys)`` of the task the scheduler blames
    for the failure of ``keys`` (None if none failed)."""
    for key in keys:
        ts = dask_scheduler.tasks.get(tuple(key) if isinstance(key, list) else key)
        blame = ts.exception_blame if ts is not None else None
        if blame is not None:
            return blame.key, blame.run_spec, [d.key for d in blame.dependencies]
    return None


def scheduler_metrics(dask_scheduler=None) -> dict:
    """The scheduler's cumulative fine metrics of the workers: the
    ``("execute", span, prefix, activity, unit)`` and ``("gather-dep",
    activity, unit)`` entries."""
    return {k: v for k, v in dask_scheduler.cumulative_worker_metrics.items()
            if type(k) is tuple and k and k[0] in ("execute", "gather-dep")}


# -- run on the workers ------------------------------------------------------------
# Worker clocks: ``time + dask_worker.scheduler_delay`` is the scheduler's clock.


def executing(keys: list, dask_worker=None) -> list:
    """``(key, start on the scheduler's clock, thread)`` of the tasks among
    ``keys`` this worker is executing now (not those it holds queued)."""
    wanted = {tuple(k) if isinstance(k, list) else k for k in keys}
    threads = {key: thread for thread, key in dict(dask_worker.active_threads).items()}
    delay = dask_worker.scheduler_delay
    out = []
    state = dask_worker.state
    for ts in list(state.executing) + list(state.long_running):
        if ts.key in wanted:
            start = ts.start_time + delay if ts.start_time is not None else None
            out.append((ts.key, start, threads.get(ts.key)))
    return out


async def worker_flush(dask_worker=None) -> None:
    """Send the worker's metrics now and fold its current profile cycle in
    (both otherwise wait for their periodic callbacks)."""
    dask_worker.cycle_profile()
    await dask_worker.heartbeat()


def worker_transfers(start: float, stop: float, dask_worker=None) -> list:
    """``(peer, my address, bytes, start, stop)`` of the transfers this
    worker received between ``start`` and ``stop`` (the scheduler's clock:
    incoming transfer times are corrected by the worker)."""
    return [(t["who"], dask_worker.address, t["total"], t["start"], t["stop"])
            for t in list(dask_worker.transfer_incoming_log)
            if start <= t["start"] and t["stop"] <= stop + 1.0]


def worker_monitor(start: float, stop: float, dask_worker=None) -> list:
    """``(time, cpu %, memory bytes)`` of this worker's SystemMonitor samples
    (every 0.5 s by default) between start and stop, on the scheduler's
    clock (the monitor keeps the worker's own)."""
    delay = dask_worker.scheduler_delay
    q = dask_worker.monitor.range_query(start=0)
    return [(t + delay, cpu, mem)
            for t, cpu, mem in zip(q["time"], q["cpu"], q["memory"], strict=False)
            if t is not None and start <= t + delay <= stop]
