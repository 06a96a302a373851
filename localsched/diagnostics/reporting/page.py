"""The pages: ``visualize``'s stack of profilers and the performance report.

The one place where figures are put together: the summary on top, then the
task stream, resources and cache on one shared time axis (seconds since the
earliest record across all of them, one ``Range1d``, so they pan and zoom
together; task groups keep one colour across the figures), and in the
performance report the fine metrics, the flame graph and the duration
histograms below.  ``report_html`` embeds the run's JSON in the page
(``codec.DATA_ELEMENT_ID``), so ``localsched report page.html`` can render
it again.
"""

from __future__ import annotations

import html
import tempfile
import warnings

from bokeh.io import output_notebook as _output_notebook
from bokeh.io import show as _show
from bokeh.layouts import column, gridplot
from bokeh.models import Div, Label, Range1d, Span
from bokeh.resources import Resources
from bokeh.util.browser import view as _view_in_browser

from ..collectors.records import CacheData, ResourceData, TaskData
from ..figures.accounting import accounting_html, plot_accounting
from ..figures.base import LABEL_SIZE, group_colors
from ..figures.cache import draw_cache
from ..figures.durations import durations_note, plot_durations
from ..figures.flame import flame_trees, plot_flame
from ..figures.memory import mark_critical_path, plot_held
from ..figures.metrics import metrics_html, plot_metrics
from ..figures.resources import draw_resources
from ..figures.tasks import draw_tasks
from ..runs.codec import DATA_ELEMENT_ID
from ..runs.outputs import write_text
from .advice_html import comparison_html, findings_html, what_if_html
from .aggregate import CacheTable, ResourceTable, TaskTable
from .header import header_html
from .naming import shorten
from .summary import Summary, summarize
from .tables import summary_html

__all__ = ["visualize", "summary_html", "report_layout", "report_html"]


_TABLES = {TaskData: TaskTable, ResourceData: ResourceTable, CacheData: CacheTable}


def _table_of(profiler):
    kind = getattr(profiler, "record_type", None)
    if kind not in _TABLES:
        raise TypeError(
            f"cannot plot {type(profiler).__name__}: its record_type must be TaskData, "
            f"ResourceData or CacheData, not {kind!r}"
        )
    if kind is TaskData:
        return TaskTable.of(profiler.results, getattr(profiler, "failed", ()),
                         getattr(profiler, "interrupted", ()), getattr(profiler, "transfers", ()))
    return _TABLES[kind].of(profiler.results)


