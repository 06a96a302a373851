"""Plain HTTP routes beside the Bokeh pages: none of them creates a Bokeh session.

``/json/progress.json``  counts of the current or last computation (probes, scripts)
``/metrics``             Prometheus text exposition format, written here (no
                         ``prometheus_client`` needed)
``/individual-plots.json``  title -> path of each single-component page, the
                         shape dask-labextension reads
``/report.html``         the static performance report of what was recorded so far
``/``                    redirects to ``/status``
"""

from __future__ import annotations

import json
import os
import tempfile

from tornado.web import RedirectHandler, RequestHandler

from ..reporting.naming import printable

__all__ = ["routes", "prometheus_text"]


def _label(value) -> str:
    return printable(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(feed) -> str:
    """The ``/metrics`` page for ``feed`` (updated first)."""
    feed.update(force=True)
    feed.sample_resources()
    p = feed.progress()
    with feed.lock:
        completed, failed, runs = feed.completed_total, feed.failed_total, feed.runs_total
        seconds = dict(feed.compute_seconds)
        cpu, mem = feed.resources[-1][1:] if feed.resources else (0.0, 0.0)
    waiting = max(p["total"] - p["done"] - p["running"] - p["erred"], 0)
    if p["status"] != "running":
        waiting = 0
    lines = [
        "# HELP localsched_tasks_completed_total Tasks completed since the dashboard started.",
        "# TYPE localsched_tasks_completed_total counter",
        f"localsched_tasks_completed_total {completed}",
        "# HELP localsched_tasks_failed_total Tasks that raised since the dashboard started.",
        "# TYPE localsched_tasks_failed_total counter",
        f"localsched_tasks_failed_total {failed}",
        "# HELP localsched_computations_total Computations finished since the dashboard "
        "started.",
        "# TYPE localsched_computations_total counter",
        f"localsched_computations_total {runs}",
        "# HELP localsched_tasks Tasks of the current (or last) computation by state.",
        "# TYPE localsched_tasks gauge",
        f'localsched_tasks{{state="done"}} {p["done"]}',
        f'localsched_tasks{{state="running"}} {p["running"]}',
        f'localsched_tasks{{state="erred"}} {p["erred"]}',
        f'localsched_tasks{{state="waiting"}} {waiting}',
        "# HELP localsched_task_compute_seconds_total Seconds spent in tasks, by task group.",
        "# TYPE localsched_task_compute_seconds_total counter",
    ]
    lines += [f'localsched_task_compute_seconds_total{{group="{_label(g)}"}} {s:.6f}'
              for g, s in sorted(seconds.items())]
    lines += [
        "# HELP localsched_process_cpu_percent CPU percent of this process and its workers "
        "(100 = one core).",
        "# TYPE localsched_process_cpu_percent gauge",
        f"localsched_process_cpu_percent {cpu:.1f}",
        "# HELP localsched_process_memory_bytes Resident memory of this process and its "
        "workers.",
        "# TYPE localsched_process_memory_bytes gauge",
        f"localsched_process_memory_bytes {int(mem)}",
    ]
    return "\n".join(lines) + "\n"


class _FeedHandler(RequestHandler):
    def initialize(self, dashboard) -> None:
        self.dashboard = dashboard

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")


class ProgressJSON(_FeedHandler):
    def get(self) -> None:
        feed = self.dashboard.feed
        feed.update(force=True)
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(feed.progress()))


class Metrics(_FeedHandler):
    def get(self) -> None:
        self.set_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.write(prometheus_text(self.dashboard.feed))


class IndividualPlots(_FeedHandler):
    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(self.dashboard.individual_plots()))


class Report(_FeedHandler):
    def get(self) -> None:
        fd, path = tempfile.mkstemp(suffix=".html", prefix="localsched-dashboard-")
        os.close(fd)
        try:
            self.dashboard.write_report(path)
            with open(path, "rb") as f:
                body = f.read()
        finally:
            os.unlink(path)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.write(body)


def routes(dashboard) -> list:
    """The extra tornado routes of ``dashboard``'s server."""
    args = {"dashboard": dashboard}
    return [
        (r"/json/progress\.json", ProgressJSON, args),
        (r"/metrics", Metrics, args),
        (r"/individual-plots\.json", IndividualPlots, args),
        (r"/report\.html", Report, args),
        (r"/", RedirectHandler, {"url": "status"}),
    ]
