"""The summary strip: elapsed, done/total, tasks per second, failed, workers
busy and the ETA of the current (or last) computation; the time a finished
one took (no ETA); or, before any, whether the Dashboard records at all.

Its counts are those of the last take-in (``Feed.progress``), the snapshot
progress per group is drawn from, so the two agree; it refreshes every
100 ms on its own (one small message, only when its text changes) for the
elapsed time and the ETA's countdown, while the take-in, the task stream
and the groups go at the rate the page's CPU budget allows.

The page's Div is not what changes ten times a second: a Div's new text
makes BokehJS re-render it and lay out its layout again (the most a tab
cost a run of tiny tasks; figures: ``benchmarks/README.md``).  The text goes to
a one-row ColumnDataSource no view draws (``text_source``), and a CustomJS
writes it into the Div's element (the Div is a root of the document: its
view is ``Bokeh.index[div.id]``); where that view is not found, it sets the
Div's text as before."""

from __future__ import annotations

import html

from bokeh.models import ColumnDataSource, CustomJS
from bokeh.models.widgets import Div

from ..collectors.eta import format_clock
from ..reporting.advice_html import findings_short_html
from .component import PAGE_WIDTH, Component

__all__ = ["Summary", "summary_html", "format_seconds"]


#: Pixels of the strip's height (fixed: with CSS containment, a new text
#: makes the browser lay out and paint the strip alone).
STRIP_HEIGHT = 40
#: What stands under the strip while a finished run's findings are computed.
COMPUTING = ("<div class='ls-findings' style='font:13px sans-serif;color:#777'>"
             "Findings: computing...</div>")
#: What the strip says while nothing was recorded, recording or not.
WAITING = "waiting for a computation..."
NOT_RECORDING = ("not recording: computations run without this Dashboard. Start it with "
                 "<code>with dash:</code>, <code>dash.register()</code> or "
                 "<code>compute(callbacks=[dash])</code>, or use "
                 "<code>localsched.diagnostics.dashboard()</code> (registered at once).")


def format_seconds(seconds: float | None) -> str:
    """Elapsed or remaining time as the strip shows it: hundredths under a
    second, tenths under ten, whole seconds under a minute, then a clock
    (so a long run's strip changes once a second, not ten times).

    >>> [format_seconds(s) for s in (0.0, 0.42, 3.14159, 42.4, 75.4, None)]
    ['0.00 s', '0.42 s', '3.1 s', '42 s', '01:15', '?']
    """
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    return format_clock(seconds)


def summary_html(p: dict, recording: bool = True, ended: str | None = None) -> str:
    """The strip's HTML for a ``Feed.progress()`` dict; ``recording``:
    whether the Dashboard is registered (an idle one that is not says so);
    ``ended``: the dashboard has ended (a run still going then stopped
    being shown: "stopped", its last numbers)."""
    if p["status"] == "idle":
        text = (html.escape(ended) if ended else WAITING if recording else NOT_RECORDING)
        return f"<div class='ls-summary' style='font:14px sans-serif'>{text}</div>"
    running = p["status"] == "running" and not ended
    status = "stopped" if ended and p["status"] == "running" else p["status"]
    cells = [
        ("run", f"#{p['run']} {status}"),
        ("elapsed" if running else "took", format_seconds(p["elapsed"])),
        ("tasks", f"{p['done']:,} / {p['total']:,}"),
        ("tasks/s", f"{p['rate']:,.1f}"),
        ("failed", f"{p['erred']:,}"),
    ]
    if running:
        cells.append(("in flight", f"{p['running']:,}"))
        cells.append(("workers busy", f"{p['busy']} / {p['workers']}"))
        eta = p["eta"]
        cells.append(("ETA", format_seconds(eta) if eta is not None else
                      f"? ({p.get('eta_note') or 'no estimate yet'})"))
    else:
        cells.append(("workers", f"{p['workers']}"))
    body = "".join(
        f"<span style='margin-right:1.6em'><span style='color:#777'>{html.escape(k)}</span> "
        f"<b>{html.escape(v)}</b></span>" for k, v in cells)
    link = p.get("cluster_dashboard")
    if link:
        body += (f"<span>cluster dashboard: <a href='{html.escape(link)}' target='_blank'>"
                 f"{html.escape(link)}</a></span>")
    return f"<div class='ls-summary' style='font:14px sans-serif'>{body}</div>"


