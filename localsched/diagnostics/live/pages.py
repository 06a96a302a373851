"""The pages: ``/status`` with every component, and one ``/individual-<name>``
page per component (the paths dask-labextension's panel embeds).

Each page view builds its own components (one Bokeh document per tab) and a
periodic callback that updates each component at its own rate; the callback
(and with it the components) goes when the session is reaped.

Pacing, two rates: a page's summary strip refreshes every 100 ms while a
computation runs, from lengths and counters (no task looked at: a fraction
of a millisecond and one small message); the heavy parts -- taking in the
finished tasks (about a quarter of a microsecond each), the task stream,
progress per group, the ETA's estimate, resources -- go in a full update
when the page's CPU budget allows it (Pacer: PER_TASK per task finished, or
CPU_SHARE of a core, whichever is more, charged with everything the thread
spends, the summaries included), each component at most on its own period
(Cadence).  On the 50k-task tree (50-100k tasks a second) that is a full
update or two a second beside the summary's ten; for slower or fewer tasks
every update is a full one; on a busy machine the heavy parts slow down,
not the computation.
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
from .patch import patch_message
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
#: (The bar is 1 µs per task with a tab open: PER_TASK leaves room for the
#: budget kept from before a run, CPU_SHARE * BURST seconds, the last
#: update's debt, and the garbage collections the thread's allocations
#: happen to trigger, which a loaded machine makes dearer.)
PER_TASK = 0.6e-6
CPU_SHARE = 0.03
#: Seconds of CPU_SHARE a page keeps when it does not spend them.
BURST = 0.1
#: ... but a page updates at least this often (seconds), whatever the cost.
MAX_GAP = 2.0


class Pacer:
    """Whether a page may update now.

    The budget grows with wall time (``share`` CPU seconds a second) or
    with the tasks finished (``per_task`` CPU seconds each), whichever has
    given more over the page's life, and is spent by the CPU the server thread used
    since the last look (the whole thread: building and writing messages,
    the browser's replies, other tabs).  It keeps at most ``burst`` seconds
    of ``share`` (little: what it keeps from before a run is spent on top
    of the run's own budget) or, while tasks flow, what the tasks of five
    looks earn.  An update is allowed when the budget covers what the last
    one cost (at most what it may keep), so a
    run's updates are paid for before they happen, not owed at its end (an
    update that follows skipped looks takes in their tasks too, and costs
    more: the page then waits longer for the next); a one-off cost (the
    page's first build, a run's start) is owed, up to twice what it keeps,
    and delays the next update briefly.
    Whatever the thread's other work costs, an update is allowed at least
    every ``max_gap`` seconds: the page slows down, it never freezes.
    """

    def __init__(self, share: float = CPU_SHARE, per_task: float = PER_TASK,
                 burst: float = BURST, tasks=lambda: 0, clock=time.monotonic,
                 cpu_clock=time.thread_time, max_gap: float = MAX_GAP):
        self.share, self.per_task, self.cap = share, per_task, share * burst
        self.max_gap = max_gap
        self._allowed = clock()  # when an update was last allowed
        self.tasks, self.clock, self.cpu_clock = tasks, clock, cpu_clock
        self.credit = self._by_tasks = self._by_time = self.cap
        #: CPU seconds the last allowed update cost: as ``spent()`` reported
        #: it, else from when it was allowed to the look after
        self.cost = 0.0
        self.measured: float | None = None
        self._last: tuple | None = None
        self._allowed_cpu: float | None = None

    def ready(self) -> bool:
        now, cpu, tasks = self.clock(), self.cpu_clock(), self.tasks()
        last, self._last = self._last, (now, cpu, tasks)
        for_tasks = 0.0
        if last is not None:
            for_tasks = self.per_task * max(tasks - last[2], 0)
            spent = cpu - last[1]
            # (while tasks flow, looks that skip keep what the tasks earned
            # for the next update, which takes in their tasks too)
            keep = max(self.cap, 5 * for_tasks)
            # Two accounts, both charged with everything spent: one earns
            # per task, one a share of the time; the page may spend what the
            # richer holds.  (One account earning the larger of the two at
            # each look earns more than either over a run whose tasks come
            # unevenly: measured 1.2 µs per task on the 50k tree.)
            self._by_tasks = min(max(self._by_tasks + for_tasks - spent, -2 * keep), keep)
            self._by_time = min(max(self._by_time + self.share * (now - last[0]) - spent,
                                    -2 * keep), keep)
            self.credit = max(self._by_tasks, self._by_time)
        if self._allowed_cpu is not None and self.measured is None:
            self.cost = cpu - self._allowed_cpu
        self._allowed_cpu, self.measured = None, None
        # (at most what it may keep: a one-off cost is not waited for again)
        need = min(self.cost, max(self.cap, 5 * for_tasks))
        if self.credit < need * (1 - 1e-9):  # (not waiting on rounding)
            if now - self._allowed < self.max_gap:
                return False
            # (the floor: the debt is forgiven, not carried on)
            self.credit = self._by_tasks = self._by_time = 0.0
        self._allowed, self._allowed_cpu = now, cpu
        return True

    def spent(self, seconds: float) -> None:
        """What the allowed update cost (its own CPU, without the thread's
        other work until the next look)."""
        self.cost = self.measured = seconds


#: The kinds of update a page's tick makes (Cadence.next).
FULL, SUMMARY = "full", "summary"
#: Seconds between a page's updates while a computation runs: a full one
#: when the Pacer allows it, else the summary strip's; the page's timer
#: looks every TICK.  Every look wakes the server thread, which then waits
#: for the GIL the scheduler's threads hold (costing them a switch, and it
#: CPU): looking every 50 ms, so that a delayed look cost half a period,
#: put the page's cost with a tab at 0.90-1.10 µs per task on the 50k tree;
#: looking every period, 0.84-0.99, with waits of up to 150-220 ms at times.
PERIOD = 0.1
TICK = 0.1
#: The summary strip's own pace: every PERIOD while its updates cost at
#: most SUMMARY_SHARE of a core, less often when dearer (a loaded machine).
SUMMARY_SHARE = 0.03
#: While tasks finish faster than FAST_TASKS a second, full updates (the
#: heavy parts, redrawn in the browser) come at most every FAST_PERIOD
#: seconds; the strip still ticks every PERIOD.
FAST_TASKS = 1000
FAST_PERIOD = 0.5


class Cadence:
    """Which update a page makes, looked at every ``tick``, an update at
    most every ``period``: a FULL one when the Pacer allows it (the
    finished tasks taken in, every component whose period has come), else
    a SUMMARY one (the fast components only: a few numbers read as
    lengths, one small message), else none.  Both are charged to the
    Pacer's budget (it reads the thread's CPU clock): the summary's cost
    leaves less for the heavy parts, whose rate is what gives; the summary
    keeps its own rate as long as it costs at most ``summary_share`` of a
    core.  Given ``tasks`` (tasks finished so far), full updates also wait
    for the browser: at most every FAST_PERIOD while tasks finish fast."""

    def __init__(self, pacer: Pacer, period: float = PERIOD, tick: float = TICK,
                 summary_share: float = SUMMARY_SHARE, clock=time.monotonic,
                 tasks=None):
        self.pacer, self.period, self.tick = pacer, period, tick
        self.summary_share, self.clock = summary_share, clock
        self._due = self._summary_due = self._full_due = -1e300
        self._summary_cost = 0.0
        #: Tasks finished so far (a callable), for the browser's pace.
        self.tasks = tasks
        self._full_seen: tuple | None = None  # (when, tasks) at the last full update

    def next(self) -> str | None:
        now = self.clock()
        if now < self._due:
            return None
        # (due a period on, half a tick early: timers jitter)
        self._due = now + self.period - self.tick / 2
        if now >= self._full_due and self.pacer.ready():
            kind = FULL
            self._full_due = now + self._full_gap(now) - self.tick / 2
        elif now >= self._summary_due:
            kind = SUMMARY
        else:
            return None
        gap = max(self.period, self._summary_cost / self.summary_share)
        self._summary_due = now + gap - self.tick / 2
        return kind

    def _full_gap(self, now: float) -> float:
        """Seconds until the next full update may come: FAST_PERIOD while
        tasks finish faster than FAST_TASKS a second since the last one
        (each full update redraws the task stream and the groups in the
        browser -- 10-30 ms of its CPU, on the cores the tasks run on -- and
        at that rate no one reads a task at a time), else none."""
        if self.tasks is None:
            return 0.0
        tasks = self.tasks()
        last, self._full_seen = self._full_seen, (now, tasks)
        if last is None or now <= last[0]:
            return 0.0
        rate = (tasks - last[1]) / (now - last[0])
        return FAST_PERIOD if rate > FAST_TASKS else 0.0

    def spent(self, kind: str, seconds: float) -> None:
        """What the update ``next()`` allowed cost (its own CPU)."""
        if kind == FULL:
            self.pacer.spent(seconds)
        else:
            self._summary_cost = seconds


def _schedule(doc, components: list, feed: Feed, soon, finals: dict | None = None) -> None:
    """A fixed-rate timer per page, every TICK, on the server's event loop:
    it asks the Cadence, which reads only clocks and counters, and only an
    update it allows enters bokeh (a next-tick callback, under the
    document's lock).  A bokeh periodic callback would pay bokeh's callback
    machinery -- the session lock, a task, curdoc -- on every tick, skipped
    or not: a millisecond a tick on a machine whose threads fight for the
    GIL.  A full update takes in the finished tasks and updates the
    components whose period has come; a summary update only the fast ones
    (the summary strip); each with the document held meanwhile and sent as
    one message.  Once a full update has shown the end of the last
    computation (every task taken in), the page updates only every
    IDLE_TICK until the next one starts.  The timer stops with the page's
    session.  ``soon(fn)`` runs ``fn`` on the server's thread (the timer's
    loop), wherever bokeh builds the page (``BackgroundServer.soon``).

    ``finals`` (the Dashboard's ``page_finals``) gets the page's last
    update while the session lives: called on the server's thread when the
    dashboard ends, it queues one full update (the run's last numbers and
    the dashboard's ``ended`` note) and returns an Event set once bokeh has
    written it to the page, so a tab left open shows how things ended."""
    from tornado.ioloop import PeriodicCallback

    tick = TICK
    due = [0.0] * len(components)
    fast = [c for c in components if c.fast]
    cadence = Cadence(Pacer(tasks=feed.tasks_recorded),
                      period=max(min(c.period for c in components), PERIOD), tick=tick,
                      tasks=feed.tasks_recorded)
    idle_due = [0.0]
    shown = [False]  # whether a full update showed the last run's end

    def step() -> None:
        try:
            now = time.monotonic()
            if feed.active():
                shown[0] = False
            elif shown[0]:  # (the last run's end is on the page: idle)
                if now < idle_due[0]:
                    return
                idle_due[0] = now + IDLE_TICK - tick / 2
            # (the finished tasks are taken in by a full update only: taken
            # in every tick, their cost -- about half a microsecond each --
            # went past the budget before any update was allowed)
            kind = cadence.next()
            if kind == FULL:
                doc.add_next_tick_callback(lambda: update(FULL, full_update, now))
            elif kind == SUMMARY and fast:
                doc.add_next_tick_callback(lambda: update(SUMMARY, summary_update, now))
        except Exception:  # noqa: BLE001 -- a page's timer logs, never stops the loop
            logger.exception("localsched dashboard: a page update failed")

    def update(kind: str, parts, now: float) -> None:
        cpu = time.thread_time()
        try:
            _send_update(doc, parts, now)
        finally:
            cadence.spent(kind, time.thread_time() - cpu)

    def full_update(now: float, force: bool = False) -> None:
        feed.update(force=force)
        shown[0] = feed.settled()
        for i, c in enumerate(components):
            if now >= due[i] or c.fast:
                due[i] = now + c.period - PERIOD / 2
                _update_one(c)

    def summary_update(now: float) -> None:
        for c in fast:
            _update_one(c, tick=True)

    def final():
        import threading

        written = threading.Event()
        timer.stop()
        # (forced: whatever another page took in a moment ago, every task is in)
        doc.add_next_tick_callback(lambda: update(FULL, partial(full_update, force=True),
                                                  time.monotonic()))
        # (bokeh runs a document's callbacks one at a time, each after the
        # writes of the one before: this one runs once the update is sent)
        doc.add_next_tick_callback(written.set)
        return written

    timer = PeriodicCallback(step, tick * 1000)
    soon(timer.start)  # (PeriodicCallback takes the loop of the thread that starts it)
    if finals is not None:
        finals[id(final)] = final
    doc.on_session_destroyed(lambda _context: soon(partial(_stopped, timer, finals,
                                                           id(final))))


def _stopped(timer, finals: dict | None, token: int) -> None:
    """A page's session ended: its timer stops, its last update goes."""
    timer.stop()
    if finals is not None:
        finals.pop(token, None)


def _update_one(component, tick: bool = False) -> None:
    try:
        component.tick() if tick else component.update()
    except Exception:  # noqa: BLE001 -- one component's failure is logged,
        # never raised into bokeh (the page and the others go on)
        logger.exception("localsched dashboard: %s update failed", component.name)


def _send_update(doc, parts, now: float) -> None:
    """Run ``parts(now)`` with the document held; send what changed as one message."""
    doc.hold("combine")
    try:
        parts(now)
    finally:
        try:
            sent = _send_held_as_one(doc)
        except Exception:  # noqa: BLE001 -- (then as bokeh sends them)
            logger.exception("localsched dashboard: one message for an update failed")
            sent = False
        try:
            if not sent:
                doc.unhold()
        except Exception:  # noqa: BLE001 -- (sending failed: logged, never raised
            # into bokeh, whose curdoc() patch would then stay in place)
            logger.exception("localsched dashboard: sending an update failed")


def _send_held_as_one(doc) -> bool:
    """Send what an update changed as ONE message to the page.

    Bokeh's server writes one PATCH-DOC message per held event (its
    ``unhold()`` hands the session one event at a time), and every message
    costs the server thread the same again whatever it carries: a reference
    per model of the page to build, three websocket frames, the writes'
    locks and futures -- most of what an update of the summary and the task
    stream costs (the references are made only for the models the events
    name: see patch.py).  The protocol carries any number of events per message:
    when the page's only listener is its server session, the held events go
    out together, the way ``unhold()`` would have sent them one by one
    (model callbacks first, then the session's writes, which bokeh awaits
    after the callback).  Anything unexpected (another listener, an event
    of another kind, a bokeh without these attributes): False, and the
    caller unholds as usual."""
    import bokeh.server.session as bokeh_session
    from bokeh.document.callbacks import invoke_with_curdoc
    from bokeh.document.events import DocumentPatchedEvent

    if hasattr(bokeh_session, "_PendingPatch"):
        # bokeh 3.10+ queues patches, not writes, and serializes them in
        # its executor: bokeh's own unhold, one message per event.
        return False
    callbacks = doc.callbacks
    events = getattr(callbacks, "_held_events", None)
    session = getattr(getattr(doc, "session_context", None), "_session", None)
    pending = getattr(session, "_pending_writes", None)
    connections = getattr(session, "_subscribed_connections", None)
    listeners = getattr(callbacks, "_change_callbacks", None)
    if (not events or pending is None or connections is None
            or listeners is None or list(listeners) != [session]
            or getattr(callbacks, "_hold", None) is None
            or not all(type(e).__mro__.count(DocumentPatchedEvent) and e.setter is None
                       for e in events)):
        return False
    sockets: list = [getattr(connection, "_socket", None) for connection in connections]
    if not all(hasattr(socket, "send_message") for socket in sockets):
        return False
    # (built before anything changes; one message for every connection)
    try:
        message = patch_message(doc, events) if sockets else None
    except (AttributeError, ImportError, TypeError):  # (a bokeh whose internals moved)
        return False
    sends = [(socket, message) for socket in sockets]
    callbacks._held_events, callbacks._hold = [], None
    for event in events:
        if event.callback_invoker is not None:
            invoke_with_curdoc(doc, event.callback_invoker)
    for socket, message in sends:  # (bokeh awaits these after the callback)
        pending.append(socket.send_message(message))
    return True


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
    _schedule(doc, list(comps.values()), feed, _soon(context), _finals(context))
    # The strip is a root of its own: its text changes ten times a second,
    # and a Div's new text makes BokehJS lay out the whole layout it sits
    # in again (measured: ~25 ms of the browser's CPU per change inside the
    # page's column, the most a tab cost a run), alone only itself.
    doc.add_root(comps[Summary].root)
    doc.add_root(column(
        comps[Summary].findings,
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
    _schedule(doc, [component], feed, _soon(context), _finals(context))
    doc.add_root(component.root)
    doc.title = f"localsched: {cls.title}"


def _finals(context) -> dict | None:
    finals = getattr(context, "page_finals", None)
    return finals if isinstance(finals, dict) else None


def _soon(context):
    """How to run something on the dashboard's server thread (see
    ``_schedule``); where there is no server, at once."""
    server = getattr(context, "_server", None)
    return server.soon if server is not None else (lambda fn: fn())


def applications(feed: Feed, context) -> dict:
    """Path -> bokeh Application, for the server."""
    apps = {"/status": Application(FunctionHandler(
        lambda doc: _status(feed, context, doc)))}
    for cls in COMPONENTS:
        apps[f"/individual-{cls.name}"] = Application(FunctionHandler(
            partial(_individual, cls, feed, context)))
    return apps
