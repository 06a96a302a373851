"""How long a computation still has to run, from per-group mean durations.

A global rate (tasks done / seconds elapsed) is wrong on mixed graphs: a
thousand 1 ms loads followed by ten 10 s reductions look nearly done after
the loads.  Here every task group keeps the mean duration of its finished
tasks, and the work left is the sum, over groups, of the tasks not yet
finished times their group's mean (a group that has not run yet borrows the
mean of all finished tasks), divided by the number of workers.  A running
task counts for what its group's mean leaves of it after its age.

Used by the ProgressBar (text and widget) and by the dashboard's summary.

>>> est = GroupDurations()
>>> for _ in range(4):
...     est.add("load", 1.0)
>>> est.add("reduce", 3.0)
>>> est.remaining({"load": 2, "reduce": 1, "store": 2}, workers=2)
3.9
>>> est.mean("store") == est.mean()    # no store has finished: the overall mean
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["GroupDurations", "remaining_time", "format_clock", "format_rate", "tqdm_timing"]


class GroupDurations:
    """Running sums of task durations per group (append-only, O(1) per task)."""

    __slots__ = ("_sum", "_count", "_total", "_n")

    def __init__(self) -> None:
        self._sum: dict = {}
        self._count: dict = {}
        self._total = 0.0
        self._n = 0

    def add(self, group, seconds: float) -> None:
        """One finished task of ``group`` that took ``seconds``."""
        self._sum[group] = self._sum.get(group, 0.0) + seconds
        self._count[group] = self._count.get(group, 0) + 1
        self._total += seconds
        self._n += 1

    def add_total(self, group, seconds: float, count: int) -> None:
        """``count`` finished tasks of ``group`` that took ``seconds`` in all."""
        self._sum[group] = self._sum.get(group, 0.0) + seconds
        self._count[group] = self._count.get(group, 0) + count
        self._total += seconds
        self._n += count

    def mean(self, group=None) -> float | None:
        """Mean duration of ``group``'s finished tasks (of all, for None or
        a group with none finished); None before any task finished."""
        n = self._count.get(group) if group is not None else None
        if n:
            return self._sum[group] / n
        return self._total / self._n if self._n else None

    def remaining(self, left: Mapping, workers: int = 1,
                  running_ages: Iterable[tuple] = ()) -> float | None:
        """Seconds still to run: ``left`` maps a group to its tasks neither
        finished nor running; ``running_ages`` holds ``(group, seconds since
        it started)`` per running task; the work is shared by ``workers``.
        None when nothing has finished yet (no estimate)."""
        if not self._n:
            return None
        work = 0.0
        for group, count in left.items():
            if count > 0:
                work += count * self.mean(group)
        for group, age in running_ages:
            work += max(self.mean(group) - age, 0.0)
        return round(work / max(workers, 1), 6)


def remaining_time(names, totals, done, seconds, workers: int) -> float | None:
    """The estimate from parallel lists per group: name, tasks in all, tasks
    finished, their seconds in all (groups finished without timings are
    left out of the means).

    >>> remaining_time(["a", "b"], [10, 2], [10, 1], [1.0, 4.0], workers=1)
    4.0
    """
    timed = GroupDurations()
    for name, n, s in zip(names, done, seconds, strict=True):
        if n and s > 0:
            timed.add_total(name, s, n)
    left = {name: t - n for name, t, n in zip(names, totals, done, strict=True)}
    return timed.remaining(left, max(workers, 1))


def format_rate(rate: float | None) -> str:
    """Tasks per second as tqdm shows a rate (seconds per task below one).

    >>> format_rate(1234.56), format_rate(0.25), format_rate(None)
    ('1,234.6 tasks/s', '4.00s/task', '? tasks/s')
    """
    if rate is None:
        return "? tasks/s"
    if 0 < rate < 1:
        return f"{1 / rate:.2f}s/task"
    return f"{rate:,.1f} tasks/s"


def tqdm_timing(elapsed: float, remaining: float | None, rate: float | None) -> str:
    """``elapsed<remaining, rate``, as tqdm writes it.

    >>> tqdm_timing(75.0, None, 812.0)
    '01:15<?, 812.0 tasks/s'
    """
    return f"{format_clock(elapsed)}<{format_clock(remaining)}, {format_rate(rate)}"


def format_clock(seconds: float | None) -> str:
    """Seconds as tqdm shows them: ``MM:SS``, ``H:MM:SS`` past an hour, ``?`` unknown.

    >>> format_clock(75.4), format_clock(3725), format_clock(None)
    ('01:15', '1:02:05', '?')
    """
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    total = int(seconds + 0.5)
    minutes, secs = divmod(total, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes:02d}:{secs:02d}"
