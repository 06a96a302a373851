"""Open a local HTML file in real headless Chromium and report its JavaScript errors.

Used by tests that must prove a generated page actually works in a browser,
not only that the HTML text looks right::

    result = open_in_chromium(path, wait_for="document.querySelector('canvas')")
    assert result.errors == []

How errors are caught
---------------------
Chromium is driven over the DevTools protocol on ``--remote-debugging-pipe``
(file descriptors 3 and 4 of the browser, NUL-terminated JSON messages), so no
port, no websocket library and no polling of log files is needed.  The
``Runtime`` and ``Log`` domains are enabled *before* the page is navigated, so
every error of the page's life reaches us as an event:

* ``Runtime.exceptionThrown`` -- an uncaught exception, in a ``<script>``, a
  timer or an event handler, and unhandled promise rejections;
* ``Runtime.consoleAPICalled`` with type ``error`` or ``assert`` -- what
  libraries (BokehJS among them) print with ``console.error``;
* ``Log.entryAdded`` with level ``error`` -- what the browser itself reports,
  e.g. a script or stylesheet that failed to load.

Scraping ``--enable-logging=stderr`` output was the alternative; it depends on
the log format of the Chromium version and misses nothing only by luck.

After the load event, the page is given until its ``wait_for`` condition holds
(checked every animation frame inside the page, so there is no sleep here),
then two more animation frames and a macrotask so that errors thrown by work
scheduled during the load are delivered before we read the DOM.

Processes
---------
Chromium runs with a fresh temporary profile under a tiny supervisor process
(a child subreaper, in its own session) that inherits every helper process
Chromium leaves behind, kills and reaps them all once Chromium has exited,
and is itself told to do so (SIGTERM) on a timeout or error.  Chromium is
first asked to close over the protocol.  The profile directory is removed.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BrowserResult", "BrowserError", "find_chromium", "require_chromium", "open_in_chromium"]

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests may run as root, where the sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-crash-reporter",
    "--disable-dev-shm-usage",  # /dev/shm is small in containers
    "--allow-file-access-from-files",
)

# Serialise the document *including open shadow roots*: BokehJS 3 renders its
# views (and their <canvas>) inside shadow DOM, which outerHTML leaves out.
_SERIALIZE_DOM = r"""
(() => {
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const attr = (s) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
  const out = [];
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) { out.push(esc(node.data)); return; }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const tag = node.localName;
    out.push('<' + tag);
    for (const a of node.attributes) out.push(' ' + a.name + '="' + attr(a.value) + '"');
    out.push('>');
    if (node.shadowRoot) {
      out.push('<template shadowrootmode="open">');
      for (const c of node.shadowRoot.childNodes) walk(c);
      out.push('</template>');
    }
    const kids = tag === 'template' ? node.content.childNodes : node.childNodes;
    for (const c of kids) walk(c);
    out.push('</' + tag + '>');
  };
  walk(document.documentElement);
  return '<!DOCTYPE html>' + out.join('');
})()
"""

# Resolve once `cond` is truthy (checked each animation frame) or `ms` elapse.
_WAIT_FOR = r"""
new Promise((resolve) => {
  const deadline = performance.now() + %(ms)d;
  const check = () => {
    let ok = false;
    try { ok = Boolean(%(cond)s); } catch (e) { ok = false; }
    if (ok) resolve(true);
    else if (performance.now() > deadline) resolve(false);
    else requestAnimationFrame(check);
  };
  check();
})
"""

# Two frames and a macrotask: lets work scheduled during load run (and throw).
_SETTLE = r"""
new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(
  () => setTimeout(() => resolve(true), 0))))
