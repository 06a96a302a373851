"""The analysis as HTML: the findings panel, the what-if table and the
comparison table the report opens with, and the short findings list of the
dashboard's finished run.  Bokeh-free: it formats the dict of
``localsched.diagnostics.analysis.overview`` (``RunData.analysis()``).

>>> page = findings_html({"findings": [{"kind": "idle", "title": "Workers waited.",
...     "seconds": 1.5, "groups": ["load"], "fix": "compute once."}]})
>>> "Workers waited." in page and "compute once." in page
True
>>> "No finding" in findings_html({"findings": []})
True
"""

from __future__ import annotations

import html

from .naming import format_seconds, shorten

__all__ = ["findings_html", "what_if_html", "comparison_html", "findings_short_html"]

_CELL = "padding:2px 10px;border-bottom:1px solid #ddd"
_COLORS = {"overhead": "#b35806", "gil": "#8073ac", "memory": "#2166ac",
           "critical-path": "#b2182b", "transfer": "#1b7837", "idle": "#777777",
           "straggler": "#e08214", "busy": "#d6604d", "blas": "#5e3c99",
           "start-up": "#4d9221"}


def _badge(kind: str) -> str:
    color = _COLORS.get(kind, "#444")
    return (f"<span style='display:inline-block;min-width:92px;text-align:center;"
            f"background:{color};color:white;border-radius:3px;padding:1px 6px;"
            f"font:600 11px sans-serif;margin-right:8px'>{html.escape(kind)}</span>")


def findings_html(analysis: dict) -> str:
    """The findings panel: one row per finding, most seconds first."""
    esc = html.escape
    found = analysis.get("findings") or []
    parts = ["<div class='localsched-findings' style='font:13px sans-serif'>"]
    if not found:
        parts.append("<p style='margin:4px 0'>No finding: nothing measured here points at "
                     "a cause of lost time or memory.</p></div>")
        return "".join(parts)
    for f in found:
        groups = ", ".join(shorten(str(g), 40) for g in f.get("groups") or [])
        at_stake = format_seconds(float(f.get("seconds") or 0.0))
        parts.append(
            "<div style='margin:6px 0;padding:6px 8px;border-left:3px solid "
            f"{_COLORS.get(f.get('kind'), '#444')};background:#fafafa'>"
            f"<div>{_badge(str(f.get('kind')))}<b>{esc(str(f.get('title', '')))}</b></div>"
            f"<div style='margin:3px 0 0 100px;color:#222'>&rarr; {esc(str(f.get('fix', '')))}"
            "</div><div style='margin:2px 0 0 100px;color:#777;font-size:12px'>"
            f"{esc(at_stake)} at stake" + (f" &middot; groups: {esc(groups)}" if groups else "")
            + "</div></div>")
    parts.append("</div>")
    return "".join(parts)


def what_if_html(analysis: dict) -> str:
    """The what-if table: predicted wall time on 1, 2, 4, 8, 16 workers and
    the critical-path floor (or why there is none)."""
    esc = html.escape
    whatif = analysis.get("what_if")
    if not whatif:
        return ("<p style='font:13px sans-serif;margin:4px 0'>No what-if: this run's task "
                "dependencies were not recorded (a run saved by an older localsched).</p>")
    recorded = whatif.get("recorded") or {}
    workers = recorded.get("workers")
    right = f"{_CELL};text-align:right"
    head = "".join(f"<th style='{right}'>{esc(str(n))}</th>" for n in whatif["workers"])
    cells = "".join(f"<td style='{right}'>{esc(format_seconds(float(s)))}</td>"
                    for s in whatif["workers"].values())
    floor = format_seconds(float(whatif.get("floor") or 0.0))
    note = (f"Recorded on {workers} worker{'s' if workers != 1 else ''} in "
            f"{format_seconds(float(recorded.get('seconds') or 0.0))}; "
            if workers else "")
    return ("<div style='font:13px sans-serif'>"
            "<table style='border-collapse:collapse;font-size:12px'>"
            f"<tr><th style='{_CELL};text-align:left'>workers</th>{head}"
            f"<th style='{right}'>critical-path floor</th></tr>"
            f"<tr><td style='{_CELL}'>predicted wall time</td>{cells}"
            f"<td style='{right}'><b>{esc(floor)}</b></td></tr></table>"
            f"<p style='margin:3px 0;color:#555;font-size:12px'>{esc(note)}the measured "
            f"durations replayed with localsched's own scheduling and "
            f"{esc(format_seconds(float(whatif.get('overhead') or 0.0)))} of measured "
            "overhead per task; work that slows itself down when run side by side (the "
            "GIL, fewer cores than workers) will not speed up as much.</p></div>")


#: How a comparison row's mark looks on the page.
_MARKS = {"REGRESSION": "<b style='color:#b2182b'>REGRESSION</b>",
          "inconclusive": "<b style='color:#b35806'>inconclusive</b>"}


def comparison_html(comparison, names: tuple) -> str:
    """A ``Comparison`` (``analysis.comparison``) as a table: the rows,
    measures, machine speeds and verdict ``localsched compare`` prints."""
    esc = html.escape
    right = f"{_CELL};text-align:right"
    a, b = (shorten(str(n), 30) for n in names)
    head, *rows = comparison.cells((a, b))
    header = "".join(f"<th style='{_CELL if i == 0 else right}'>{esc(c)}</th>"
                     for i, c in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f"<td style='{_CELL if i in (0, len(row) - 1) else right}'>"
                         + (_MARKS.get(c) or esc(shorten(c, 40) if i == 0 else c)) + "</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    note = comparison.machine_note((a, b))
    note = f"<p style='margin:3px 0;color:#555;font-size:12px'>{esc(note)}</p>" if note else ""
    return ("<div style='font:13px sans-serif'><p style='margin:4px 0'>"
            f"<b>{esc(b)}</b> compared with <b>{esc(a)}</b>: "
            f"{esc(comparison.verdict())}</p>"
            f"<table style='border-collapse:collapse;font-size:12px'><tr>{header}</tr>"
            f"{body}</table>{note}</div>")


def findings_short_html(found: list, limit: int = 5) -> str:
    """The dashboard's short list: a badge and the title of each finding."""
    if not found:
        return "<div class='ls-findings' style='font:13px sans-serif'>No finding.</div>"
    items = "".join(f"<li style='margin:2px 0'>{_badge(str(f.get('kind')))}"
                    f"{html.escape(str(f.get('title', '')))}</li>" for f in found[:limit])
    more = (f"<li style='color:#777'>{len(found) - limit} more in the report</li>"
            if len(found) > limit else "")
    return ("<div class='ls-findings' style='font:13px sans-serif'><b>Findings</b>"
            f"<ul style='list-style:none;padding-left:0;margin:4px 0'>{items}{more}</ul></div>")
