"""A live page in headless Chromium, kept open while the test (or benchmark) works.

``tests/support/browser.py`` loads a page, waits, and closes the browser; a live
dashboard needs the tab to stay open while a computation runs, to be asked
questions meanwhile, and to be closed as a tab (closing the target, which is
what frees the page's websocket at once: a tab merely navigated away may keep
its session alive).  This reuses browser.py's process supervision and
DevTools pipe::

    with LiveTab(dash.link, wait_for="window.Bokeh && Bokeh.documents.length") as tab:
        tab.evaluate("1 + 1")
        tab.screenshot("status.png")
        tab.close_tab()
    tab.errors        # console errors and exceptions of the page's whole life
"""

from __future__ import annotations

import base64
import tempfile
import time

try:
    from tests.support import browser
except ImportError:  # run with tests/ on sys.path
    import tests.support.browser as browser  # type: ignore[no-redef]

__all__ = ["LiveTab"]


class LiveTab:
    """One Chromium tab on ``url``; a context manager that always ends Chromium."""

    def __init__(self, url: str, *, wait_for: str | None = None, timeout: float = 120.0,
                 width: int = 1100, height: int = 1800, executable: str | None = None):
        self.url = url
        self.wait_for = wait_for
        self.timeout = timeout
        self.size = (width, height)
        self.executable = executable or browser.find_chromium()
        self.errors: list = []
        self.console: list = []
        self.ready = False
        self._cdp = None
        self._session = None
        self._target = None

    def __enter__(self) -> LiveTab:
        if self.executable is None:
            raise browser.BrowserError("Chromium not found")
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        self._log = tempfile.TemporaryFile()
        self._proc, self._write_fd, self._read_fd = browser._spawn(
            self.executable, self._profile.name, self._log)
        try:
            deadline = time.monotonic() + self.timeout
            cdp = self._cdp = browser._Pipe(self._write_fd, self._read_fd, self._proc, deadline)
            self._target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = cdp.call("Target.attachToTarget",
                                     {"targetId": self._target, "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                cdp.call(f"{domain}.enable", session=self._session)
            width, height = self.size
            cdp.call("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1,
                      "mobile": False}, session=self._session)
            nav = cdp.call("Page.navigate", {"url": self.url}, session=self._session)
            if nav.get("errorText"):
                raise browser.BrowserError(f"navigation to {self.url} failed: {nav['errorText']}")
            cdp.wait_event("Page.loadEventFired", self._session)
            if self.wait_for:
                self.ready = bool(self.evaluate(
                    browser._WAIT_FOR % {"ms": int(self.timeout * 500), "cond": self.wait_for}))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _renew(self) -> None:
        """Each exchange gets ``timeout`` seconds (the tab may stay open longer)."""
        self._cdp._deadline = time.monotonic() + self.timeout

    def evaluate(self, expression: str):
        """The JSON value of ``expression`` in the page (a promise is awaited)."""
        self._renew()
        return browser._evaluate(self._cdp, self._session, expression)

    def screenshot(self, path, full_page: bool = False) -> None:
        """Write a PNG of the page as it looks now (``full_page``: all of
        it, not only the viewport)."""
        self._renew()
        params: dict = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, "
                                 "document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": size[1],
                                "scale": 1})
        shot = self._cdp.call("Page.captureScreenshot", params, session=self._session)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def close_tab(self) -> None:
        """Close the tab itself (its websocket closes with it)."""
        if self._target is not None:
            self._collect()
            self._renew()
            self._cdp.call("Target.closeTarget", {"targetId": self._target})
            self._target = None

    def _collect(self) -> None:
        if self._cdp is None:
            return
        for event in self._cdp.events:
            described = browser._describe(event)
            if described is not None:
                (self.errors if described[0] == "error" else self.console).append(described[1])
        self._cdp.events.clear()

    def __exit__(self, *exc) -> None:
        graceful = False
        try:
            if self._cdp is not None:
                self._collect()
                try:
                    self._renew()
                    self._cdp.call("Browser.close")
                    graceful = True
                except browser.BrowserError:
                    pass
        finally:
            import os

            for fd in (self._write_fd, self._read_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            browser._stop(self._proc, grace=10.0 if graceful else 0.0)
            self._log.close()
            self._profile.cleanup()
