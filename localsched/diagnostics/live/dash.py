"""``Dashboard``: the Callback users hold; it records through a Recorder and
serves the pages from a BackgroundServer until ``close()``."""

from __future__ import annotations

import html
import logging
import os
import socket
import sys
import threading
import time
import weakref
from typing import Any

from ... import callbacks as callbacks_module
from ...callbacks import Callback, Needs, active_callbacks
from ...system import settings
from ...system.forking import at_fork_in_child, renew_in_child
from .feed import Feed
from .pages import COMPONENTS, applications
from .recorder import DEFAULT_HISTORY, Recorder
from .routes import routes
from .server import BackgroundServer, parse_address

__all__ = ["Dashboard", "dashboard", "from_environment", "ENV_VAR"]

logger = logging.getLogger(__name__)

#: ``LOCALSCHED_DASHBOARD=1`` (or an address) turns the shared dashboard on
#: at ``import localsched``; so does dask's config key ``localsched.dashboard``
#: (``dask.config.set``, a dask YAML file, or ``DASK_LOCALSCHED__DASHBOARD``),
#: read only if dask is imported before localsched (dask stays optional).
ENV_VAR = "LOCALSCHED_DASHBOARD"
CONFIG_KEY = "localsched.dashboard"
DASK_ENV_VAR = "DASK_LOCALSCHED__DASHBOARD"
#: A template for the link, e.g. ``{JUPYTERHUB_SERVICE_PREFIX}proxy/{port}/status``
#: behind JupyterHub's proxy; fields: ``host``, ``port`` and the environment.
LINK_ENV_VAR = "LOCALSCHED_DASHBOARD_LINK"
#: Set by the process whose switch started the shared dashboard, to its pid:
#: the processes it starts (workers of every start method, multiprocessing
#: and dask children, subprocesses) inherit the switch with it, and never
#: start a dashboard of their own.
OWNER_ENV_VAR = "LOCALSCHED_DASHBOARD_OWNER"


