"""What a progress display draws: one plain snapshot of a computation.

A :class:`Progress` record (finished and total tasks, elapsed seconds,
per-group counts, status, estimate) is all a renderer gets: the text bar
(``progress_text``) and the widget (``progress_widget``) draw it, and the
:class:`~localsched.diagnostics.progress.ProgressBar` makes it.  Also the
shared formatting: dask's elapsed time (``format_time``), tqdm's
``elapsed<remaining, rate`` (``timing_text``) and short group names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .eta import tqdm_timing

__all__ = ["Progress", "GroupProgress", "timing_text", "format_time", "short_name",
           "RUNNING", "FINISHED", "ERRORED", "FORMATS"]

#: Group names are cut to this many characters, so lines fit a terminal
#: (a wrapped line would break the cursor-up redraw).
MAX_NAME = 20

RUNNING, FINISHED, ERRORED = "running", "finished", "errored"
FORMATS = ("tqdm", "dask")


class GroupProgress(NamedTuple):
    """Progress of one task group: its name, finished and total tasks."""

    name: str
    done: int
    total: int


@dataclass(frozen=True)
class Progress:
    """What a renderer draws: a snapshot of one computation, as plain data.

    ``status`` is ``"running"``, ``"finished"`` or ``"errored"``; a renderer
    ends its display on the latter two and starts a new one on the next
    render.

    >>> p = Progress(done=1, total=4, elapsed=0.5)
    >>> p.percent, p.final
    (25, False)
    """

    done: int
    total: int
    elapsed: float
    groups: tuple = ()
    status: str = RUNNING
    #: Estimated seconds still to run (None: no estimate yet).
    remaining: float | None = None
    #: Tasks finished per second lately (None: not measured).
    rate: float | None = None

    @property
    def percent(self) -> int:
        """Whole percent finished (integer arithmetic: 100 only when all are done)."""
        return self.done * 100 // self.total if self.total else 100

    @property
    def final(self) -> bool:
        """Whether this is the last snapshot of its computation."""
        return self.status != RUNNING


def timing_text(progress: Progress) -> str:
    """``elapsed<remaining, rate``, as tqdm writes it.

    >>> timing_text(Progress(10, 40, 75.0, remaining=225.0, rate=0.133))
    '01:15<03:45, 7.52s/task'
    """
    return tqdm_timing(progress.elapsed, progress.remaining, progress.rate)


def format_time(seconds: float) -> str:
    """Elapsed seconds as text, to a tenth of a second.

    >>> format_time(1.23)
    ' 1.2s'
    >>> format_time(75)
    '1min 15.0s'
    >>> format_time(3725.5)
    '1hr  2min  5.5s'
    """
    # Round once, then split: 59.97 s is "1min  0.0s", never "60.0s".
    tenths = max(0, int(round(seconds * 10)))
    minutes, tenths = divmod(tenths, 600)
    hours, minutes = divmod(minutes, 60)
    secs = tenths / 10
    if hours:
        return f"{hours}hr {minutes:2d}min {secs:4.1f}s"
    if minutes:
        return f"{minutes}min {secs:4.1f}s"
    return f"{secs:4.1f}s"



def short_name(name: str) -> str:
    """``name`` cut to ``MAX_NAME`` characters (an ellipsis marks the cut)."""
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"
