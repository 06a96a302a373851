"""Bokeh figures of profiler records: one import for all of them.

The figures live one a module in ``localsched.diagnostics.figures``, the
numbers behind them in ``localsched.diagnostics.reporting.aggregate`` and the pages in
``localsched.diagnostics.reporting.page``; this module gathers their public names.
Nothing imports it at ``import localsched`` time.  Every figure is built from
plain records (``localsched.diagnostics.collectors.records``), never from live profiler
internals.

The clock
---------
Records carry epoch seconds (``time.time()`` on the machine where the event
happened).  Each figure's x axis is ``record time - t0`` in seconds, labelled
"Time (s)".  ``t0`` defaults to the earliest time in the figure's own records;
``visualize`` passes every figure the earliest time across *all* profilers, and
one shared x range, so the figures line up and zoom together.

Big runs
--------
A browser cannot draw 100,000 glyphs quickly, and a standalone HTML file
holding all of them is large.  Instead of dropping records, what would be
narrower than a pixel is aggregated (above ``AGGREGATE_ABOVE`` tasks or
transfer segments): per worker and pixel column, one bar whose area is
the busy time (``aggregate.occupancy_bars``); lines with more than two
points a pixel keep each pixel column's maximum, so peaks survive
(``aggregate.step_max``).  What each figure shows: its module in
``localsched.diagnostics.figures``.

Every ``plot_*`` function takes ``x_range`` (a bokeh range to share with other
figures; with a numeric ``Range1d`` its span sets the pixel size) and ``t0``.

Examples
--------
>>> from localsched.diagnostics.collectors.records import TaskData
>>> results = [TaskData('inc-a1b2c3d4', (abs, -1), 100.0, 100.5, 7),
...            TaskData(('add-f00d1234', 0), (max, 1, 2), 100.5, 101.0, 3)]
>>> fig = plot_tasks(results)
>>> source = fig.select_one({'name': 'tasks'}).data_source
>>> list(source.data['key']), source.data['left'].tolist()
(['inc-a1b2c3d4', "('add-f00d1234', 0)"], [0.0, 0.5])

See Also
--------
localsched.diagnostics.collectors.records : TaskData, ResourceData, CacheData
"""

from __future__ import annotations

from ..figures.base import ACTIVITY_COLORS, LABEL_SIZE, LEGEND_ITEMS
from ..figures.cache import plot_cache
from ..figures.durations import HISTOGRAM_GROUPS, plot_durations
from ..figures.flame import flame_trees, plot_flame
from ..figures.metrics import metrics_html, plot_metrics
from ..figures.resources import plot_resources
from ..figures.tasks import (
           ACTIVITY_HEIGHT,
           FAILED_COLOR,
           RECEIVE_COLOR,
           ROW_HEIGHT,
           SEND_COLOR,
           TRANSFER_HEIGHT,
           plot_tasks,
)
from .aggregate import AGGREGATE_ABOVE, NO_GROUP, PIXELS
from .naming import REPR_LIMIT
from .page import report_html, report_layout, visualize
from .tables import summary_html

__all__ = ["plot_tasks", "plot_resources", "plot_cache", "visualize", "summary_html",
           "plot_metrics", "metrics_html", "plot_flame", "flame_trees", "plot_durations",
           "report_layout", "report_html", "PIXELS", "AGGREGATE_ABOVE", "ACTIVITY_COLORS",
           "LABEL_SIZE", "LEGEND_ITEMS", "HISTOGRAM_GROUPS", "NO_GROUP", "ROW_HEIGHT",
           "TRANSFER_HEIGHT", "ACTIVITY_HEIGHT", "REPR_LIMIT", "FAILED_COLOR", "SEND_COLOR",
           "RECEIVE_COLOR"]