def visualize(profilers, filename: str = "profile.html", show: bool = True, save: bool = True,
              mode: str | None = None, palette=None, label_size: int = LABEL_SIZE,
              **figure_kwargs):
    """Stack the figures of one or more profilers on one shared time axis.

    ``profilers`` is a profiler or a list of them; each has ``.results`` (a
    list of records) and a ``record_type`` class attribute (TaskData,
    ResourceData or CacheData; a cache profiler also has ``.metric_name``, a
    task profiler may have ``failed``, ``interrupted`` and ``transfers``).
    Every figure's x is seconds since the earliest record time across *all*
    profilers (records hold epoch seconds), on one shared ``Range1d``, so the
    figures line up and pan and zoom together.  Task groups keep one colour
    across the task stream and the cache plot; legend labels are cut to
    ``label_size`` characters.  The page opens with a summary of the task
    profilers' records (:func:`localsched.diagnostics.reporting.summary.summarize`).

    ``save`` writes a standalone HTML file to ``filename`` (dask's deprecated
    ``file_path=`` still works, with a FutureWarning).  ``mode`` is the
    BokehJS resources mode: None means ``"inline"`` (the library is embedded,
    so the file works offline), ``"cdn"`` makes it smaller but needs the
    internet.  ``show`` displays the page inline when running in a Jupyter
    kernel, otherwise it opens the saved (or a temporary) file in a browser.
    Other keyword arguments go to every ``bokeh.plotting.figure`` (a
    ``title`` goes to the top one only); without ``width`` the figures
    stretch to the page's width.

    Returns, as dask does, the figure for one profiler and the grid of
    figures for several.

    >>> from types import SimpleNamespace
    >>> from localsched.diagnostics.collectors.records import TaskData, ResourceData
    >>> tasks = SimpleNamespace(record_type=TaskData,
    ...                         results=[TaskData('a-1', None, 100.0, 101.0, 1)])
    >>> res = SimpleNamespace(record_type=ResourceData,
    ...                       results=[ResourceData(99.5, 10.0, 50.0)])
    >>> layout = visualize([tasks, res], save=False, show=False)
    >>> task_fig, res_fig = [child[0] for child in layout.children]
    >>> task_fig.x_range is res_fig.x_range
    True
    >>> task_fig.select_one({'name': 'tasks'}).data_source.data['left'].tolist()
    [0.5]
    """
    if "file_path" in figure_kwargs:
        warnings.warn("The file_path keyword argument is deprecated; use filename instead",
                      FutureWarning, stacklevel=3)
        filename = figure_kwargs.pop("file_path")
    if not isinstance(profilers, (list, tuple)):
        profilers = [profilers]
    if not profilers:
        raise ValueError("visualize needs at least one profiler")
    resources = Resources(mode=mode or "inline")  # an unknown mode fails before any work
    tables = [(profiler, _table_of(profiler)) for profiler in profilers]

    bounds = [b for _, table in tables if (b := table.bounds()) is not None]
    t0 = float(min(b[0] for b in bounds)) if bounds else 0.0
    span = float(max(b[1] for b in bounds)) - t0 if bounds else 0.0
    x_range = Range1d(0.0, span if span > 0 else 1.0)
    ranking = [g for _, table in tables if isinstance(table, TaskTable)
               for g in table.group_seconds()]
    colors = group_colors(set().union(*(table.all_groups() for _, table in tables
                                   if hasattr(table, "all_groups"))), palette,
                          ranking=ranking)

    figures = []
    for i, (profiler, table) in enumerate(tables):
        kwargs = figure_kwargs
        if i and "title" in figure_kwargs:  # the caller's title names the whole stack
            kwargs = {k: v for k, v in figure_kwargs.items() if k != "title"}
        if isinstance(table, TaskTable):
            fig = draw_tasks(table, x_range, t0, colors, label_size, kwargs)
        elif isinstance(table, ResourceTable):
            fig = draw_resources(table, x_range, t0, label_size, kwargs)
        else:
            metric_name = getattr(profiler, "metric_name", "tasks")
            fig = draw_cache(table, metric_name, x_range, t0, colors, label_size, kwargs)
        if i and "title" in figure_kwargs:
            fig.title = None
        figures.append(fig)
    if len(figures) == 1:
        plot = figures[0]
    else:
        for fig in figures[:-1]:  # one time axis label, at the bottom
            fig.xaxis.axis_label = None
        stretch = figures[0].sizing_mode == "stretch_width"
        plot = gridplot([[fig] for fig in figures], merge_tools=True, toolbar_location="above",
                        **({"sizing_mode": "stretch_width"} if stretch else {}))

    page = plot
    task_tables = [(p, t) for p, t in tables if isinstance(t, TaskTable)]
    if task_tables:
        summary = _summary_of(task_tables)
        div = Div(text=summary_html(summary), sizing_mode="stretch_width")
        page = column(div, plot, sizing_mode="stretch_width")

    if save:
        _save(page, filename, resources)
    if show:
        _display(page, filename if save else None, resources)
    return plot


def _save(layout, filename: str, resources) -> None:
    """The page written whole or not at all (``outputs.write_text``; bokeh's
    own ``save`` truncates the file first)."""
    from bokeh.embed import file_html

    write_text(filename, file_html(layout, resources=resources, title="localsched profile"))


def _summary_of(task_tables: list) -> Summary:
    """One summary over the task profilers of a report."""
    results: list = []
    failed: list = []
    interrupted: list = []
    walls: list = []
    for profiler, table in task_tables:
        results += profiler.results
        failed += table.failed
        interrupted += table.interrupted
        walls += getattr(profiler, "walls", None) or []
    return summarize(results, failed, interrupted, walls=walls or None)