class Dashboard(Callback):
    """A live view of running computations, served on ``address``.

    The page (``dash.link``, printed once) shows the current or last
    computation: a summary with the ETA, progress per task group, the task
    stream, CPU and memory, bytes held per group (``memory=True``), fine
    metrics and a flame graph (from ``FineMetrics`` / ``SampleProfiler``
    active beside it), and a button writing the performance report so far.
    It records while registered (``with``, ``register()``, ``callbacks=``)
    and serves from its own thread until ``close()`` or interpreter exit.

    Parameters
    ----------
    address : str
        ``"host:port"``; port 0 picks a free one; a busy fixed port falls
        back to a free one, with a warning.  The default binds 127.0.0.1
        only: the page shows task keys and has no authentication.
    interval : float
        Seconds between refreshes of the fast components (slower ones, such
        as resources and the flame graph, have their own rates).
    task_stream_length : int
        Rectangles the task stream keeps in the browser.
    memory : bool
        Measure each result's size, for bytes held per group (the results
        then travel back from worker processes; off by default).
    report_path : str
        Where the report button writes.
    diagnostics : iterable
        FineMetrics / SampleProfiler objects to read beside those registered.
    quiet : bool
        Do not print the link.
    allowed_hosts : iterable of str
        Host names the page may be reached by besides its own address (a
        reverse proxy's public name); any other ``Host`` gets 403 on every
        route and the websocket (DNS rebinding: see ``live/hosts.py``;
        also ``LOCALSCHED_DASHBOARD_ALLOWED_HOSTS``, comma-separated).
    history : int
        Task records kept of past computations (the latest is always kept
        whole): older computations are forgotten, oldest first, once the
        records kept pass this bound, or past ``history // 100`` computations
        (at least 10): a dashboard left up keeps bounded memory.
    """

    def __init__(self, address: str = "127.0.0.1:0", *, interval: float = 0.1,
                 task_stream_length: int = 2000, memory: bool = False,
                 report_path: str = "localsched-dashboard-report.html",
                 diagnostics=(), quiet: bool = False, allowed_hosts=(),
                 history: int = DEFAULT_HISTORY):
        super().__init__()
        self._server: BackgroundServer | None = None
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or \
                not interval > 0:
            raise ValueError(f"Dashboard interval must be a positive number of seconds, "
                             f"got {interval!r}")
        if isinstance(task_stream_length, bool) or not isinstance(task_stream_length, int) \
                or task_stream_length < 1:
            raise ValueError(f"Dashboard task_stream_length must be a positive int, "
                             f"got {task_stream_length!r}")
        host, port = parse_address(address)
        self.interval = float(interval)
        self.task_stream_length = task_stream_length
        self.report_path = report_path
        self._extra = list(diagnostics)
        #: The open pages' last updates (``pages._schedule``), and what the
        #: pages say once the dashboard has ended (``close``, interpreter exit).
        self.page_finals: dict = {}
        self._end: dict = {"note": None}
        # Without sizes the run's own task records are read (no hook per
        # task); with them a posttask measures each result (results then
        # travel back from worker processes only when their sizes are measured).
        self.needs = Needs(results=bool(memory), records=not memory)
        self.recorder = Recorder(measure_memory=bool(memory), history=history)
        self._install_hooks()
        self.feed = Feed(self.recorder, self.interval)
        renew_in_child(self)
        self._server = BackgroundServer(
            applications(self.feed, self), routes(self), host, port,
            allowed_hosts=allowed_hosts)
        self.host, self.port = host, self._server.port
        # (at interpreter exit, as at close(): the open pages first show how
        # things ended -- never "running" in a tab left open)
        self._finalizer = weakref.finalize(self, _end_pages, self._server, self.page_finals,
                                           self._end, EXITED, self.feed)
        self._printed = not quiet
        if not quiet:
            print(f"localsched dashboard: {self.link}", flush=True)

    # -- the hooks (scheduler thread) ------------------------------------------------

    def _install_hooks(self) -> None:
        """The recorder's own methods are the hooks (no frame of ours per task)."""
        r = self.recorder
        self._start = r.start
        self._start_state = r.start_state
        if r.measure_memory:
            self._posttask = r.posttask_hook
        self._finish = r.finish

    def _after_fork_in_child(self) -> None:
        # The server is the parent's (its sockets close in the child: see
        # BackgroundServer); a computation the child runs is recorded
        # unseen, with a lock the server's thread cannot hold.
        self.feed.lock = threading.RLock()

    @property
    def _dask_callback(self) -> tuple:
        r = self.recorder
        return (r.start, r.start_state, r.dask_pretask, r.dask_posttask, r.finish)

    # -- the server --------------------------------------------------------------------

    @property
    def link(self) -> str:
        """The URL of the ``/status`` page."""
        template = settings.text(LINK_ENV_VAR)
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        if template:
            return template.format(**{**os.environ, "host": host, "port": self.port})
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/status"

    @property
    def running(self) -> bool:
        """Whether the page is served."""
        return self._server is not None and self._server.running

    @property
    def ended(self) -> str | None:
        """What the pages say under the strip once the dashboard ended."""
        return self._end["note"]

    def close(self, ended: str | None = None) -> None:
        """Stop recording and serving; the port is free when this returns.
        Open pages first get their last update: the run's last numbers and
        ``ended`` (default: the dashboard closed), so a tab left open shows
        how things ended, not a frozen "running"."""
        self.unregister()
        server, self._server = self._server, None
        if server is not None:
            self._finalizer.detach()
            _end_pages(server, self.page_finals, self._end, ended or CLOSED, self.feed)
        self.feed.findings.close()

    @property
    def recording(self) -> bool:
        """Whether computations are recorded now (registered, or in a
        ``with`` block); ``callbacks=[dash]`` records only its call."""
        return self._callback in callbacks_module._global_active

    def sessions(self) -> int:
        """Browser sessions (tabs, and GETs not yet reaped) alive now."""
        return self._server.sessions() if self._server is not None else 0

    def connections(self) -> int:
        """Websocket connections (open tabs) now."""
        return self._server.connections() if self._server is not None else 0

    # -- what the pages read -------------------------------------------------------------

    def diagnostics(self, kind: str) -> list:
        """The registered callbacks (and those given) of class ``kind``."""
        found: list = []
        for hooks in active_callbacks():
            for f in hooks:
                owner = getattr(f, "__self__", None)
                if owner is not None:
                    if type(owner).__name__ == kind and owner not in found:
                        found.append(owner)
                    break
        for d in self._extra:
            if type(d).__name__ == kind and d not in found:
                found.append(d)
        return found

    def individual_plots(self) -> dict:
        """``{"Individual <Title>": "/individual-<name>"}`` (dask-labextension's shape)."""
        return {f"Individual {cls.title}": f"/individual-{cls.name}" for cls in COMPONENTS}

    def run_data(self):
        """A RunData of what was recorded so far: tasks, failures, resources,
        and the records of the FineMetrics / SampleProfiler / CacheProfiler /
        ResourceProfiler active beside the Dashboard."""
        from ..collectors.records import ResourceData
        from ..runs.rundata import RunData
        from .findings import run_data

        data = RunData(meta={"title": "localsched dashboard"})
        for log in list(self.recorder.runs):  # (what the dashboard's findings read)
            data.merge(run_data(log, now=self.feed.clock()))
        with self.feed.lock:
            data.resources = [ResourceData(t, mem / 1e6, cpu) for t, cpu, mem
                              in self.feed.resources]
        others = [d for kind in ("FineMetrics", "SampleProfiler", "CacheProfiler",
                                 "ResourceProfiler") for d in self.diagnostics(kind)]
        if others:
            extra = RunData.from_profilers(others)
            if extra.resources:
                data.resources = []
            data.merge(extra)
        return data

    def write_report(self, path: str | None = None) -> str:
        """Write the static performance report of what was recorded so far;
        returns its absolute path."""
        path = os.path.abspath(path or self.report_path)
        self.run_data().to_html(path, title="localsched dashboard: report so far")
        return path

    def _repr_html_(self) -> str:
        """A notebook shows the page in a frame as wide as the cell; the link
        once (the printed line has it, unless ``quiet``: then here)."""
        link = html.escape(self.link)
        if not self.running:
            return f"<p>localsched dashboard (closed): {link}</p>"
        shown = "open in a new tab" if self._printed else link
        return (f"<p>localsched dashboard: <a href='{link}' target='_blank'>{shown}</a></p>"
                f"<iframe src='{link}' style='width:100%;height:900px;"
                f"border:1px solid #ddd;box-sizing:border-box'></iframe>")

    def __repr__(self) -> str:
        if getattr(self, "port", None) is None:
            return "<Dashboard: starting>"
        state = "serving" if self.running else "closed"
        return f"<Dashboard {self.link}: {state}>"


