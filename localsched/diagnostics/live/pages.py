"""The pages: ``/status`` with every component, and one ``/individual-<name>``
page per component (the paths dask-labextension's panel embeds).

Each page view builds its own components (one Bokeh document per tab) and a
periodic callback that updates each component at its own rate; the callback
(and with it the components) goes when the session is reaped.
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


def _schedule(doc, components: list) -> None:
    """One periodic callback per page: each tick updates the components
    whose period has come, with the document's changes held and sent as one
    message (bokeh walks the document once per message)."""
    tick = min(c.period for c in components)
    due = [0.0] * len(components)

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
            doc.unhold()

    doc.add_periodic_callback(update, int(tick * 1000))


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
    _schedule(doc, list(comps.values()))
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
    _schedule(doc, [component])
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
