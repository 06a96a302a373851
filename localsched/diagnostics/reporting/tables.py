"""Records as tables: pandas DataFrames and the HTML a notebook shows.

Bokeh-free; pandas is imported only by ``records_frame`` (``to_pandas()`` on
the profilers and on ``RunData``).  ``summary_html`` is the summary block
the report pages and ``Summary._repr_html_`` show; ``run_html`` is what a
notebook shows of a ``RunData``.

>>> from localsched.diagnostics.collectors.records import TaskData
>>> frame = records_frame([TaskData(('load-1', 0), None, 10.0, 10.5, 7)], TaskData)
>>> frame[['group', 'duration', 'worker_id']].values.tolist()
[['load', 0.5, 7]]
"""

from __future__ import annotations

import html

from .naming import format_seconds, groups_of, shorten

__all__ = ["records_frame", "summary_html", "run_html"]

# Records whose key gets a "group" column, and their (start, end) fields for "duration".
_TIMED = {"TaskData": ("start_time", "end_time"), "FailedTaskData": ("start_time", "end_time"),
          "InterruptedTaskData": ("start_time", "stop_time"), "ActivityData": ("start", "stop")}


def records_frame(records, record_type):
    """A DataFrame of NamedTuple ``records``, one column per field of
    ``record_type`` (so an empty list still has its columns); keyed records
    also get ``group`` (dask's ``key_split``), timed ones ``duration`` (s)."""
    import pandas as pd

    fields = list(record_type._fields)
    frame = pd.DataFrame.from_records([tuple(r) for r in records], columns=fields)
    if "key" in fields:
        frame["group"] = groups_of(frame["key"])
    timed = _TIMED.get(record_type.__name__)
    if timed:
        frame["duration"] = frame[timed[1]] - frame[timed[0]]
    return frame


_CELL = "padding:1px 10px 1px 0;white-space:nowrap"


def summary_html(summary, label_size: int = 60) -> str:
    """The summary as a small HTML block (what the pages put above the plots).

    >>> from localsched.diagnostics.collectors.records import TaskData
    >>> from localsched.diagnostics.reporting.summary import summarize
    >>> 'parallel efficiency' in summary_html(summarize([TaskData('a-1', None, 0.0, 1.0, 1)]))
    True
    """
    esc = html.escape
    head = "<b>No task finished.</b> " if summary.tasks == 0 else ""
    eff = "n/a" if summary.efficiency is None else f"{summary.efficiency:.0%}"
    facts = [
        ("wall time", format_seconds(summary.wall) + summary.spread()),
        ("tasks run", f"{summary.tasks:,}"),
        ("failed", f"{summary.failed:,}"),
        ("interrupted", f"{summary.interrupted:,}"),
        ("workers", f"{summary.workers}"),
        ("busy", format_seconds(summary.busy)),
        ("parallel efficiency", eff),
    ]
    parts = [
        '<div class="localsched-summary" style="font:13px sans-serif;max-width:100%;'
        'overflow-x:auto">',
        f"<p style='margin:4px 0'>{head}" + " &middot; ".join(
            f"{esc(name)} <b>{esc(value)}</b>" for name, value in facts) + "</p>",
    ]
    if getattr(summary, "dashboard", None):
        link = esc(summary.dashboard, quote=True)
        parts.append(f"<p style='margin:4px 0'>cluster dashboard "
                     f"<a href='{link}' target='_blank'>{link}</a></p>")
    if summary.groups:
        right = f"{_CELL};text-align:right"
        parts.append("<table style='border-collapse:collapse;font-size:12px'>"
                     f"<tr><th style='{_CELL};text-align:left'>task group</th>"
                     f"<th style='{right}'>tasks</th><th style='{right}'>total</th>"
                     f"<th style='{right}'>mean</th><th style='{right}'>share</th></tr>")
        for g in summary.groups:
            parts.append(
                f"<tr><td style='{_CELL}' title='{esc(g.name, quote=True)}'>"
                f"{esc(shorten(g.name, label_size))}</td>"
                f"<td style='{right}'>{g.count:,}</td>"
                f"<td style='{right}'>{esc(format_seconds(g.total))}</td>"
                f"<td style='{right}'>{esc(format_seconds(g.mean))}</td>"
                f"<td style='{right}'>{g.share:.0%}</td></tr>")
        parts.append("</table>")
        if summary.other_groups:
            parts.append(f"<p style='margin:2px 0'>({summary.other_groups} more groups)</p>")
    parts.append("</div>")
    return "".join(parts)


def run_html(run) -> str:
    """A ``RunData`` in a notebook: its title, summary, and how many records of each kind.

    >>> from localsched.diagnostics.collectors.records import TaskData
    >>> from localsched.diagnostics.runs.rundata import RunData
    >>> '<table' in run_html(RunData(tasks=[TaskData('a-1', None, 0.0, 1.0, 1)]))
    True
    """
    esc = html.escape
    counts = [(name, len(getattr(run, name))) for name in
              ("tasks", "failed", "interrupted", "transfers", "resources", "cache",
               "activities", "samples")]
    counts.append(("metrics", len(run.metrics)))
    rows = "".join(f"<tr><td style='{_CELL}'>{name}</td>"
                   f"<td style='{_CELL};text-align:right'>{n:,}</td></tr>"
                   for name, n in counts if n)
    title = esc(str(run.meta.get("title") or "localsched run"))
    return (f"<div><b>{title}</b>{summary_html(run.summary())}"
            f"<table style='border-collapse:collapse;font:12px sans-serif'>"
            f"<tr><th style='{_CELL};text-align:left'>records</th>"
            f"<th style='{_CELL};text-align:right'>count</th></tr>{rows}</table></div>")