"""


class BrowserError(RuntimeError):
    """Chromium could not be driven (failed to start, died, or timed out).

    ``pid`` is the supervisor's (and its session's) id, once it was started.
    """

    pid: int | None = None


@dataclass
class BrowserResult:
    """What the page looked like and what went wrong while it ran.

    ``dom`` is the serialised document after its scripts ran (shadow roots
    included, as ``<template shadowrootmode="open">``); ``errors`` holds one
    human-readable line per JavaScript exception, ``console.error`` call or
    browser error log entry; ``ready`` is False if ``wait_for`` never held;
    ``value`` is what the ``evaluate`` expression returned; ``pid`` is the
    supervisor's, which is also the id of the session all of it ran in.
    """

    dom: str
    errors: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    ready: bool = True
    value: object = None
    pid: int | None = None


#: Why the browser tests skip off Linux: the driver's supervisor needs
#: Linux's child subreaper (prctl) and passes the protocol pipes by number.
NOT_HERE = "the headless-browser driver (tests/support/browser.py) runs on Linux only"


def find_chromium() -> str | None:
    """The Chromium executable: ``$CHROMIUM`` if set, else the first found on PATH."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return shutil.which(explicit)
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def in_ci() -> bool:
    """True when ``$CI`` says so (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_chromium() -> str:
    """Chromium's path for a test that needs it.

    Without Chromium the calling test is skipped -- except in CI, where a
    missing browser must not turn the browser tests silently green: there it fails.
    """
    import pytest

    try:  # (the repository root on sys.path, or tests/ itself)
        from tests.support.platform_marks import BROWSER_DRIVER
    except ImportError:
        from tests.support.platform_marks import BROWSER_DRIVER  # type: ignore[no-redef]

    if not BROWSER_DRIVER:
        pytest.skip(NOT_HERE)
    executable = find_chromium()
    if executable is not None:
        return executable
    if in_ci():
        pytest.fail("Chromium not found, and $CI is set: install chromium or set $CHROMIUM")
    pytest.skip("Chromium not found (install chromium or set $CHROMIUM)")


class _Pipe:
    """The DevTools protocol over a pair of pipes: commands, replies and events."""

    def __init__(self, write_fd: int, read_fd: int, proc: subprocess.Popen, deadline: float):
        self._write_fd = write_fd
        self._read_fd = read_fd
        self._proc = proc
        self._deadline = deadline
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def _read_message(self) -> dict:
        while b"\0" not in self._buffer:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._read_fd, 1 << 16)
            if not chunk:
                raise BrowserError(f"Chromium closed the pipe (exit code {self._proc.poll()})")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and return its result; events seen meanwhile are kept."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._write_fd, data) :]
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method} failed: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str, session: str) -> dict:
        """Return the first event ``method`` of ``session``, read or already seen."""
        for event in self.events:
            if event["method"] == method and event.get("sessionId") == session:
                return event
        while True:
            event = self._read_message()
            if "method" in event:
                self.events.append(event)
                if event["method"] == method and event.get("sessionId") == session:
                    return event


def _describe(event: dict) -> tuple[str, str] | None:
    """(kind, text) of a protocol event that reports a problem or console line."""
    method, params = event["method"], event.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        exc = details.get("exception") or {}
        text = exc.get("description") or exc.get("value") or details.get("text", "")
        where = f" ({details.get('url', '')}:{details.get('lineNumber', 0) + 1})"
        return "error", f"{details.get('text', 'Uncaught')}: {text}{where}"
    if method == "Runtime.consoleAPICalled":
        parts = []
        for arg in params.get("args", []):
            parts.append(str(arg.get("value", arg.get("description", arg.get("type")))))
        line = f"console.{params['type']}: " + " ".join(parts)
        return ("error" if params["type"] in ("error", "assert") else "console"), line
    if method == "Log.entryAdded":
        entry = params["entry"]
        line = f"{entry['source']} {entry['level']}: {entry['text']} {entry.get('url', '')}"
        return ("error" if entry["level"] == "error" else "console"), line.rstrip()
    return None


# The supervisor Chromium runs under.  Chromium's helpers outlive it in two
# ways: most share its process group, but the crash handler double-forks and
# calls setsid, and every orphan is re-parented to PID 1 -- which in a minimal
# container may never reap it.  A child subreaper (prctl) inherits all of
# them instead, kills whatever is left once Chromium is gone, and reaps every
# one before it exits.  Killing the supervisor's group is the last resort.
_SUPERVISOR = r"""
import ctypes, fcntl, os, signal, subprocess, sys
import psutil

ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
read_fd, write_fd = int(sys.argv[1]), int(sys.argv[2])
# Chromium wants the protocol on fds 3 (in) and 4 (out); lift both ends above
# 4 first so putting one in place cannot clobber the other.
high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (read_fd, write_fd)]
for fd in (read_fd, write_fd):
    os.close(fd)
for target, fd in zip((3, 4), high):
    os.dup2(fd, target)
    os.close(fd)
browser = subprocess.Popen(sys.argv[3:], stdin=subprocess.DEVNULL, pass_fds=(3, 4))
os.close(3)
os.close(4)  # the caller now sees EOF as soon as Chromium is gone

def kill_all(*_):
    for proc in psutil.Process().children(recursive=True):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass

signal.signal(signal.SIGTERM, kill_all)
browser.wait()
while True:  # kill and reap the browser's orphans, now ours
    kill_all()
    try:
        os.wait()
    except ChildProcessError:
        break
    except InterruptedError:
        continue
