"""ProgressBar: how far a computation is, redrawn while it runs.

Who does what::

    scheduler thread (callbacks)              drawing thread (every dt)
    ────────────────────────────              ─────────────────────────
    _start        t0 = timer()
    _start_state  group totals (once) ──────► start: wait(dt) ─► draw()
    _posttask     group_done[g] += 1                  snapshot: len(finished set),
                  group_seconds[g] += end - start     total, group_done, seconds
                  (for the ETA, or with group_by)
    _finish       stop.set(); join() ◄──────          ─► Progress ─► renderer.render()
                  final draw, same path

The drawing thread only reads counters (``len()`` of the live finished set,
a list of ints), never iterates the scheduler's sets, so it costs the same
for ten tasks or ten million.  What it draws is a plain :class:`Progress`
record; a renderer turns a record into text (:class:`TextRenderer`) or
ipywidgets (:class:`WidgetRenderer`), so the choice of display is just the
choice of renderer.  Any object with a ``render(progress)`` method works.

Times are elapsed seconds of the injectable ``timer`` (default
``time.monotonic``, which wall-clock adjustments cannot make go backwards),
measured from the computation's ``start``.

The remaining time is estimated per task group (``localsched.diagnostics.eta``):
the tasks left in each group times the mean duration of that group's
finished tasks (as the workers measured them), over the number of workers
seen -- not a global rate, which a cheap first phase would make wildly
optimistic.  The rate is tasks per second over the last few seconds.  They
are shown in tqdm's form, ``00:12<00:30, 1,234.5 tasks/s``;
``format="dask"`` keeps dask's line (``|  1.2s``) for people who parse it.
"""

from __future__ import annotations

import contextvars
import html
import importlib.util
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..callbacks import Callback, Needs
from ..utils import key_split
from .eta import remaining_time, tqdm_timing

__all__ = [
    "ProgressBar",
    "Progress",
    "GroupProgress",
    "TextRenderer",
    "WidgetRenderer",
    "format_time",
]

#: Name of the drawing thread (tests look for it to check it is gone).
THREAD_NAME = "localsched-progress"

#: At most this many group lines; further groups share the last line.
MAX_GROUP_LINES = 20
#: Group names are cut to this many characters, so lines fit a terminal
#: (a wrapped line would break the cursor-up redraw).
MAX_NAME = 20
#: Seconds of recent progress the rate is measured over.
RATE_WINDOW = 3.0

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


# -- renderers ---------------------------------------------------------------


