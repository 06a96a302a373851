"""The scheduler side of the cluster tier: a SchedulerPlugin that streams
one client's task events back to it.

This module is shipped to the scheduler *by value* (cloudpickle), so a
scheduler without localsched installed can run it: it imports only the
standard library and distributed, and nothing from localsched.

Why a scheduler plugin.  The exact per-task times exist only in the
worker's task-finished message, which the scheduler hands unchanged to
``SchedulerPlugin.transition(key, "processing", "memory", **msg)``
(``startstops``, ``worker``, ``thread``, ``nbytes``).  A WorkerPlugin sees
the true execution start, but sending one message per task start from the
workers cost about 17 % of wall time on tiny tasks (design brief, section
3), over the 10 % budget; the scheduler sees every task of the run in one
place, and batching its events costs nothing measurable.  So ``pretask``
fires when the scheduler dispatches a task to a worker, and the true start
is in the worker's startstops.

Events are buffered and sent every ``FLUSH_INTERVAL`` seconds straight to
the one client that asked (through ``Scheduler.send_all``, the path the
scheduler's event broker uses, without keeping a copy in a topic).  The
barrier: the client logs an event on ``MARK_TOPIC``; the plugin sees it
(``log_event`` hook), flushes, and sends the mark after everything before
it, on the same ordered stream.

Each event is a tuple, first item the kind:

- ``("dispatch", key, time, worker)``: waiting/queued -> processing;
- ``("done", key, time, worker, thread, startstops, nbytes)``:
  processing -> memory, with the worker's own report;
- ``("erred", key, time, worker, thread, startstops, text)``: the task
  raised, or its worker died too often (KilledWorker);
- ``("lost", key, time, worker)``: processing -> released/waiting (its
  worker died or left; the scheduler will run it again);
- ``("workers", n)``: a worker joined or left; n workers remain;
- ``("mark", token)``: the barrier.
"""

from __future__ import annotations

from time import time

from distributed.diagnostics.plugin import SchedulerPlugin

#: Seconds between two sends of buffered events.
FLUSH_INTERVAL = 0.01
#: The topic a client logs a barrier on (``{"client": id, "token": t}``).
MARK_TOPIC = "localsched-mark"
#: Version of the event layout, part of the plugin's name.
VERSION = 1


def plugin_name(client_id: str) -> str:
    return f"localsched-stream-v{VERSION}-{client_id}"


def topic_name(client_id: str) -> str:
    return f"localsched-stream-v{VERSION}-{client_id}"


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
        self.scheduler = None

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def update_graph(self, scheduler, *, client=None, tasks=(), **kwargs) -> None:
        if client == self.client_id:
            self.watch.update(tasks)

    def transition(self, key, start, finish, *args, stimulus_id=None, **kw) -> None:
        if key not in self.watch:
            return
        if finish == "processing":
            ts = self.scheduler.tasks.get(key)
            ws = ts.processing_on if ts is not None else None
            ev = ("dispatch", key, time(), ws.address if ws is not None else None)
        elif start == "processing" and finish == "memory":
            ev = ("done", key, time(), kw.get("worker"), kw.get("thread"),
                  kw.get("startstops"), kw.get("nbytes"))
        elif finish == "erred":
            if start != "processing":
                return  # a dependent of a failed task: not a failure of its own
            ev = ("erred", key, time(), kw.get("worker"), kw.get("thread"),
                  kw.get("startstops"), kw.get("exception_text") or "")
        elif start == "processing":
            ev = ("lost", key, time(), kw.get("worker"))
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
        msg = {"op": "event", "topic": self.topic, "event": (time(), batch)}
        if self.client_id in self.scheduler.client_comms:
            self.scheduler.send_all({self.client_id: [msg]}, worker_msgs={})

    def log_event(self, topic, msg) -> None:
        if topic == MARK_TOPIC and isinstance(msg, dict) and msg.get("client") == self.client_id:
            self.buffer.append(("mark", msg.get("token")))
            self.flush()

    def add_worker(self, scheduler, worker: str) -> None:
        self._add(("workers", len(scheduler.workers)))

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        self._add(("workers", len(scheduler.workers)))

    def remove_client(self, scheduler, client: str) -> None:
        if client == self.client_id:
            self.watch.clear()
            self.buffer.clear()
            # (not while the scheduler iterates over its plugins)
            scheduler.loop.add_callback(scheduler.remove_plugin, name=self.name)


# -- run on the scheduler / the workers by localsched.distributed._detail ----------
# (here, so they travel by value with this module)


def scheduler_metrics(dask_scheduler=None) -> dict:
    """The scheduler's cumulative fine metrics of the workers: the
    ``("execute", span, prefix, activity, unit)`` and ``("gather-dep",
    activity, unit)`` entries."""
    return {k: v for k, v in dask_scheduler.cumulative_worker_metrics.items()
            if type(k) is tuple and k and k[0] in ("execute", "gather-dep")}


async def worker_flush(dask_worker=None) -> None:
    """Send the worker's metrics now and fold its current profile cycle in
    (both otherwise wait for their periodic callbacks)."""
    dask_worker.cycle_profile()
    await dask_worker.heartbeat()


def worker_transfers(start: float, stop: float, dask_worker=None) -> list:
    """``(peer, my address, bytes, start, stop)`` of the transfers this
    worker received between ``start`` and ``stop``."""
    return [(t["who"], dask_worker.address, t["total"], t["start"], t["stop"])
            for t in list(dask_worker.transfer_incoming_log)
            if start <= t["start"] and t["stop"] <= stop + 1.0]


def worker_monitor(start: float, stop: float, dask_worker=None) -> list:
    """``(time, cpu %, memory bytes)`` of this worker's SystemMonitor samples
    (every 0.5 s by default; the worker's clock) between start and stop."""
    q = dask_worker.monitor.range_query(start=0)
    return [(t, cpu, mem) for t, cpu, mem in zip(q["time"], q["cpu"], q["memory"])
            if t is not None and start <= t <= stop]
