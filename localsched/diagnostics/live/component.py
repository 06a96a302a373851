"""What every dashboard component is: a Bokeh ``root``, an ``update()`` that
pulls from the shared :class:`~.feed.Feed`, and how often to call it.

A component belongs to one browser session (one Bokeh document) and keeps its
own cursors; the Feed it reads is shared by all sessions.  ``update`` runs on
the dashboard's own event loop, never in the scheduler's thread.
"""

from __future__ import annotations

import base64
import gzip
import sys
from typing import Any, ClassVar

import numpy as np
from bokeh.core.serialization import Serializable

from .feed import Feed

__all__ = ["Component", "PAGE_WIDTH", "changed", "inline", "lean", "short_datetime_axis"]

PAGE_WIDTH = 1000


class Component:
    """Base of the dashboard's components."""

    #: Path suffix of the component's own page: ``/individual-<name>``.
    name: ClassVar[str]
    #: Human title (also the key in ``/individual-plots.json``).
    title: ClassVar[str]
    #: Seconds between updates while a page shows it.
    period: ClassVar[float] = 0.1
    #: Whether its update is cheap and takes no tasks in (the summary): it
    #: then runs on its own rate, not only in the paced full updates.
    fast: ClassVar[bool] = False

    def __init__(self, feed: Feed, context: Any = None):
        self.feed = feed
        self.context = context  # the Dashboard (diagnostics to read, report writing)
        self.root: Any = None

    def update(self) -> None:
        raise NotImplementedError

    def tick(self) -> None:
        """A fast component's refresh between full updates (no take-in)."""
        self.update()


class InlineArray(np.ndarray, Serializable):
    """A numeric column that bokeh writes into its message's JSON (base64 of
    gzip, bokeh's own inline form when it does not defer buffers; fastest
    gzip level: a few hundred bytes of floats hardly compress) instead of as a binary
    buffer.  Each buffer costs two websocket frames of its own -- two
    socket writes, and on a busy machine two waits for the GIL, which the
    scheduler's threads hold -- while the few rows one update carries are a
    few hundred bytes: inline, a page's update is one message of three
    frames whatever its columns."""

    def to_serializable(self, serializer) -> dict:
        a = np.ascontiguousarray(self.view(np.ndarray))
        return {"type": "ndarray",
                "array": {"type": "bytes", "data": base64.b64encode(
                    gzip.compress(a.tobytes(), compresslevel=1, mtime=1)).decode()},
                "shape": list(a.shape), "dtype": a.dtype.name, "order": sys.byteorder}


def inline(values, dtype=float) -> np.ndarray:
    """``values`` as a numeric column sent inline (see InlineArray): float64
    or int32 (the types BokehJS reads; it has no int64)."""
    return np.asarray(values, dtype=dtype).view(InlineArray)


def changed(source, data: dict) -> None:
    """Send what differs of ``data`` from ``source.data``: nothing when
    equal; only the columns that changed when the rows are the same in
    number (a smaller message, and the browser recomputes only those);
    else the whole data."""
    old = source.data
    if set(old) != set(data) or any(len(old[k]) != len(data[k]) for k in data):
        source.data = data
        return
    new = {k: v for k, v in data.items()
           if not all(a == b for a, b in zip(old[k], v, strict=False))}
    if new:
        source.data.update(new)


def lean(fig, *, x_axis: bool = True, y_axis: bool = True, grids: str = "xy"):
    """Drop what a figure does not show: hidden axes and grids, the glyph
    copies bokeh makes for selection and muting (no tool here selects or
    mutes), and a view per renderer where renderers share a source.  Every
    model of a page is walked again for each message the page sends (bokeh
    builds a reference per model: about 1 µs each), so fewer models make
    every update cheaper."""
    from bokeh.models import Grid

    if not x_axis:
        fig.below, fig.above = [], []
    if not y_axis:
        fig.left, fig.right = [], []
    fig.center = [c for c in fig.center
                  if not isinstance(c, Grid) or "xy"[c.dimension] in grids]
    views: dict = {}
    for r in fig.renderers:
        r.nonselection_glyph = None
        r.muted_glyph = None
        # renderers of one source share its view (each view is two models)
        r.view = views.setdefault(id(r.data_source), r.view)
    return fig


def short_datetime_axis(fig) -> None:
    """A datetime x axis ticking milliseconds to days (bokeh's default
    ticker adds eight more tickers for weeks, months and years)."""
    ticker = fig.xaxis[0].ticker
    ticker.tickers = list(ticker.tickers[:4])
