"""ProgressBar: how far a computation is, redrawn while it runs.

Who does what::

    scheduler thread (callbacks)              drawing thread (every dt)
    ────────────────────────────              ─────────────────────────
    _start        t0 = timer()
    _start_state  group totals (once) ──────► start: wait(dt) ─► draw()
    (the loop appends each finished                   snapshot: len(finished set),
     task's record to the run's                       total; the records since the
     records: no hook of ours runs)                   last draw: group_done[g] += 1,
                                                      group_seconds[g] += end - start
    _finish       stop.set(); join() ◄──────          ─► Progress ─► renderer.render()
                  final draw, same path

Nothing of the bar runs per task in the scheduler's thread: the counts per
group (shown with ``group_by``, and behind the time estimate) are read from
the run's task records (``state.outcome.records``, ``Needs.records``) when
a draw happens: the records since the last draw, as columns, added up per
group (numpy's ``bincount`` when there are thousands).  The
drawing thread otherwise only reads counters (``len()`` of the live
finished set), never iterates the scheduler's sets, so it costs the same
for ten tasks or ten million.  Under dask's own schedulers, which keep no
records, a small posttask hook counts instead.

What it draws is a plain :class:`~localsched.diagnostics.collectors.progress_view.Progress`
record; a renderer turns it into text (:class:`TextRenderer`,
``progress_text``) or ipywidgets (:class:`WidgetRenderer`,
``progress_widget``), so the choice of display is just the choice of
renderer.  Any object with a ``render(progress)`` method works.

Times are elapsed seconds of the injectable ``timer`` (default
``time.monotonic``, which wall-clock adjustments cannot make go backwards),
measured from the computation's ``start``.

The remaining time is estimated per task group (``localsched.diagnostics.collectors.eta``):
the tasks left in each group times the mean duration of that group's
finished tasks (as the workers measured them), over the number of workers
seen -- not a global rate, which a cheap first phase would make wildly
optimistic.  The rate is tasks per second over the last few seconds.  They
are shown in tqdm's form, ``00:12<00:30, 1,234.5 tasks/s``;
``format="dask"`` keeps dask's line (``|  1.2s``) for people who parse it.
"""

from __future__ import annotations

import contextvars
import importlib.util
import threading
import time
from collections import Counter
from collections.abc import Callable
from itertools import repeat
from typing import Any

from ..callbacks import Callback, Hooks, Needs
from ..run.task_records import TaskRecords
from ..system.forking import renew_in_child
from ..utils import key_split
from ..view import StateView, state_view
from .collectors.eta import remaining_time
from .collectors.progress_text import TextRenderer
from .collectors.progress_view import (
    ERRORED,
    FINISHED,
    FORMATS,
    RUNNING,
    GroupProgress,
    Progress,
    format_time,
    timing_text,
)
from .collectors.progress_widget import WidgetRenderer, import_ipywidgets, in_notebook

__all__ = [
    "ProgressBar",
    "Progress",
    "GroupProgress",
    "TextRenderer",
    "WidgetRenderer",
    "format_time",
    "timing_text",
    "in_notebook",
]

#: Name of the drawing thread (tests look for it to check it is gone).
THREAD_NAME = "localsched-progress"

#: At most this many group lines; further groups share the last line.
MAX_GROUP_LINES = 20
#: Seconds of recent progress the rate is measured over.
RATE_WINDOW = 3.0


