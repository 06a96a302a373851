"""The machine's speed during a recording: a fixed piece of work, timed.

On a shared or virtual machine the same code burns more CPU seconds at one
moment than at another -- up to twice as many, in phases of a tenth of a
second, with nothing inside the machine to say so (a neighbour on the
host's other hyperthread, its caches; hardware counters are often absent).
Two runs' CPU seconds then differ by the machine's phases as much as by the
code.  ``SpeedProbe`` measures those phases beside the run: a thread that,
every ``INTERVAL``, times a fixed loop of Python bytecode on its thread's
CPU clock (time spent waiting for a CPU does not count) and keeps the mean,
the CPU seconds the loop cost over the recording.  ``analysis.comparison``
divides each run's CPU seconds by it.

Cost: nothing per task; one wake-up per ``INTERVAL`` holding the GIL for
the loop (tens of microseconds): well under 1 % of one core.  ``stop()``
ends the thread and returns ``{"probe", "seconds", "samples"}``, saved as
``RunData.meta["speed"]``.

>>> probe = SpeedProbe().start()
>>> sorted(probe.stop())
['probe', 'samples', 'seconds']
"""

from __future__ import annotations

import threading
import time

__all__ = ["SpeedProbe", "PROBE", "INTERVAL"]

#: The fixed work's name: runs probed by different work are not compared.
PROBE = "python-loop-1000"
#: Seconds between two timings of the work.
INTERVAL = 0.01
#: Timings taken in the caller's thread as the probe starts and stops (a
#: short run gets a reading too).
EDGE_TIMINGS = 3


def _work() -> int:
    """The fixed piece of work: a loop of plain bytecode, as most tasks' own
    Python code is."""
    s = 0
    for k in range(1000):
        s += k
    return s


def _timed(clock=time.thread_time) -> float:
    c = clock()
    _work()
    return clock() - c


class SpeedProbe:
    """Times ``_work`` every ``interval`` seconds on a thread of its own,
    from ``start()`` to ``stop()`` (which joins the thread)."""

    def __init__(self, interval: float = INTERVAL):
        self._interval = interval
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._total = 0.0  # (a sum and a count: an hour's recording keeps no list)
        self._count = 0
        self._result: dict | None = None

    def _add(self, timings) -> None:
        for t in timings:
            self._total += t
            self._count += 1

    def start(self) -> SpeedProbe:
        self._add(_timed() for _ in range(EDGE_TIMINGS))
        self._thread = threading.Thread(target=self._run, name="localsched-speed-probe",
                                        daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        wait = self._stopped.wait
        while not wait(self._interval):
            t = _timed()
            self._total += t  # (only this thread adds until stop() joins it)
            self._count += 1

    def stop(self) -> dict:
        """``{"probe", "seconds", "samples"}``: the work's mean CPU seconds
        over the recording, and how many timings that mean holds."""
        if self._result is not None:
            return self._result
        thread, self._thread = self._thread, None
        self._stopped.set()
        if thread is not None:
            thread.join()
        self._add(_timed() for _ in range(EDGE_TIMINGS))
        self._result = {"probe": PROBE, "seconds": self._total / self._count,
                        "samples": self._count}
        return self._result