def ended_html(note: str) -> str:
    """The line under the strip once the dashboard ended (``Dashboard.close``)."""
    return (f"<p class='ls-ended' style='font:14px sans-serif;margin:4px 0;color:#555'>"
            f"{html.escape(note)}</p>")


#: The strip's text into its Div's element, without a model change (see the
#: module docstring); else the Div's text.
_WRITE_TEXT_JS = """
const data = cb_obj.data;
const html = (data instanceof Map ? data.get("html") : data.html)[0];
const view = window.Bokeh && Bokeh.index ? Bokeh.index[div.id] : null;
if (view != null && view.markup_el != null) {
  view.markup_el.innerHTML = html;
} else {
  div.text = html;
}
"""


class Summary(Component):
    """The strip.  ``update`` (a page's full update, after the take-in)
    reads the Feed's progress; ``tick`` (the refreshes between) moves only
    its clocks -- elapsed time and the ETA's countdown -- from what the last
    ``update`` read, so the counts stay those progress per group was drawn
    from, even when a probe (``/json/progress.json``) takes tasks in between."""

    name = "summary"
    title = "Summary"
    period = 0.1
    #: Updated on its own (cheap) rate: no take-in of the finished tasks.
    fast = True

    def __init__(self, feed, context=None):
        super().__init__(feed, context)
        self._read: tuple | None = None  # (when, the progress dict) of the last update
        self.text = ""
        self.text_source = ColumnDataSource({"html": [""]}, name="summary_text")
        # The findings of a finished run, under the strip (a Div of its own:
        # the strip's height is fixed), computed once per run.
        self._findings_of: int | None = None
        self._ended: str | None = None  # (the dashboard's end, as shown)
        self.root: Div | None = None
        self._state: tuple | None = None  # (status, recording, ended) the Div's text says
        self.findings = Div(text="", width=PAGE_WIDTH, name="summary_findings")
        self._show(self._read_now())
        # (the source rides in the Div's tags: part of the document with it)
        self.root = Div(text=self.text, width=PAGE_WIDTH, height=STRIP_HEIGHT, name="summary",
                        tags=[self.text_source], styles={"contain": "strict"})
        self._state = self._state_of(self._read[1] if self._read else {})
        self.text_source.js_on_change("data", CustomJS(args={"div": self.root},
                                                        code=_WRITE_TEXT_JS))

    def _show(self, progress: dict) -> None:
        ended = getattr(self.context, "ended", None)
        ended = ended if isinstance(ended, str) else None
        text = summary_html(progress, getattr(self.context, "recording", True), ended)
        if text != self.text:
            self.text = text
            self.text_source.data = {"html": [text]}
        state = self._state_of(progress)
        if self.root is not None and state != self._state:
            # The ticks write the strip's DOM (the source's callback); the
            # Div's own text follows each change of state (idle, running,
            # finished, ended): a view that renders again -- or is made
            # after the ticks -- shows the run's state, never the page's first.
            self._state = state
            self.root.text = text
        if progress["status"] in ("finished", "errored"):
            self._show_findings(progress["run"])
        if ended and self._ended is None:  # (the dashboard's end: once, above the findings)
            self._ended = ended_html(ended)
            self.findings.text = self._ended + self.findings.text

    def _state_of(self, progress: dict) -> tuple:
        return (progress.get("status"), progress.get("run"),
                getattr(self.context, "recording", True), getattr(self.context, "ended", None))

    def _show_findings(self, run: int) -> None:
        if self._findings_of == run:
            return
        runs = self.feed.recorder.runs
        log = runs[-1] if runs else None
        # (computed once per run for every page, off the event loop: until
        # they are, "computing", and asked again at the next refresh)
        found = self.feed.findings.get(log) if log is not None and log.finished else []
        if found is None:
            if self.findings.text != (self._ended or "") + COMPUTING:
                self.findings.text = (self._ended or "") + COMPUTING
            return
        self._findings_of = run
        self.findings.text = (self._ended or "") + findings_short_html(found)

    def _read_now(self) -> dict:
        progress = self.feed.progress()
        self._read = (self.feed.clock(), progress)
        return progress

    def update(self) -> None:
        self._show(self._read_now())

    def tick(self) -> None:
        if self._read is None:
            self.update()
            return
        when, progress = self._read
        if progress["status"] != "running":
            self._show(progress)  # (idle: whether it records may change)
            return
        gone = max(self.feed.clock() - when, 0.0)
        eta = progress["eta"]
        self._show({**progress, "elapsed": progress["elapsed"] + gone,
                    "eta": None if eta is None else max(eta - gone, 0.0)})
