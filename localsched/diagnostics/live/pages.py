"""The pages: ``/status`` with every component, and one ``/individual-<name>``
page per component (the paths dask-labextension's panel embeds).

Each page view builds its own components (one Bokeh document per tab) and a
periodic callback that updates each component at its own rate; the callback
(and with it the components) goes when the session is reaped.

Pacing: every message Bokeh sends costs a millisecond or so whatever
little changed, and the feed's pass costs a fraction of a microsecond per
task.  A page skips ticks while the server thread is over its budget
(PER_TASK per task finished, or CPU_SHARE of a core, whichever is more; see
Pacer), so on a busy machine or for a flood of tiny tasks the page
refreshes less often instead of taking the scheduler's time.
"""

from __future__ import annotations

import html
import logging
import time
from functools import partial

from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.layouts import column, row
from bokeh.models.widgets import Button, Div

from .feed import Feed
from .finemetrics import FineMetricsView
from .flame import FlameGraph
from .groups import GroupProgress
from .memory import MemoryByGroup
from .resources import Resources
from .summary import Summary
from .taskstream import TaskStream

__all__ = ["COMPONENTS", "applications"]

logger = logging.getLogger(__name__)

#: Every component, in the order of ``/individual-plots.json``.
COMPONENTS: tuple = (Summary, GroupProgress, TaskStream, Resources, MemoryByGroup,
                     FineMetricsView, FlameGraph)

#: Seconds between a page's updates while no computation runs.
IDLE_TICK = 0.5
#: The page's CPU budget: PER_TASK seconds per task the computations
#: finish, or CPU_SHARE of a core when that is more (few tasks, idle).
PER_TASK = 0.8e-6
CPU_SHARE = 0.02
#: ... but a page updates at least this often (seconds), whatever the cost.
MAX_GAP = 2.0


class Pacer:
    """Whether a page may update now.

    The budget grows with wall time (``share`` CPU seconds a second) or
    with the tasks finished meanwhile (``per_task`` CPU seconds each),
    whichever gives more, and is spent by the CPU the server thread used
    since the last look (the whole thread: building and writing messages,
    the browser's replies, other tabs).  It keeps at most ``burst`` seconds
    of ``share``, and owes at most twice that: a one-off cost (the page's
    first build, a run's start) delays the next update briefly.  Whatever
    the thread's other work costs, an update is allowed at least every
    ``max_gap`` seconds: the page slows down, it never freezes.
    """

    def __init__(self, share: float = CPU_SHARE, per_task: float = PER_TASK,
                 burst: float = 0.25, tasks=lambda: 0, clock=time.monotonic,
                 cpu_clock=time.thread_time, max_gap: float = MAX_GAP):
        self.share, self.per_task, self.cap = share, per_task, share * burst
        self.max_gap = max_gap
        self._allowed = clock()  # when an update was last allowed
        self.tasks, self.clock, self.cpu_clock = tasks, clock, cpu_clock
        self.credit = self.cap
        self._last: tuple | None = None
        self.skipped = 0

    def ready(self) -> bool:
        now, cpu, tasks = self.clock(), self.cpu_clock(), self.tasks()
        last, self._last = self._last, (now, cpu, tasks)
        if last is not None:
            earned = max(self.share * (now - last[0]), self.per_task * (tasks - last[2]))
            credit = self.credit + earned - (cpu - last[1])
            self.credit = min(max(credit, -2 * self.cap), self.cap)
        if self.credit < 0:
            if now - self._allowed < self.max_gap:
                self.skipped += 1
                return False
            self.credit = 0.0  # (the floor: the debt is forgiven, not carried on)
        self._allowed = now
        return True


def _schedule(doc, components: list, feed: Feed) -> None:
    """One timed callback per page, re-armed each time: every ``tick``
    while a computation runs (or ended within a second), every IDLE_TICK
    otherwise.  Each tick the Pacer allows updates the components whose
    period has come, with the document held meanwhile (repeated changes of
    one property go out once)."""
    tick = min(c.period for c in components)
    due = [0.0] * len(components)
    pacer = Pacer(tasks=lambda: feed.completed_total)

    def step() -> None:
        try:
            if pacer.ready():
                update()
        finally:
            delay = tick if feed.active(within=1.0) else max(tick, IDLE_TICK)
            doc.add_timeout_callback(step, int(delay * 1000))

    def update() -> None:
        now = time.monotonic()
        doc.hold("combine")
        try:
            for i, c in enumerate(components):
                if now >= due[i]:
                    due[i] = now + c.period - tick / 2
                    try:
                        c.update()
                    except Exception:  # noqa: BLE001 -- one component's failure is logged,
                        # never raised into bokeh (the page and the others go on)
                        logger.exception("localsched dashboard: %s update failed", c.name)
        finally:
            try:
                doc.unhold()
            except Exception:  # noqa: BLE001 -- (sending failed: logged, never raised
                # into bokeh, whose curdoc() patch would then stay in place)
                logger.exception("localsched dashboard: sending an update failed")

    doc.add_timeout_callback(step, int(tick * 1000))


def _report_controls(context) -> object:
    """A button that writes the static performance report of what was recorded so far."""
    button = Button(label="Write performance report", width=220, name="report_button")
    note = Div(text="<a href='report.html' target='_blank'>open the report so far</a>",
               name="report_note")

    def write(*_):
        try:
            path = context.write_report()
        except Exception as exc:  # noqa: BLE001 -- shown on the page, not raised into bokeh
            note.text = f"<span style='color:#d62728'>report failed: {html.escape(str(exc))}"
            return
        note.text = (f"written: <code>{html.escape(path)}</code> &middot; "
                     "<a href='report.html' target='_blank'>open the report so far</a>")

    button.on_click(write)
    return row(button, note)


def _status(feed: Feed, context, doc) -> None:
    comps = {cls: cls(feed, context) for cls in COMPONENTS}
    _schedule(doc, list(comps.values()), feed)
    doc.add_root(column(
        row(comps[Summary].root, name="summary_row"),
        _report_controls(context),
        comps[TaskStream].root,
        comps[GroupProgress].root,
        comps[Resources].root,
        row(comps[MemoryByGroup].root, comps[FineMetricsView].root),
        comps[FlameGraph].root,
        name="status"))
    doc.title = "localsched dashboard"


def _individual(cls, feed: Feed, context, doc) -> None:
    component = cls(feed, context)
    _schedule(doc, [component], feed)
    doc.add_root(component.root)
    doc.title = f"localsched: {cls.title}"


def applications(feed: Feed, context) -> dict:
    """Path -> bokeh Application, for the server."""
    apps = {"/status": Application(FunctionHandler(
        lambda doc: _status(feed, context, doc)))}
    for cls in COMPONENTS:
        apps[f"/individual-{cls.name}"] = Application(FunctionHandler(
            partial(_individual, cls, feed, context)))
    return apps
