"""A batch on its way to a thread or process worker, as the pool loop
(``localsched.run.poolloop``) follows it: ``Flight``; and ``Overlay``, the
results a thread's batch makes for its own later tasks."""

from __future__ import annotations

from typing import Any

from .machine import RUNNING, RunState

__all__ = ["Flight", "Overlay"]


class Overlay(dict):
    """A batch's own results, falling back to the shared cache (set as
    ``.shared``): dict lookups stay in C except on a miss."""

    __slots__ = ("shared",)
    shared: dict

    def __missing__(self, key):
        return self.shared[key]


class Flight:
    """A batch on its way: what the loop knows of it, to say which of its
    tasks was running when a computation stops."""

    __slots__ = ("batch", "dispatched", "last_end", "worker_id", "where", "sent", "arrived",
                 "inputs", "future")

    def __init__(self, batch: list, dispatched: float):
        self.batch = batch
        self.future: Any = None
        self.dispatched = dispatched
        self.sent: tuple | None = None  # (start, end) of pickling its inputs (measuring)
        self.arrived = dispatched  # when its last hand-off of records arrived (measuring)
        self.last_end = dispatched
        self.worker_id = None
        self.where: list = []  # (worker_id, start) from a thread worker
        self.inputs = True  # False: a process batch sent no input values

    def running_task(self, machine: RunState, stopped: float,
                     at: int | None = None) -> tuple | None:
        """``(key, start, worker_id)`` of the batch's running task: ``at``
        (the task its worker says it runs) if unreported, else its first
        unreported one; it started at the latest when the last reported
        task ended."""
        if at is not None and machine.status[at] == RUNNING and at in self.batch:
            candidates: Any = (at,)
        else:
            candidates = self.batch
        for i in candidates:
            if machine.status[i] == RUNNING:
                started, wid = self.last_end, self.worker_id
                if self.where:
                    where_wid, where_start = self.where[0]
                    wid = wid if wid is not None else where_wid
                    started = max(started, where_start)
                return machine.keys[i], min(started, stopped), wid
        return None
