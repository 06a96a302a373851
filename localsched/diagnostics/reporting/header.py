"""The report's header: when a run was recorded, with what, on what, how
loaded the machine was, and which script -- what distributed's performance
report opens with, kept in the run's JSON (``meta["header"]``) and shown at
the top of the report page (``header_html``).

The load comes from ``machine_load.LoadMeter`` (the run's ``meta["load"]``,
which the ``busy`` finding reads too), shown as cores: ``others_cores`` is
how many cores other processes kept busy on average (the machine's busy
CPU seconds less this process's and its workers', and less the
hypervisor's steal, which is no process's) -- what ``compare`` reads to
tell a slow run from a busy machine.  BLAS threads are
``machine_load.blas_threads()`` (``meta["blas"]``) with the environment's
thread variables.  ``run_header`` gathers the rest once, at the end of a
run: versions (read from modules already imported, else from the installed
metadata: nothing is imported for it), cores, the scheduler, the script's
name and source (up to ``SOURCE_LIMIT`` characters).  Every field may be
missing (an older file has no header at all): readers use ``.get``.

>>> h = run_header(started=0.0, finished=1.0, scheduler="threads")
>>> h["scheduler"], h["cores"] == __import__("os").cpu_count(), "python" in h["versions"]
('threads', True, True)
>>> "threads" in header_html(h)
True
"""

from __future__ import annotations

import datetime
import html
import os
import platform
import sys

from ...system.blas import VARIABLES

__all__ = ["run_header", "header_html", "SOURCE_LIMIT"]

#: Characters of the script's source the header keeps.
SOURCE_LIMIT = 20_000
#: The environment variables that set BLAS/OpenMP threads.
THREAD_VARIABLES = VARIABLES


def _cores(load: dict | None) -> dict:
    """The load of a run as the header shows it: ``machine_load.LoadMeter``'s
    CPU seconds over its seconds, as ``{"others_cores", "own_cores",
    "cores", "loadavg"}`` (None where it was not measured)."""
    out: dict = {"others_cores": None, "own_cores": None, "cores": os.cpu_count(),
                 "loadavg": _loadavg()}
    load = _dict(load)
    numbers = [load.get(k) for k in ("seconds", "machine_cpu", "own_cpu")]
    if not all(isinstance(v, (int, float)) for v in numbers):
        return out
    seconds, machine, own = (float(v) for v in numbers)  # type: ignore[arg-type]
    # (the hypervisor's steal is in the machine's busy seconds and is no
    # process's: as ``analysis.causes`` reads the load, it is left out)
    steal = load.get("steal")
    steal = float(steal) if isinstance(steal, (int, float)) and steal > 0 else 0.0
    if seconds > 0:
        out["own_cores"] = round(own / seconds, 3)
        out["others_cores"] = round(max(machine - own - steal, 0.0) / seconds, 3)
    return out


def _loadavg() -> list | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # (Windows)
        return None


def _version(name: str) -> str | None:
    module = sys.modules.get(name)
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _script(path: str | None, code: str | None = None) -> dict | None:
    if code is not None:
        return {"name": "-c", "source": code[:SOURCE_LIMIT]}
    if not path:
        return None
    out: dict = {"name": os.path.basename(path), "path": os.path.abspath(path),
                 "source": None}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            out["source"] = f.read(SOURCE_LIMIT + 1)[:SOURCE_LIMIT]
    except OSError:
        pass
    return out


def run_header(*, started: float | None, finished: float | None,
               scheduler: str | None = None, load: dict | None = None,
               blas: dict | None = None,
               script: str | None = None, code: str | None = None,
               name: str | None = None, status: int | None = None) -> dict:
    """The header of a run (module docstring); ``script``: its path (its
    source is read), ``code``: ``-c``'s text, ``name``: a ``-m`` module's;
    ``status``: the script's exit status (``localsched profile``)."""
    when = None if started is None else datetime.datetime.fromtimestamp(
        started, datetime.timezone.utc).isoformat(timespec="seconds")
    info = _script(script, code)
    if info is None and name:
        info = {"name": name, "source": None}
    return {
        "date": when,
        "seconds": None if started is None or finished is None else finished - started,
        "versions": {"python": platform.python_version(), "localsched": _version("localsched"),
                     "dask": _version("dask"), "numpy": _version("numpy")},
        "platform": platform.platform(terse=True),
        "cores": os.cpu_count(),
        "blas_threads": _blas_threads(blas),
        "scheduler": scheduler,
        "load": _cores(load),
        "script": info,
        "status": status,
    }


def _blas_threads(blas: dict | None) -> dict:
    """BLAS's threads with the thread variables set: those recorded with the
    run (``meta["blas"]["environment"]``), else the environment's now."""
    found = dict(_dict(blas))
    env = found.pop("environment", None)
    if not isinstance(env, dict):
        env = {k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ}
    return {**found, "env": env}


def _threads_text(blas: dict) -> str:
    threads, libraries = blas.get("threads"), blas.get("libraries")
    parts = [f"{threads} per call ({blas.get('source')}"
             + (f": {', '.join(map(str, libraries))}" if isinstance(libraries, list)
                and libraries else "") + ")"] if threads is not None else []
    parts += [f"{k}={v}" for k, v in _dict(blas.get("env")).items()]
    return ", ".join(parts) if parts else "not set"


def _load_text(load) -> str:
    load = _dict(load)
    others, own = load.get("others_cores"), load.get("own_cores")
    if not isinstance(others, (int, float)) or not isinstance(own, (int, float)):
        return "not measured"
    text = f"this run {own:.1f} cores, other processes {others:.1f} cores"
    avg = load.get("loadavg")
    if isinstance(avg, list) and avg:
        text += f" (load average {avg[0]})"
    if others > 0.5:
        text += ": the machine was busy"
    return text


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def header_html(header: dict | None) -> str:
    """The header as the report page's first block ('' without one; what a
    saved file holds there is shown as text, whatever its shape)."""
    if not isinstance(header, dict):
        return ""
    esc = html.escape
    versions = _dict(header.get("versions"))
    cells = [
        ("date", str(header.get("date") or "?")),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v) or "?"),
        ("cores", str(header.get("cores") or "?")),
        ("BLAS threads", _threads_text(_dict(header.get("blas_threads")))),
        ("scheduler", str(header.get("scheduler") or "?")),
        ("load during the run", _load_text(header.get("load"))),
    ]
    script = _dict(header.get("script"))
    if script.get("name"):
        status = header.get("status")
        cells.append(("script", str(script["name"]) + (
            f" (exited with status {status})" if status else "")))
    rows = "".join(f"<tr><td style='color:#666;padding:1px 12px 1px 0'>{esc(k)}</td>"
                   f"<td style='padding:1px 0'>{esc(v)}</td></tr>" for k, v in cells)
    source = script.get("source")
    code = ("<details style='margin-top:4px'><summary>the script's source</summary>"
            f"<pre style='font-size:11px;max-height:400px;overflow:auto'>{esc(str(source))}</pre>"
            "</details>") if source else ""
    return ("<div class='ls-header' style='font:13px sans-serif'>"
            f"<table style='border-collapse:collapse'>{rows}</table>{code}</div>")