class TextRenderer:
    """Draw progress as text, redrawn in place with ``'\\r'``.

    The main line looks like
    ``[####################                    ] | 50% Completed | 00:01<00:01, 812.0 tasks/s``
    (``style="dask"``: ``... | 50% Completed |  1.2s``, dask's line) and a
    final render ends it with a newline.  Group lines (with
    ``group_by``) are redrawn in place with ANSI cursor movement when ``out``
    is a terminal; otherwise (a file, a notebook stream) they are written
    once, after the final main line, so a log holds no escape codes.

    Parameters
    ----------
    out : file-like, optional
        Where to write; None means ``sys.stdout`` as it is when a
        computation's first line is drawn (so redirections made after the
        renderer was built, e.g. by pytest, are honoured).
    width : int
        Characters of each bar.
    tty : bool, optional
        Whether ``out`` is a terminal; None asks ``out.isatty()``.
    style : "tqdm" or "dask"
        The end of the main line: ``elapsed<remaining, rate`` or dask's
        elapsed time alone.

    >>> import io
    >>> out = io.StringIO()
    >>> r = TextRenderer(out, width=10, style="dask")
    >>> r.render(Progress(3, 10, 1.25))
    >>> r.render(Progress(10, 10, 2.0, status="finished"))
    >>> out.getvalue()
    '\\r[###       ] | 30% Completed |  1.2s\\r[##########] | 100% Completed |  2.0s\\n'
    >>> TextRenderer(width=10).bar_line(Progress(3, 10, 1.25, remaining=3.0, rate=2.4))
    '[###       ] | 30% Completed | 00:01<00:03, 2.4 tasks/s'
    """

    def __init__(self, out=None, width: int = 40, *, tty: bool | None = None,
                 style: str = "tqdm"):
        if style not in FORMATS:
            raise ValueError(f"style must be one of {FORMATS}, got {style!r}")
        self.out = out
        self.width = width
        self.tty = tty
        self.style = style
        self._stream = None  # the stream of the current computation
        self._height = 0  # lines of the block drawn last (tty group mode)

    def render(self, progress: Progress) -> None:
        """Draw ``progress``; a final one ends the display with a newline."""
        out = self._stream
        if out is None:
            out = self._stream = sys.stdout if self.out is None else self.out
        main = self.bar_line(progress)
        groups = self.group_lines(progress.groups)
        if groups and self._is_tty(out):
            # Back to the block's first line, then rewrite every line.
            up = f"\x1b[{self._height - 1}A" if self._height > 1 else ""
            text = "\r" + up + "\n".join("\x1b[2K" + line for line in [main, *groups])
            self._height = 1 + len(groups)
        else:
            text = "\r" + main
            if groups and progress.final:
                text += "\n" + "\n".join(groups)
        if progress.final:
            text += "\n"
            self._stream = None
            self._height = 0
        out.write(text)
        out.flush()

    def bar_line(self, progress: Progress) -> str:
        """The main line, without ``'\\r'``."""
        width = self.width
        filled = progress.done * width // progress.total if progress.total else width
        head = f"[{'#' * filled:<{width}}] | {progress.percent}% Completed | "
        if self.style == "dask":
            return head + format_time(progress.elapsed)
        return head + timing_text(progress)

    def group_lines(self, groups) -> list:
        """One line per group: name, bar, ``done/total``."""
        if not groups:
            return []
        names = [_short(g.name) for g in groups]
        name_w = max(map(len, names))
        count_w = len(str(max(g.total for g in groups)))
        width = self.width
        lines = []
        for name, g in zip(names, groups, strict=False):
            filled = g.done * width // g.total if g.total else width
            lines.append(
                f"  {name:<{name_w}} [{'#' * filled:<{width}}] {g.done:>{count_w}}/{g.total}"
            )
        return lines

    def _is_tty(self, out) -> bool:
        if self.tty is not None:
            return self.tty
        try:
            return bool(out.isatty())
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            return False


