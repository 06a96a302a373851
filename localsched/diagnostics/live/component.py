"""What every dashboard component is: a Bokeh ``root``, an ``update()`` that
pulls from the shared :class:`~.feed.Feed`, and how often to call it.

A component belongs to one browser session (one Bokeh document) and keeps its
own cursors; the Feed it reads is shared by all sessions.  ``update`` runs on
the dashboard's own event loop, never in the scheduler's thread.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .feed import Feed

__all__ = ["Component", "PAGE_WIDTH", "changed", "lean", "short_datetime_axis"]

PAGE_WIDTH = 1000


class Component:
    """Base of the dashboard's components."""

    #: Path suffix of the component's own page: ``/individual-<name>``.
    name: ClassVar[str]
    #: Human title (also the key in ``/individual-plots.json``).
    title: ClassVar[str]
    #: Seconds between updates while a page shows it.
    period: ClassVar[float] = 0.1

    def __init__(self, feed: Feed, context: Any = None):
        self.feed = feed
        self.context = context  # the Dashboard (diagnostics to read, report writing)
        self.root: Any = None

    def update(self) -> None:
        raise NotImplementedError


def changed(source, data: dict) -> None:
    """Replace ``source.data`` only if it differs (no message when unchanged)."""
    old = source.data
    if set(old) == set(data) and all(len(old[k]) == len(data[k]) and
                                     all(a == b for a, b in zip(old[k], data[k], strict=False))
                                     for k in data):
        return
    source.data = data


def lean(fig, *, x_axis: bool = True, y_axis: bool = True, grids: str = "xy"):
    """Drop what a figure does not show: hidden axes and grids, and the
    glyph copies bokeh makes for selection and muting (no tool here selects
    or mutes).  Every model of a page is walked again for each message the
    page sends, so fewer models make every update cheaper."""
    from bokeh.models import Grid

    if not x_axis:
        fig.below, fig.above = [], []
    if not y_axis:
        fig.left, fig.right = [], []
    fig.center = [c for c in fig.center
                  if not isinstance(c, Grid) or "xy"[c.dimension] in grids]
    for r in fig.renderers:
        r.nonselection_glyph = None
        r.muted_glyph = None
    return fig


def short_datetime_axis(fig) -> None:
    """A datetime x axis ticking milliseconds to days (bokeh's default
    ticker adds eight more tickers for weeks, months and years)."""
    ticker = fig.xaxis[0].ticker
    ticker.tickers = list(ticker.tickers[:4])
