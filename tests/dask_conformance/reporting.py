"""pytest plugin: one JSON line per test event, for the harness to read.

Loaded with ``-p dask_conformance.reporting`` and active only when
``$LOCALSCHED_CONFORMANCE_REPORT`` names a file.  It records each test's start,
its outcome, the crash line of a failure and the reason of a skip, flushed
line by line, so the harness gets exact test ids and error lines even from a
run it had to kill (a test that started and never reported hung).  Under
pytest-xdist only the controller writes (it sees every worker's reports).
"""

from __future__ import annotations

import json
import os

_report = None


def _write(record: dict) -> None:
    if _report is not None:
        _report.write(json.dumps(record) + "\n")
        _report.flush()


def pytest_configure(config):
    global _report
    path = os.environ.get("LOCALSCHED_CONFORMANCE_REPORT")
    if path and not hasattr(config, "workerinput"):  # not an xdist worker
        _report = open(path, "a", encoding="utf-8")


def pytest_unconfigure(config):
    global _report
    if _report is not None:
        _report.close()
        _report = None


def pytest_collectreport(report):
    if report.failed:
        _write({"nodeid": report.nodeid, "when": "collect", "outcome": "error",
                "message": crash_line(report)})


def pytest_runtest_logstart(nodeid, location):
    _write({"nodeid": nodeid, "when": "start"})


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        record = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome}
        if report.skipped and isinstance(report.longrepr, tuple):
            record["message"] = report.longrepr[2].removeprefix("Skipped: ")
        elif report.failed:
            record["message"] = crash_line(report)
        if hasattr(report, "wasxfail"):
            record["outcome"] = "xfailed" if report.skipped else "xpassed"
            record["message"] = report.wasxfail
        _write(record)


def crash_line(report) -> str:
    """The exception line of a failure, with the file and line it was raised at."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        message = crash.message.splitlines()[0] if crash.message else ""
        return f"{message} ({os.path.basename(crash.path)}:{crash.lineno})"
    text = str(report.longrepr).strip().splitlines()
    errors = [line for line in text if line.startswith("E ")]
    return (errors or text or [""])[-1][:300]