class ProgressBar(Callback):
    """Show the progress of computations: a text bar, or a widget in Jupyter.

    A background thread redraws every ``dt`` seconds while a computation
    runs; the last draw shows 100% and the elapsed time, and ends the line.
    Nothing is shown for a computation shorter than ``minimum`` seconds; a
    graph without tasks (``{'x': 1}``) shows one completed bar, as dask's
    does.  ``last_duration`` holds the seconds the last computation took.
    On an error the bar stays where it was and its line is
    ended.  Times are elapsed seconds of ``timer`` (default
    ``time.monotonic``) since the computation started.

    Use it as a ``with`` block, with ``register()``/``unregister()``, or per
    call as ``callbacks=[ProgressBar()]``.  One bar shows one computation at
    a time: a computation started in another thread while one is shown is
    not drawn (two would garble each other's line).

    Parameters
    ----------
    minimum : float
        Seconds a computation must last before anything is drawn.
    width : int
        Characters of each text bar.
    dt : float
        Seconds between redraws.
    out : file-like, optional
        Where the text goes; None means ``sys.stdout`` as it is when a
        computation is first drawn (not at construction, so a stream
        swapped later -- by Jupyter, by pytest -- is used).
    group_by : None, "prefix" or callable, keyword-only
        Also show one bar per task group: ``"prefix"`` groups keys by
        :func:`localsched.utils.key_split` (``('load-3f9a2c1b', 0)`` ->
        ``'load'``), a callable maps a key to its group name.
    timer : callable, keyword-only
        The clock of the elapsed time; inject a fake one in tests.
    display : None, "text", "widget" or a renderer, keyword-only
        None picks the widget in a Jupyter kernel with ipywidgets (unless
        ``out`` is given) and text elsewhere.  A renderer is any object with
        ``render(progress)``, see :class:`TextRenderer`.
    format : "tqdm" or "dask", keyword-only
        ``"tqdm"`` (default) ends the line with ``elapsed<remaining, rate``:
        the remaining time estimated from each task group's mean duration
        (read from the run's task records at each draw) and the tasks per
        second lately.  ``"dask"`` writes dask's line exactly (elapsed time
        only) and needs no records unless ``group_by`` is given.

    Examples
    --------
    >>> import io
    >>> from localsched.local import get_sync
    >>> out = io.StringIO()
    >>> with ProgressBar(out=out):
    ...     get_sync({'a': 1, 'b': (abs, -2)}, 'b')
    2
    >>> text = out.getvalue()
    >>> '100% Completed' in text and text.endswith('\\n')
    True

    With a line per task group (written at the end when ``out`` is not a
    terminal, redrawn in place when it is):

    >>> dsk = {('load', i): (abs, -i) for i in range(3)}
    >>> dsk['total'] = (sum, [('load', i) for i in range(3)])
    >>> out = io.StringIO()
    >>> get_sync(dsk, 'total', callbacks=[ProgressBar(out=out, width=10, group_by='prefix')])
    3
    >>> print(out.getvalue().split('\\n', 1)[1], end='')
      load  [##########] 3/3
      total [##########] 1/1

    See Also
    --------
    Profiler, ResourceProfiler, CacheProfiler
    """

    # No hook per task: the counts come from the run's records (when it
    # shows groups or estimates), read at each draw.
    needs = Needs(results=False)

    def __init__(
        self,
        minimum: float = 0,
        width: int = 40,
        dt: float = 0.1,
        out=None,
        *,
        group_by: None | str | Callable[[Any], str] = None,
        timer: Callable[[], float] = time.monotonic,
        display: Any = None,
        format: str = "tqdm",
    ):
        super().__init__()
        if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) or not minimum >= 0:
            raise ValueError(
                f"ProgressBar minimum must be a number of seconds >= 0, got {minimum!r}"
            )
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"ProgressBar width must be a positive int, got {width!r}")
        if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not dt > 0:
            raise ValueError(f"ProgressBar dt must be a positive number of seconds, got {dt!r}")
        if out is not None and not callable(getattr(out, "write", None)):
            raise TypeError(f"ProgressBar out= must have a write method, got {out!r}")
        if group_by == "prefix":
            group_by = key_split
        elif group_by is not None and not callable(group_by):
            raise ValueError(
                f"ProgressBar group_by must be None, 'prefix' or a callable, got {group_by!r}"
            )
        if not callable(timer):
            raise TypeError(f"ProgressBar timer= must be callable, got {timer!r}")
        if format not in FORMATS:
            raise ValueError(f"ProgressBar format must be 'tqdm' or 'dask', got {format!r}")
        if display == "widget":
            if importlib.util.find_spec("ipywidgets") is None:
                import_ipywidgets()  # raises, saying what to install
        elif display not in (None, "text") and not callable(getattr(display, "render", None)):
            raise ValueError(
                f"ProgressBar display must be None, 'text', 'widget' or an object with "
                f"a render(progress) method, got {display!r}"
            )
        self._minimum = float(minimum)
        self._width = width
        self._dt = float(dt)
        self._out = out
        self._format = format
        self._estimate = format == "tqdm"
        self._show_groups = group_by is not None
        # Groups are counted to show their lines, or to estimate the ETA.
        self._group_by: Callable[[Any], str] | None = group_by if group_by is not None else (
            key_split if self._estimate else None)
        self._clock = timer
        self._display = display
        #: Seconds the last computation shown by this bar took (None before any).
        self.last_duration: float | None = None
        # The last drawing thread, kept after it stopped: dask's name for it,
        # and dask's tests check it is no longer alive after a computation.
        self._timer: threading.Thread | None = None
        self._text: TextRenderer | None = None
        self._widget: WidgetRenderer | None = None
        #: The renderer of the current or last computation.
        self.renderer: Any = None

        # Guards renderer calls and _shown: draw() may be called by the
        # drawing thread and by any other thread (tests, a custom loop).
        self._draw_lock = threading.Lock()
        self._reset()
        renew_in_child(self)

        if self._group_by is not None:
            # Each group's finished tasks and their seconds, from the records.
            self.needs = Needs(results=False, records=True)

    def _after_fork_in_child(self) -> None:
        # (the drawing thread and the computation shown are the parent's)
        self._draw_lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        """Forget the current computation (the bar is idle)."""
        self._owner: tuple | None = None  # (thread ident, dsk) of the shown computation
        self._t0 = 0.0
        self._state = None
        self._total = 0
        self._finished: Any = ()  # the live set of finished keys of the computation
        self._shown = False
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._group_names: list = []
        self._group_totals: list = []
        self._group_done: list = []
        self._group_seconds: list = []
        self._group_of: dict = {}  # key (or a tuple key's name: _by_head) -> group index
        self._by_head = False
        self._workers: set = set()
        self._recent: list = [(0.0, 0)]  # (elapsed, done) of recent draws, for the rate
        self._records: TaskRecords | None = None  # the run's task records (localsched's)
        self._counted = 0  # how many of them the group counts include

    def _owns(self, dsk) -> bool:
        owner = self._owner
        return owner is not None and owner[1] is dsk and owner[0] == threading.get_ident()

    # -- the callbacks -------------------------------------------------------

    def _start(self, dsk):
        if self._owner is not None:
            return  # already showing a computation: leave this one undrawn
        self._owner = (threading.get_ident(), dsk)
        self._t0 = self._clock()

    def _start_state(self, dsk, state):
        if not self._owns(dsk):
            return
        view = state_view(state)
        total = view.ntasks
        self._total = total
        self._finished = state["finished"]
        if self._group_by is not None and total:
            self._count_groups(view)
            self._records = view.outcome.records
        self.renderer = self._choose_renderer()
        # Set last: a computation with _state set can always be drawn.
        self._state = state
        if not total:
            return  # nothing to follow: only the final, completed bar is drawn
        stop = threading.Event()
        # Run in a copy of this context: output that routes by context
        # (ipykernel's cell of origin) goes where the computation started.
        ctx = contextvars.copy_context()
        thread = threading.Thread(
            target=ctx.run, args=(self._redraw_until, stop), name=THREAD_NAME, daemon=True
        )
        thread.start()
        self._stop, self._thread = stop, thread
        self._timer = thread

    @property
    def _dask_callback(self) -> tuple:
        """The hooks dask's own schedulers fire: they keep no task records,
        so there a posttask hook counts each finished task."""
        hooks = self._callback
        count = self._count_dask_task if self._group_by is not None else None
        return Hooks(hooks[0], hooks[1], hooks[2], count, hooks[4], needs=hooks.needs)

    def _count_dask_task(self, key, result, dsk, state, worker_id):
        if state is self._state:
            i = self._group_of.get(_head(key) if self._by_head else key)
            if i is not None:
                self._group_done[i] += 1
            self._workers.add(worker_id)

    def _catch_up(self) -> None:
        """Count the tasks finished since the last draw, from the run's
        records (under the draw lock): per group, done and seconds."""
        records = self._records
        if records is None:
            return
        n = len(records)  # (the scheduler appends while we read: up to here)
        if n == self._counted:
            return
        keys, starts, ends, worker_ids = records.columns(self._counted, n)  # (no tuple per task)
        if self._by_head:  # (dask's groups: a tuple key's group is its name's)
            keys = [k[0] if type(k) is tuple and k else k for k in keys]
        group_ids = list(map(self._group_of.get, keys, repeat(-1)))
        _add_by_group(group_ids, starts, ends, self._group_done, self._group_seconds)
        self._workers.update(worker_ids)
        self._counted = n

    def _finish(self, dsk, state, errored):
        if not self._owns(dsk):
            return
        try:
            self.last_duration = self._clock() - self._t0
            if self._thread is not None:
                self._stop.set()
                self._thread.join()
            if self._state is not None:
                self._draw(ERRORED if errored else FINISHED)
        finally:
            with self._draw_lock:
                self._reset()

    # -- drawing ---------------------------------------------------------------

    def draw(self) -> bool:
        """Draw the running computation now, as the drawing thread does every ``dt``.

        Returns whether anything was drawn (not before ``minimum`` seconds,
        not when no computation runs).  Tests call it with a fake
        clock instead of waiting for the thread.
        """
        return self._draw(RUNNING)

    def _redraw_until(self, stop: threading.Event) -> None:
        """The drawing thread's loop: a draw every ``dt`` until ``stop`` is set."""
        while not stop.wait(self._dt):
            self._draw(RUNNING)

    def _draw(self, status: str) -> bool:
        with self._draw_lock:
            state = self._state
            if state is None:
                return False
            elapsed = self._clock() - self._t0
            if not self._shown and elapsed < self._minimum:
                return False
            self._catch_up()
            total = self._total
            # On success all tasks are done; on error the bar stays put.
            done = total if status == FINISHED else min(len(self._finished), total)
            groups = tuple(
                GroupProgress(name, d, t)
                for name, d, t in zip(self._group_names, list(self._group_done),
                                      self._group_totals, strict=False)
            ) if self._show_groups else ()
            remaining, rate = self._timing(status, done, total, elapsed)
            self.renderer.render(Progress(done, total, elapsed, groups, status, remaining, rate))
            self._shown = True
            return True

    def _timing(self, status: str, done: int, total: int, elapsed: float) -> tuple:
        """(remaining seconds, tasks per second) for the tqdm form."""
        if not self._estimate:
            return None, None
        if status != RUNNING:
            return 0.0, (done / elapsed if elapsed > 0 else None)
        recent = self._recent
        recent.append((elapsed, done))
        while len(recent) > 2 and elapsed - recent[1][0] >= RATE_WINDOW:
            del recent[0]
        t0, d0 = recent[0]
        rate = (done - d0) / (elapsed - t0) if elapsed > t0 else None
        remaining = remaining_time(self._group_names, self._group_totals,
                                   list(self._group_done), list(self._group_seconds),
                                   len(self._workers))
        if remaining is None and done and elapsed > 0:  # no task timings (dask's schedulers)
            remaining = elapsed / done * (total - done)
        return remaining, rate

    def _count_groups(self, view: StateView) -> None:
        """Group totals, and each task's group index, once per computation
        (loops in C but for the grouping function, cached per name)."""
        group_by = self._group_by
        assert group_by is not None
        keys = view.task_keys()  # (in order of first appearance: run order)
        self._by_head = group_by is key_split
        if self._by_head:
            # dask's groups: by name, so key_split runs once per name, not per key
            keys = [k[0] if type(k) is tuple and k else k for k in keys]
            per_name = Counter(keys)
            counts: Counter = Counter()
            for name, count in per_name.items():
                counts[key_split(name)] += count
            keys = list(per_name)
            groups = list(map(key_split, keys))
        else:
            custom = group_by
            groups = [str(custom(key)) for key in keys]
            counts = Counter(groups)
        names, totals = list(counts), list(counts.values())
        index = {name: i for i, name in enumerate(names)}
        if len(names) > MAX_GROUP_LINES:
            # Keep the first groups (in run order); the others share one line.
            last = MAX_GROUP_LINES - 1
            others = len(names) - last
            totals = totals[:last] + [sum(totals[last:])]
            names = names[:last] + [f"({others} other groups)"]
            index = {name: min(i, last) for name, i in index.items()}
        self._group_names = names
        self._group_totals = totals
        self._group_done = [0] * len(names)
        self._group_seconds = [0.0] * len(names)
        self._group_of = dict(zip(keys, map(index.__getitem__, groups), strict=True))

    def _choose_renderer(self):
        display = self._display
        if display is None:
            display = "widget" if self._out is None and in_notebook() else "text"
        if display == "text":
            if self._text is None:
                self._text = TextRenderer(self._out, self._width, style=self._format)
            return self._text
        if display == "widget":
            if self._widget is None:
                self._widget = WidgetRenderer()
            return self._widget
        return display

    @property
    def running(self) -> bool:
        """Whether the drawing thread runs (a computation is being shown)."""
        return self._thread is not None

    @property
    def _running(self) -> bool:
        # dask's name for ``running``.
        return self._thread is not None

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<{type(self).__name__} minimum={self._minimum} dt={self._dt}: {state}>"


