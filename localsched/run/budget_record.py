"""What a memory budget did during one computation: ``state.outcome.memory``.

A plain record, filled by the scheduler's budget (None when the run has no
budget) and read by the diagnostics (fine metrics, the report's memory
panel, the live dashboard, the findings).  It lives apart from the spill
store so that reading it imports nothing that writes files.

Names follow dask.distributed where they fit: ``target`` is the level
from which held results are spilled (distributed's ``memory.target``),
``pause`` the level above which tasks that would add to what is held wait
(``memory.pause``); the activities are distributed's fine-metric names,
``"disk-write"`` and ``"disk-read"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BudgetRecord", "DISK_WRITE", "DISK_READ"]

DISK_WRITE = "disk-write"
DISK_READ = "disk-read"


@dataclass
class BudgetRecord:
    """One computation's memory budget and what it cost.

    ``limit``, ``target``, ``pause``: bytes (the budget, the level spilling
    starts from, the level new work waits above);
    ``timeline``: ``(time, held_bytes, spilled_bytes)`` samples, epoch
    seconds, in time order (held: results kept in memory, as counted by the
    budget; spilled: bytes on disk at that time);
    ``events``: ``(start, end, activity, key, nbytes)`` per spill
    (``"disk-write"``) and read back (``"disk-read"``), epoch seconds, the
    task key whose result moved and the bytes written or read;
    ``paused_seconds``: seconds new work waited above ``pause``.
    """

    limit: int
    target: int
    pause: int
    timeline: list = field(default_factory=list)
    events: list = field(default_factory=list)
    paused_seconds: float = 0.0

    def spilled_bytes(self) -> int:
        """Bytes written to disk in all (a value spilled twice counts twice)."""
        return sum(e[4] for e in self.events if e[2] == DISK_WRITE)

    def disk_seconds(self) -> float:
        """Seconds spent writing and reading spilled values."""
        return sum(e[1] - e[0] for e in self.events)

    def peak_held(self) -> int:
        """The largest ``held_bytes`` of the timeline (0 when empty)."""
        return max((t[1] for t in self.timeline), default=0)

    def peak_spilled(self) -> int:
        """The largest ``spilled_bytes`` of the timeline (0 when empty)."""
        return max((t[2] for t in self.timeline), default=0)
