"""CPU percent and memory (RSS) of this process and its worker processes,
as the live page's resource plot samples them (``Feed.sample_resources``):
the workers are found from ``/proc`` where the platform has it, and at most
every few seconds, since finding them elsewhere reads every process of the
machine."""

from __future__ import annotations

import time

import psutil

from ...system import platform as _platform

__all__ = ["Resources", "children"]


def children(me: psutil.Process, platform: _platform.Platform | None = None) -> list:
    """The direct child processes of ``me``: on Linux from ``/proc``'s
    per-thread child lists (``_platform.child_pids``: a few small reads),
    elsewhere psutil's ``children()``, which reads every process of the
    machine (measured: 30-90 ms of the server thread, once per
    CHILDREN_EVERY).  ``platform``: whose answer (None: the detected one)."""
    pids = _platform.child_pids(me.pid, platform)
    if pids is None:
        return me.children()
    found = []
    for pid in pids:
        try:
            found.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return found


class Resources:
    """CPU percent and memory (RSS) of this process and its children."""

    #: Seconds between looks for new child processes (finding them reads
    #: every process of the machine).
    CHILDREN_EVERY = 5.0

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._procs: dict = {}
        self._children: list = []
        self._looked = -1e9

    def measure(self) -> tuple:
        now = time.monotonic()
        if now - self._looked > self.CHILDREN_EVERY:
            self._looked = now
            try:  # worker processes are direct children
                self._children = children(self._me)
            except psutil.Error:
                self._children = []
        procs = [self._me, *self._children]
        cpu = mem = 0.0
        known = {}
        for p in procs:
            p = self._procs.get(p.pid, p)
            try:
                with p.oneshot():
                    cpu += p.cpu_percent()
                    mem += p.memory_info().rss
                known[p.pid] = p
            except psutil.Error:
                continue
        self._procs = known
        return cpu, mem
