"""The summary strip: elapsed, done/total, tasks per second, failed, workers
busy and the ETA of the current (or last) computation.

It is the page's fast part: its numbers are lengths and counters the Feed
reads without taking in the finished tasks (``Feed.progress``), so it
refreshes every 100 ms on its own, one small message, while the heavy
parts (take-in, task stream, progress per group, the ETA's estimate) go at
the rate the page's CPU budget allows."""

from __future__ import annotations

import html

from bokeh.models.widgets import Div

from ..advice_html import findings_short_html
from ..eta import format_clock
from .component import PAGE_WIDTH, Component
from .findings import run_findings

__all__ = ["Summary", "summary_html"]


def summary_html(p: dict) -> str:
    """The strip's HTML for a ``Feed.progress()`` dict."""
    if p["status"] == "idle":
        return "<div class='ls-summary'>waiting for a computation...</div>"
    eta = format_clock(p["eta"]) if p["status"] == "running" else "00:00"
    if p["status"] == "errored":
        eta = "-"
    cells = [
        ("run", f"#{p['run']} {p['status']}"),
        ("elapsed", format_clock(p["elapsed"])),
        ("tasks", f"{p['done']:,} / {p['total']:,}"),
        ("tasks/s", f"{p['rate']:,.1f}"),
        ("failed", f"{p['erred']:,}"),
        ("workers busy", f"{p['busy']} / {p['workers']}"),
        ("ETA", eta),
    ]
    body = "".join(
        f"<span style='margin-right:1.6em'><span style='color:#777'>{html.escape(k)}</span> "
        f"<b>{html.escape(v)}</b></span>" for k, v in cells)
    link = p.get("cluster_dashboard")
    if link:
        body += (f"<span>cluster dashboard: <a href='{html.escape(link)}' target='_blank'>"
                 f"{html.escape(link)}</a></span>")
    return f"<div class='ls-summary' style='font:14px sans-serif'>{body}</div>"


class Summary(Component):
    name = "summary"
    title = "Summary"
    period = 0.1
    #: Updated on its own (cheap) rate: no take-in of the finished tasks.
    fast = True

    def __init__(self, feed, context=None):
        super().__init__(feed, context)
        self._findings: tuple = (None, "")  # (run number, its findings' HTML)
        self.root = Div(text=self._html(feed.progress()), width=PAGE_WIDTH, name="summary")

    def _html(self, p: dict) -> str:
        """The strip, and under it the findings of a finished run (computed
        once per run, when the strip first shows it finished)."""
        text = summary_html(p)
        if p["status"] not in ("finished", "errored"):
            return text
        if self._findings[0] != p["run"]:
            runs = self.feed.recorder.runs
            log = runs[-1] if runs else None
            found = run_findings(log) if log is not None and log.finished else []
            self._findings = (p["run"], findings_short_html(found))
        return text + self._findings[1]

    def update(self) -> None:
        text = self._html(self.feed.progress())
        if text != self.root.text:
            self.root.text = text