def _short(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


class WidgetRenderer:
    """Draw progress as ipywidgets: one ``FloatProgress`` and an HTML label,
    plus one bar per task group.

    The widgets of a computation are built and shown on its first render and
    stay readable afterwards as ``box``, ``bar``, ``label`` and
    ``group_bars`` (a dict name -> FloatProgress) until the next computation
    starts.  ``bar.value`` counts finished tasks out of ``bar.max``; a
    final render sets ``bar_style`` to ``'success'`` or ``'danger'``.

    Parameters
    ----------
    display : callable, optional
        Shows a widget; None means ``IPython.display.display`` (imported on
        first use).  Inject a function to use the renderer without a notebook.

    >>> shown = []
    >>> r = WidgetRenderer(display=shown.append)
    >>> r.render(Progress(2, 4, 0.5))
    >>> r.render(Progress(4, 4, 1.0, status="finished"))
    >>> shown == [r.box], r.bar.value, r.bar.max, r.bar.bar_style
    (True, 4.0, 4.0, 'success')
    """

    def __init__(self, *, display: Callable[[Any], Any] | None = None):
        self._display = display
        self._live = False
        self.box = self.bar = self.label = None
        self.group_bars: dict = {}
        self._group_labels: list = []

    def render(self, progress: Progress) -> None:
        """Update the widgets (built and shown on a computation's first render)."""
        if not self._live:
            self._build(progress)
        self.bar.value = progress.done
        self.label.value = (
            f"<tt>{progress.done}/{progress.total} tasks | {progress.percent}% Completed"
            f" | {html.escape(timing_text(progress))}</tt>"
        )
        for g, count in zip(progress.groups, self._group_labels, strict=False):
            self.group_bars[g.name].value = g.done
            count.value = f"<tt>{g.done}/{g.total}</tt>"
        if progress.final:
            ok = progress.status == FINISHED
            self.bar.bar_style = "success" if ok else "danger"
            # After an error, groups that had finished still show as such.
            for g in progress.groups:
                done = ok or g.done >= g.total
                self.group_bars[g.name].bar_style = "success" if done else "danger"
            self._live = False

    def _build(self, progress: Progress) -> None:
        ipywidgets = _import_ipywidgets()
        self.bar = ipywidgets.FloatProgress(value=0, min=0, max=max(progress.total, 1))
        self.label = ipywidgets.HTML()
        rows = [ipywidgets.HBox([self.bar, self.label])]
        self.group_bars = {}
        self._group_labels = []
        for g in progress.groups:
            bar = ipywidgets.FloatProgress(value=0, min=0, max=max(g.total, 1))
            count = ipywidgets.HTML()
            name = ipywidgets.HTML(f"<tt>{html.escape(_short(g.name))}</tt>")
            name.layout.width = "12em"
            rows.append(ipywidgets.HBox([name, bar, count]))
            self.group_bars[g.name] = bar
            self._group_labels.append(count)
        self.box = ipywidgets.VBox(rows)
        display = self._display
        if display is None:
            from IPython.display import display
        display(self.box)
        self._live = True


def _import_ipywidgets():
    try:
        import ipywidgets
    except ImportError as exc:
        raise ImportError(
            "ProgressBar(display='widget') needs ipywidgets: "
            "pip install ipywidgets (or localsched[notebook])"
        ) from exc
    return ipywidgets


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel that can show ipywidgets.

    Imports nothing: a kernel has already imported IPython and ipykernel,
    so if they are not in ``sys.modules`` this is no notebook.
    """
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    try:
        from ipykernel.zmqshell import ZMQInteractiveShell

        shell = ipython.get_ipython()
        return (
            isinstance(shell, ZMQInteractiveShell)
            and importlib.util.find_spec("ipywidgets") is not None
        )
    except Exception:  # a half-initialised or exotic shell: fall back to text
        return False


# -- the callback ------------------------------------------------------------


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
        (one addition per task in the scheduler's thread) and the tasks per
        second lately.  ``"dask"`` writes dask's line exactly (elapsed time
        only) and adds nothing per task unless ``group_by`` is given.

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

    # Its posttask never reads the result: results may stay in the workers.
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
                _import_ipywidgets()  # raises, saying what to install
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
        self._group_by = group_by if group_by is not None else (
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

        if self._estimate:
            # One addition per task: each group's finished tasks and their seconds.
            self._posttask = self._time_group
        elif group_by is not None:
            # Installed per instance, so that a bar without groups or ETA
            # has no posttask hook at all: nothing runs per task.
            self._posttask = self._count_group

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
        self._group_of: dict = {}
        self._workers: set = set()
        self._recent: list = [(0.0, 0)]  # (elapsed, done) of recent draws, for the rate

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
        # localsched's State counts its tasks; dask's plain dict state does not.
        total = getattr(state, "ntasks", None)
        if total is None:
            total = sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))
        self._total = total
        self._finished = state["finished"]
        if self._group_by is not None and total:
            self._count_groups(state)
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

    def _count_group(self, key, result, dsk, state, worker_id):
        # The per-task cost of grouping: a dict lookup and an increment.
        if state is self._state:
            self._group_done[self._group_of[key]] += 1

    def _time_group(self, key, result, dsk, state, worker_id):
        # The per-task cost of the ETA: a lookup, two additions, a set add.
        if state is self._state:
            i = self._group_of.get(key)
            if i is None:
                return
            self._group_done[i] += 1
            timing = getattr(state, "timing", None)  # (dask's schedulers have none)
            if timing is not None:
                self._group_seconds[i] += timing[1] - timing[0]
            self._workers.add(worker_id)

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

    def _count_groups(self, state) -> None:
        """Group totals, and each task's group index, once per computation."""
        group_by = self._group_by
        at_start = state["cache"]  # data keys (and nothing computed yet)
        index: dict = {}
        names: list = []
        totals: list = []
        group_of = {}
        for key in state["dependencies"]:
            if key in at_start:
                continue
            if group_by is key_split:
                name = key_split(key)  # (cached)
            else:
                name = str(group_by(key))
            i = index.get(name)
            if i is None:
                i = index[name] = len(names)
                names.append(name)
                totals.append(0)
            totals[i] += 1
            group_of[key] = i
        if len(names) > MAX_GROUP_LINES:
            # Keep the first groups (in run order); the others share one line.
            last = MAX_GROUP_LINES - 1
            others = len(names) - last
            totals = totals[:last] + [sum(totals[last:])]
            names = names[:last] + [f"({others} other groups)"]
            group_of = {k: min(i, last) for k, i in group_of.items()}
        self._group_names = names
        self._group_totals = totals
        self._group_done = [0] * len(names)
        self._group_seconds = [0.0] * len(names)
        self._group_of = group_of

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
