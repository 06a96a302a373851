"""A Bokeh server on a thread of its own, bound before anything else is built.

The thread owns a fresh asyncio loop (tornado's IOLoop on it): never the
caller's, so the page stays live while a notebook cell blocks in
``compute()`` (a kernel's own loop is stopped then).  The port is bound
first, so the websocket allowlist can name it under both ``localhost`` and
``127.0.0.1`` (tornado before 6.6 checks the origin against it even for a
same-origin page).  Sessions of closed tabs, and of plain GETs, are reaped
after half a second of having no connection (bokeh's default is 15 s, and
every session runs its page's periodic callbacks until reaped).  A request
whose Host header names another address gets 403 from every route and the
websocket (hosts.py: DNS rebinding).

bokeh points ``curdoc()`` at a page's document while it runs that page's
callbacks and change handlers (process-wide, for a few milliseconds at a
time): code on another thread calling ``curdoc()`` just then sees the
page's document.  That is bokeh's design for a server on the main thread;
the dashboard leaves it as it is and only makes sure its callbacks never
raise into bokeh (its patch has no ``finally``: an exception would leave
``curdoc()`` pointing at the page for good).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import importlib.util
import socket
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ...system.forking import renew_in_child
from .hosts import HostPolicy, guarded

__all__ = ["BackgroundServer", "THREAD_NAME", "parse_address"]

THREAD_NAME = "localsched-dashboard"
REAP_MILLISECONDS = 500


def parse_address(address: str) -> tuple:
    """``"host:port"``, ``":port"``, ``"port"`` -> ``(host, port)``; host defaults to 127.0.0.1.

    >>> parse_address("127.0.0.1:0"), parse_address(":8790"), parse_address("8790")
    (('127.0.0.1', 0), ('127.0.0.1', 8790), ('127.0.0.1', 8790))
    """
    text = str(address).strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"dashboard address must be 'host:port', got {address!r}") from None
    if not 0 <= number < 65536:
        raise ValueError(f"dashboard port must be in 0..65535, got {address!r}")
    return (host.strip("[]") or "127.0.0.1"), number


def _bind(host: str, port: int) -> tuple:
    from bokeh.server.util import bind_sockets

    try:
        return bind_sockets(host, port)
    except OSError as exc:
        if port == 0 or exc.errno != errno.EADDRINUSE:
            raise
    sockets, free = bind_sockets(host, 0)
    warnings.warn(f"Port {port} is already in use; serving the localsched dashboard on port "
                  f"{free} instead", RuntimeWarning, stacklevel=4)
    return sockets, free


class BackgroundServer:
    """Serve ``applications`` (path -> bokeh Application) and ``patterns``
    (extra tornado routes) at ``host:port`` from a daemon thread."""

    def __init__(self, applications: dict, patterns: list, host: str, port: int,
                 allowed_hosts: tuple = ()):
        self.host = host
        self._allowed_hosts = tuple(allowed_hosts)
        self._sockets, self.port = _bind(host, port)
        self._applications = applications
        self._patterns = patterns
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ioloop: Any = None  # tornado's, on _loop
        self._server: Any = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        # A forked child (a fork worker) gets copies of the listening
        # sockets and open connections: held there, they would keep the
        # port, and the tabs connected, after ``stop()``.
        renew_in_child(self)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            self._close_sockets()
            raise self._failure

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            # bokeh imports pandas on a source's first stream, if installed:
            # done here, before the page runs, it can never race an import of
            # pandas in the user's thread (seen: a half-initialised module).
            if importlib.util.find_spec("pandas") is not None:
                import pandas  # noqa: F401
            from bokeh.server.server import BaseServer
            from bokeh.server.tornado import BokehTornado
            from tornado.httpserver import HTTPServer
            from tornado.ioloop import IOLoop

            origins = [f"localhost:{self.port}", f"127.0.0.1:{self.port}",
                       f"{self.host}:{self.port}"]
            if self.host in ("0.0.0.0", "::", ""):
                origins.append(f"{socket.gethostname()}:{self.port}")
            app = BokehTornado(
                self._applications, extra_patterns=self._patterns,
                extra_websocket_origins=sorted(set(origins)),
                check_unused_sessions_milliseconds=REAP_MILLISECONDS,
                unused_session_lifetime_milliseconds=REAP_MILLISECONDS,
                keep_alive_milliseconds=REAP_MILLISECONDS * 2,
                stats_log_frequency_milliseconds=3_600_000,
                redirect_root=False, use_index=False)
            # (every request naming another host is refused: hosts.py)
            http = HTTPServer(guarded(app, HostPolicy(self.host, self._allowed_hosts)),
                              xheaders=True)
            http.add_sockets(self._sockets)
            self._ioloop = IOLoop.current()
            self._server = BaseServer(self._ioloop, app, http)
            self._server.start()
        except BaseException as exc:  # noqa: B036 -- handed to the constructor's thread
            self._failure = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def soon(self, fn: Callable) -> None:
        """Run ``fn()`` on the server's thread, never waiting: now if this is
        that thread, else as soon as its loop can (nothing if it stopped).
        bokeh up to 3.9 builds a page on the server's thread, bokeh 3.10 in
        a worker thread of its own executor, whose ``IOLoop.current()`` is
        not the server's: a page's timer is started through here."""
        if threading.current_thread() is self._thread:
            fn()
            return
        loop = self._loop
        try:
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(fn)
        except RuntimeError:  # (closed meanwhile)
            pass

    def call(self, fn: Callable, timeout: float = 10.0):
        """Run ``fn()`` on the server's loop and return its result."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: B036
                future.set_exception(exc)

        loop = self._loop
        if loop is None or loop.is_closed() or not self._thread.is_alive():
            raise RuntimeError("the dashboard server is stopped")
        loop.call_soon_threadsafe(run)
        return future.result(timeout)

    def sessions(self) -> int:
        """Bokeh sessions alive now (one per open tab, until reaped)."""
        return self.call(lambda: len(self._server.get_sessions()))

    def connections(self) -> int:
        """Websocket connections open now."""
        def count():
            return sum(s.connection_count for s in self._server.get_sessions())
        return self.call(count)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving, close the listening sockets, end the thread."""
        loop = self._loop
        if loop is not None and self._thread.is_alive():
            def shutdown():
                try:
                    self._server.stop(wait=False)
                    self._server.unlisten()
                finally:
                    loop.stop()
            try:
                loop.call_soon_threadsafe(shutdown)
            except RuntimeError:  # the loop closed meanwhile
                pass
            if threading.current_thread() is not self._thread:
                self._thread.join(timeout)
        self._close_sockets()

    def _after_fork_in_child(self) -> None:
        """This process never serves (the thread is the parent's): close its
        copies of what the server's loop watches, the listening sockets and
        the browsers' connections (tornado keeps them as socket objects;
        a bare descriptor number is left alone: closing a number twice could
        close something else)."""
        handlers = getattr(self._ioloop, "handlers", None) or {}
        for fileobj, _ in list(handlers.values()):
            if hasattr(fileobj, "close"):
                try:
                    fileobj.close()
                except OSError:
                    pass
        self._close_sockets()

    def _close_sockets(self) -> None:
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass
        self._sockets = []
