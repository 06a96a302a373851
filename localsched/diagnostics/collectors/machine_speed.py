"""The machine's speed during a recording: a fixed piece of work, timed.

On a shared or virtual machine the same code burns more CPU seconds at one
moment than at another -- up to twice as many, in phases of a tenth of a
second, with nothing inside the machine to say so (a neighbour on the
host's other hyperthread, its caches; hardware counters are often absent).
Two runs' CPU seconds then differ by the machine's phases as much as by the
code.  ``SpeedProbe`` measures those phases beside the run: a thread that,
every ``INTERVAL``, times a fixed loop of Python bytecode on its thread's
CPU clock (time spent waiting for a CPU does not count) and keeps the mean,
the CPU seconds the loop cost over the recording, and a **timeline** of its
timings (sums and counts per slice of time, ``timeline``): the recording
also holds graph building and the caller's own work, at other moments and
other speeds, and ``analysis.comparison`` divides each run's CPU seconds by
the timings taken while its tasks ran (``speed_while``).

Cost: nothing per task; one wake-up per ``INTERVAL`` holding the GIL for
the loop (tens of microseconds): well under 1 % of one core; the timeline
keeps at most ``SLICES`` slices (widened as the recording grows).
``stop()`` ends the thread and returns ``{"probe", "seconds", "samples",
"timeline"}``, saved as ``RunData.meta["speed"]``.

>>> probe = SpeedProbe().start()
>>> sorted(probe.stop())
['probe', 'samples', 'seconds', 'timeline']
"""

from __future__ import annotations

import threading
import time

__all__ = ["SpeedProbe", "PROBE", "INTERVAL", "SLICE", "SLICES", "speed_while"]

#: The fixed work's name: runs probed by different work are not compared.
PROBE = "python-loop-1000"
#: Seconds between two timings of the work.
INTERVAL = 0.01
#: Timings taken in the caller's thread as the probe starts and stops (a
#: short run gets a reading too).
EDGE_TIMINGS = 3
#: The timeline's first slice width in seconds (one timing or two a slice) ...
SLICE = 0.01
#: ... doubled whenever the recording outgrows this many slices (an hour's
#: recording: slices of 1.8 s).
SLICES = 2048


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

    def __init__(self, interval: float = INTERVAL, clock=time.time):
        self._interval = interval
        self._clock = clock
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._total = 0.0  # (a sum and a count: an hour's recording keeps no list)
        self._count = 0
        self._start = 0.0
        self._width = SLICE
        self._sums: list = []  # (the timeline: per slice, its timings' sum and count)
        self._counts: list = []
        self._result: dict | None = None

    def _add(self, timings) -> None:
        for t in timings:
            self._total += t
            self._count += 1

    def _slot(self, at: float, timing: float) -> None:
        """Put a timing taken at ``at`` in its slice of the timeline."""
        k = int((at - self._start) / self._width)
        while k >= SLICES:  # (twice as wide: pairs of slices merged)
            self._sums = [sum(self._sums[i:i + 2]) for i in range(0, len(self._sums), 2)]
            self._counts = [sum(self._counts[i:i + 2]) for i in range(0, len(self._counts), 2)]
            self._width *= 2
            k = int((at - self._start) / self._width)
        if k < 0:
            return
        if k >= len(self._sums):
            grow = k + 1 - len(self._sums)
            self._sums += [0.0] * grow
            self._counts += [0] * grow
        self._sums[k] += timing
        self._counts[k] += 1

    def start(self) -> SpeedProbe:
        self._add(_timed() for _ in range(EDGE_TIMINGS))
        self._start = self._clock()
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
            self._slot(self._clock(), t)

    def stop(self) -> dict:
        """``{"probe", "seconds", "samples", "timeline"}``: the work's mean
        CPU seconds over the recording, how many timings that mean holds,
        and the timings in time (``{"start", "width", "sums", "counts"}``:
        the edge timings, taken in the caller's thread, are not in it)."""
        if self._result is not None:
            return self._result
        thread, self._thread = self._thread, None
        self._stopped.set()
        if thread is not None:
            thread.join()
        self._add(_timed() for _ in range(EDGE_TIMINGS))
        self._result = {"probe": PROBE, "seconds": self._total / self._count,
                        "samples": self._count,
                        "timeline": {"start": self._start, "width": self._width,
                                     "sums": self._sums, "counts": self._counts}}
        return self._result


def speed_while(speed, spans) -> float | None:
    """The probe's mean timing in the slices of its timeline that lie
    mostly (over half) within ``spans`` (``(start, end)`` epoch seconds,
    sorted, not overlapping: when the run's tasks ran); None when the saved
    ``speed`` has no timeline or no timing lies there.

    >>> speed = {"timeline": {"start": 0.0, "width": 1.0, "sums": [9.0, 2.0, 4.0],
    ...                       "counts": [1, 1, 2]}}
    >>> speed_while(speed, [(1.0, 3.0)])
    2.0
    """
    line = speed.get("timeline") if isinstance(speed, dict) else None
    if not isinstance(line, dict):
        return None
    try:  # (a saved file's: anything malformed is no timeline)
        start, width = float(line["start"]), float(line["width"])
        sums = [float(v) for v in line["sums"]]
        counts = [c if type(c) is int else -1 for c in line["counts"]]
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    if not 0 < width < float("inf") or len(sums) != len(counts) or len(sums) > 4 * SLICES:
        return None
    total, count, i = 0.0, 0, 0
    for k, (s, c) in enumerate(zip(sums, counts, strict=True)):
        lo, hi = start + k * width, start + (k + 1) * width
        while i < len(spans) and spans[i][1] <= lo:
            i += 1
        inside, j = 0.0, i
        while j < len(spans) and spans[j][0] < hi:
            inside += max(0.0, min(hi, spans[j][1]) - max(lo, spans[j][0]))
            j += 1
        if inside > width / 2 and c > 0:
            total += s
            count += c
    return total / count if count else None