"""


def _spawn(executable: str, profile: str, log) -> tuple[subprocess.Popen, int, int]:
    """Start Chromium under the supervisor, with the protocol on its fds 3 and 4."""
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    command = [
        executable,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--remote-debugging-pipe",
        "about:blank",
    ]
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SUPERVISOR, str(to_browser_r), str(from_browser_w), *command],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(to_browser_r, from_browser_w),
            start_new_session=True,  # own session and group, for the last-resort kill
            # Keep what Chromium writes outside --user-data-dir (its crash
            # handler's database, caches) inside the temporary profile too.
            env=dict(
                os.environ,
                XDG_CONFIG_HOME=os.path.join(profile, "config"),
                XDG_CACHE_HOME=os.path.join(profile, "cache"),
            ),
        )
    finally:
        os.close(to_browser_r)
        os.close(from_browser_w)
    return proc, to_browser_w, from_browser_r


def _stop(proc: subprocess.Popen, grace: float) -> None:
    """Let the supervisor finish within ``grace`` s, else make it kill everything."""
    try:
        proc.wait(timeout=grace)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.terminate()  # the supervisor kills and reaps all of Chromium, then exits
    try:
        proc.wait(timeout=10)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def open_in_chromium(
    path: str | os.PathLike,
    *,
    wait_for: str | None = None,
    evaluate: str | None = None,
    timeout: float = 60.0,
    executable: str | None = None,
    width: int | None = None,
    screenshot: str | os.PathLike | None = None,
) -> BrowserResult:
    """Load ``path`` in headless Chromium; return its final DOM and its errors.

    ``wait_for`` is a JavaScript expression; after the load event the page is
    given until ``timeout`` for it to become truthy (``result.ready`` says
    whether it did).  ``evaluate`` is a JavaScript expression run last (a
    promise is awaited); its JSON value is ``result.value``.

    ``width`` sets the window's width in CSS pixels (default: Chromium's);
    ``screenshot`` writes a PNG of the whole page there, once it is ready.

    Raises ``BrowserError`` if Chromium is missing, fails or does not answer
    within ``timeout`` seconds.  In every case Chromium and all its helper
    processes are gone when this returns or raises.
    """
    executable = executable or find_chromium()
    if executable is None:
        raise BrowserError("Chromium not found (set $CHROMIUM or put chromium on PATH)")
    url = Path(path).resolve().as_uri()
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, \
            tempfile.TemporaryFile() as log:
        proc, write_fd, read_fd = _spawn(executable, profile, log)
        graceful = False
        try:
            cdp = _Pipe(write_fd, read_fd, proc, deadline)
            target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"
            ]
            for domain in ("Runtime", "Log", "Page"):
                cdp.call(f"{domain}.enable", session=session)
            if width is not None:
                _set_size(cdp, session, width, 900)
            nav = cdp.call("Page.navigate", {"url": url}, session=session)
            nav_error = nav.get("errorText")
            ready, value = True, None
            if not nav_error:
                cdp.wait_event("Page.loadEventFired", session)
                if wait_for is not None:
                    ms = max(0, int((deadline - time.monotonic()) * 1000) - 2000)
                    ready = _evaluate(cdp, session, _WAIT_FOR % {"ms": ms, "cond": wait_for})
                _evaluate(cdp, session, _SETTLE)
            if evaluate is not None and not nav_error:
                value = _evaluate(cdp, session, evaluate)
            if screenshot is not None and not nav_error:
                _screenshot(cdp, session, screenshot, width)
            dom = _evaluate(cdp, session, _SERIALIZE_DOM)
            errors, console = [], []
            if nav_error:
                errors.append(f"navigation to {url} failed: {nav_error}")
            for event in cdp.events:
                described = _describe(event)
                if described is not None:
                    (errors if described[0] == "error" else console).append(described[1])
            graceful = True
            try:
                cdp.call("Browser.close")
            except BrowserError:
                pass  # it may close the pipe before replying; killed below anyway
        except BrowserError as exc:
            log.seek(0)
            tail = log.read()[-2000:].decode(errors="replace")
            error = BrowserError(f"{exc}\n--- chromium output ---\n{tail}")
            error.pid = proc.pid
            raise error from exc
        finally:
            os.close(write_fd)
            os.close(read_fd)
            _stop(proc, grace=10.0 if graceful else 0.0)
    return BrowserResult(dom=dom, errors=errors, console=console, ready=bool(ready),
                         value=value, pid=proc.pid)


def _evaluate(cdp: _Pipe, session: str, expression: str):
    result = cdp.call(
        "Runtime.evaluate",
        {"expression": expression, "awaitPromise": True, "returnByValue": True},
        session=session,
    )
    if "exceptionDetails" in result:
        raise BrowserError(f"evaluating helper script failed: {result['exceptionDetails']}")
    return result["result"].get("value")


def _set_size(cdp: _Pipe, session: str, width: int, height: int) -> None:
    cdp.call("Emulation.setDeviceMetricsOverride",
             {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
             session=session)


def _screenshot(cdp: _Pipe, session: str, path, width: int | None) -> None:
    """A PNG of the whole page (the window grown to the page's height)."""
    import base64

    size = cdp.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
    width = width or int(size["width"])
    _set_size(cdp, session, width, min(int(size["height"]) + 1, 16000))
    _evaluate(cdp, session, _SETTLE)
    shot = cdp.call("Page.captureScreenshot", {"format": "png"}, session=session)
    Path(path).write_bytes(base64.b64decode(shot["data"]))