def _in_notebook() -> bool:
    """True inside a Jupyter kernel (not in a terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return getattr(shell, "kernel", None) is not None


def _display(layout, saved: str | None, resources) -> None:
    if _in_notebook():
        _output_notebook(resources=resources, hide_banner=True)
        _show(layout)
        return
    if saved is None:
        with tempfile.NamedTemporaryFile(prefix="localsched-profile-", suffix=".html",
                                         delete=False) as file:
            saved = file.name
        _save(layout, saved, resources)
    _view_in_browser(saved)


def _heading(text: str, note: str = "") -> Div:
    note_html = f"<p style='margin:2px 0;color:#555'>{html.escape(note)}</p>" if note else ""
    return Div(text=f"<h2 style='font:600 16px sans-serif;margin:18px 0 4px'>"
               f"{html.escape(text)}</h2>{note_html}", sizing_mode="stretch_width")


def report_layout(run, palette=None, label_size: int = LABEL_SIZE, title: str | None = None,
                  analysis: dict | None = None):
    """The performance report of a ``RunData`` as one bokeh layout: title,
    what to change first (findings, the what-if table; for runs merged side
    by side the comparison), summary, task stream (with activities and the
    critical path outlined) / resources / cache / memory held on one time
    axis, fine metrics, flame graph, task durations.  Runs merged side by
    side (``RunData.side_by_side``) are marked on the time axis.
    ``analysis``: ``run.analysis()`` if already computed."""
    if analysis is None:
        analysis = run.analysis()
    tasks = TaskTable.of(run.tasks, run.failed, run.interrupted, run.transfers, run.activities)
    resources = ResourceTable.of(run.resources)
    cache = CacheTable.of(run.cache)
    bounds = [b for table in (tasks, resources, cache) if (b := table.bounds()) is not None]
    t0 = float(min(b[0] for b in bounds)) if bounds else 0.0
    span = float(max(b[1] for b in bounds)) - t0 if bounds else 0.0
    x_range = Range1d(0.0, span if span > 0 else 1.0)
    ranking = list(tasks.group_seconds())
    colors = group_colors(tasks.all_groups() | cache.all_groups(), palette, ranking=ranking)
    stream = [
        draw_tasks(tasks, x_range, t0, colors, label_size, {}),
        draw_resources(resources, x_range, t0, label_size, {}),
        draw_cache(cache, run.cache_metric, x_range, t0, colors, label_size,
                   {"title": f"Cache by task group ({run.cache_metric})"}),
    ]
    peak = run.memory_peak()
    held = plot_held(run, peak, x_range, t0, colors, label_size)
    if held is not None:
        stream.append(held)
    cp = run.critical_path()
    if cp is not None:
        mark_critical_path(stream[0], run, cp.keys, t0, tasks.worker_rows())
    for fig in stream[:-1]:
        fig.xaxis.axis_label = None
    _mark_runs(stream, run.meta.get("runs") or [], t0)
    title = title or run.meta.get("title") or "localsched report"
    parts = [
        Div(text=f"<h1 style='font:600 20px sans-serif;margin:6px 0'>"
            f"{html.escape(str(title))}</h1>", sizing_mode="stretch_width", name="title"),
        *_header_parts(run),
        _heading("Findings: what to change", "From what was measured, most seconds first; "
                 "the critical path is outlined in black on the task stream."),
        Div(text=findings_html(analysis), sizing_mode="stretch_width", name="findings"),
        _heading("What if", "The same graph on more or fewer workers, predicted from "
                 "this run."),
        Div(text=what_if_html(analysis), sizing_mode="stretch_width", name="what-if"),
        *_comparison_parts(run),
        _heading("Summary"),
        Div(text=summary_html(run.summary()), sizing_mode="stretch_width"),
        gridplot([[f] for f in stream], merge_tools=True, toolbar_location="above",
                 sizing_mode="stretch_width"),
        _heading("Fine metrics", "Every worker-second booked once: the whole (wall time × "
                                 "workers) by activity, then seconds per task group and "
                                 "activity, summed over workers."),
    ]
    if run.metrics:
        if any(k[3] == "seconds" for k in run.metrics):
            parts.append(plot_accounting(run.metrics))
            parts.append(Div(text=accounting_html(run.metrics), sizing_mode="stretch_width"))
        parts.append(plot_metrics(run.metrics, label_size))
        other = metrics_html(run.metrics)
        if other:
            parts.append(Div(text=other, sizing_mode="stretch_width"))
    else:
        parts.append(Div(text="<p>No fine metrics were recorded.</p>"))
    parts.append(_heading("Flame graph", "Stack samples of the worker threads; pick a task "
                                         "group to see only its samples."))
    if run.samples:
        parts.append(plot_flame(flame_trees(run.samples)))
    else:
        parts.append(Div(text="<p>No stack samples were taken.</p>"))
    parts.append(_heading("Task durations", durations_note(len(ranking))))
    parts.append(plot_durations(run.tasks, palette=colors, label_size=label_size))
    return column(*parts, sizing_mode="stretch_width")


def _header_parts(run) -> list:
    """The run's header (``header.header_html``): one, or each merged run's."""
    marks = [m for m in run.meta.get("runs") or [] if isinstance(m, dict)]
    if len(marks) > 1:
        text = "".join(f"<p style='font:600 13px sans-serif;margin:6px 0 2px'>"
                       f"{html.escape(str(m.get('name', '')))}</p>"
                       f"{header_html(m.get('header'))}" for m in marks
                       if isinstance(m.get("header"), dict))
    else:
        text = header_html(run.meta.get("header"))
    return [Div(text=text, sizing_mode="stretch_width", name="header")] if text else []


def _comparison_parts(run) -> list:
    """For runs merged side by side: each compared with the first."""
    from ..analysis.comparison import compare, split_side_by_side

    parts = split_side_by_side(run)
    if not parts:
        return []
    out = [_heading("Comparison", "Each run against the first, as localsched compare "
                                  "judges them: CPU seconds per group at the same machine "
                                  "speed, and the wall time.")]
    for later in parts[1:]:
        out.append(Div(text=comparison_html(compare(parts[0], later),
                                            (parts[0].name, later.name)),
                       sizing_mode="stretch_width", name="comparison"))
    return out


def _mark_runs(figures: list, runs: list, t0: float) -> None:
    """A dashed line and the run's name where each merged run begins."""
    if len(runs) < 2:
        return
    for i, entry in enumerate(runs):
        x = float(entry["start"]) - t0
        for fig in figures:
            if i:
                fig.add_layout(Span(location=x, dimension="height", line_color="#444444",
                                    line_dash="dashed", line_width=1))
        figures[0].add_layout(Label(x=x, y=0, y_units="screen", x_offset=4, y_offset=2,
                                    text=shorten(str(entry.get("name", f"run {i + 1}")), 40),
                                    text_font_size="8pt", text_color="#444444",
                                    name="run-label"))


def report_html(run, title: str = "localsched report", mode: str | None = None,
                palette=None, label_size: int = LABEL_SIZE, analysis: dict | None = None) -> str:
    """The performance report of a ``RunData`` as one self-contained HTML page
    (bokeh embedded unless ``mode="cdn"``), the run's JSON in a ``<script
    type="application/json" id="localsched-data">`` element."""
    from bokeh.embed import file_html

    resources = Resources(mode=mode or "inline")
    if analysis is None:  # (once: the page shows it and the JSON carries it)
        analysis = run.analysis()
    page = file_html(report_layout(run, palette, label_size, title=title, analysis=analysis),
                     resources=resources, title=title)
    data = (f'<script type="application/json" id="{DATA_ELEMENT_ID}">'
            f"{run.to_json(analysis=analysis)}</script>\n")
    at = page.rindex("</body>")
    return page[:at] + data + page[at:]

