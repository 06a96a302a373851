"""Fixtures shared by the diagnostics tests."""

import importlib

import pytest

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