#: What an ended dashboard's pages say (``Dashboard.close``'s default; at exit).
CLOSED = "the dashboard was closed: this page no longer updates"
EXITED = "the program ended: this page no longer updates"
#: Seconds the end waits at most for the open pages' last update to be written.
END_TIMEOUT = 10.0


def _end_pages(server, finals: dict, end: dict, note: str, feed: Feed | None = None) -> None:
    """Give each open page its last update (``note`` under the strip, and
    the last run's findings, not a "computing" no update would replace),
    wait until written (END_TIMEOUT in all at most: a stalled tab or a long
    analysis never holds the exit), then stop the server."""
    end["note"] = note
    written: list = []
    deadline = time.monotonic() + END_TIMEOUT
    if getattr(server, "_thread", None) is threading.current_thread():
        finals = {}  # (closed from a page's own callback: no waiting on itself)
    if feed is not None and finals and feed.recorder.runs:  # (only for a page to show them)
        last = feed.recorder.runs[-1]
        if last.finished:
            feed.findings.wait(last, timeout=max(0.0, deadline - time.monotonic()))

    def queue_all() -> None:
        for final in list(finals.values()):
            try:
                written.append(final())
            except Exception:  # noqa: BLE001 -- (a page going away meanwhile)
                logger.exception("localsched dashboard: a page's last update failed")

    try:
        server.call(queue_all, timeout=max(0.1, deadline - time.monotonic()))
    except Exception:  # noqa: BLE001 -- (the server stopped already)
        pass
    for event in written:
        event.wait(max(0.0, deadline - time.monotonic()))
    server.stop()
_shared: Dashboard | None = None
_shared_lock = threading.Lock()


@at_fork_in_child
def _forget_shared_in_child() -> None:
    # (the shared dashboard serves from its parent; ``dashboard()`` here
    # would start one of the child's own)
    global _shared, _shared_lock
    _shared = None
    _shared_lock = threading.Lock()


def dashboard(address: str = "127.0.0.1:0", **kwargs: Any) -> Dashboard:
    """The shared Dashboard, started and registered on first call (for
    notebooks: the cell that calls it shows the page)."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            _shared = Dashboard(address, **kwargs)
            _shared.register()
        return _shared


def _setting() -> tuple:
    """``(where, value)`` of the first switch set: the environment
    variables, then dask's config key if dask is imported."""
    for name in (ENV_VAR, DASK_ENV_VAR):
        value = settings.text(name)
        if value:
            return name, value
    config = sys.modules.get("dask.config")
    value = config.get(CONFIG_KEY, None) if config is not None else None
    return f"dask config {CONFIG_KEY}", value


def from_environment() -> Dashboard | None:
    """Start the shared dashboard if ``LOCALSCHED_DASHBOARD``, or dask's
    config key ``localsched.dashboard`` (also ``DASK_LOCALSCHED__DASHBOARD``),
    asks for it: ``1``/``true`` for the default address, or an address such
    as ``127.0.0.1:8790``.  Only in the process that set it, never in the
    processes started from there (``OWNER_ENV_VAR``)."""
    where, value = _setting()
    text = str(value if value is not None else "").strip()
    if text.lower() in ("", "0", "false", "no", "off", "none"):
        return None
    owner = os.environ.get(OWNER_ENV_VAR)
    if owner and owner != str(os.getpid()):
        return None  # a worker (or child) of the process that serves it
    os.environ[OWNER_ENV_VAR] = str(os.getpid())
    address = "127.0.0.1:0" if text.lower() in ("1", "true", "yes", "on") else text
    try:
        return dashboard(address)
    except Exception as exc:  # noqa: BLE001 -- never break `import localsched`
        print(f"localsched: {where}={value!r}: dashboard not started: {exc}",
              file=sys.stderr)
        return None
