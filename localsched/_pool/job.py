"""What a worker process knows about the job it is running.

Set by ``worker`` (the worker process's main loop), read by the batch
runner in ``localsched.core`` (fine metrics) and by the pool's own modules.
No imports: the lowest module of the package.

- ``worker_pid``: this process's pid in a pool worker, 0 in the caller
  (records then name the process, not the thread);
- ``arrival``: ``(received, decoded)`` wall times of the current job's
  message, or None once read;
- ``dump_seconds``: seconds the last emit spent pickling its records.
"""

from __future__ import annotations

from typing import Optional

worker_pid: int = 0
arrival: Optional[tuple[float, float]] = None
dump_seconds: float = 0.0


def take_arrival() -> Optional[tuple[float, float]]:
    """The current job's arrival times, once (None afterwards)."""
    global arrival
    value, arrival = arrival, None
    return value
