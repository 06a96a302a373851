"""Fixtures shared by the diagnostics tests."""

import importlib
import threading

import pytest

from tests.support.servers import port_is_free

SCHEDULERS = {
    "sync": ("localsched.local", "get_sync"),
    "threads": ("localsched.threaded", "get"),
    "processes": ("localsched.multiprocessing", "get"),
}


@pytest.fixture(params=list(SCHEDULERS))
def scheduler(request):
    """(name, get function) for each scheduler; the root conftest stops the
    shared pools and checks nothing is left behind."""
    module_name, attr = SCHEDULERS[request.param]
    module = importlib.import_module(module_name)
    return request.param, getattr(module, attr)


@pytest.fixture
def dash():
    """A quiet Dashboard, closed after the test; close() must free its port
    and end the server's thread (checked here, not trusted: the suite must
    leave nothing listening)."""
    from localsched.diagnostics import Dashboard
    from localsched.diagnostics.live.server import THREAD_NAME

    d = Dashboard(quiet=True)
    try:
        yield d
    finally:
        port = d.port
        d.close()
        assert port_is_free("127.0.0.1", port)
        assert THREAD_NAME not in {t.name for t in threading.enumerate()}