def _head(key):
    """A key's name: what dask's ``key_split`` groups a tuple key by."""
    return key[0] if type(key) is tuple and key else key


#: Records caught up at once above which numpy adds them up.
NUMPY_FROM = 2000


def _add_by_group(group_ids: list, starts: list, ends: list, done: list,
                  seconds: list) -> None:
    """Add one to ``done[i]`` and ``end - start`` to ``seconds[i]`` for
    each record's group ``i`` (-1: none); numpy's ``bincount`` for many
    records (a draw after a fast stretch: 10,000s), a loop for a few (and
    no numpy import for small runs)."""
    if len(group_ids) < NUMPY_FROM:
        for i, start, end in zip(group_ids, starts, ends, strict=True):
            if i >= 0:
                done[i] += 1
                seconds[i] += end - start
        return
    import numpy as np

    ids = np.array(group_ids, dtype=np.intp)
    took = np.subtract(np.array(ends, dtype=float), np.array(starts, dtype=float))
    kept = ids >= 0
    ids, took = ids[kept], took[kept]
    counts = np.bincount(ids, minlength=len(done))
    sums = np.bincount(ids, weights=took, minlength=len(done))
    for i in np.flatnonzero(counts).tolist():
        done[i] += int(counts[i])
        seconds[i] += float(sums[i])
