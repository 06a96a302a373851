"""Users' settings (``localsched.system.settings``): read live, and cheaply.

A setting follows ``os.environ`` as a script or a test changes it (set,
changed, removed: the next read sees it), and reading an unset one costs
no exception (each unset read used to raise and catch a ``KeyError`` in
``os.environ.get``: about a microsecond, several times per process job).
"""

from __future__ import annotations

import os
import sys

import pytest

from localsched._shm import store
from localsched.system import settings


def _exceptions_raised(fn) -> list:
    """The exceptions raised (and caught) in Python frames while ``fn()`` runs."""
    seen: list = []

    def tracer(frame, event, arg):
        if event == "exception":
            seen.append((arg[0].__name__, frame.f_code.co_filename, frame.f_code.co_name))
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(old)
    return seen


@pytest.fixture
def unset(monkeypatch):
    for name in settings.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_unset_settings_read_without_an_exception(unset):
    def read_all():
        for name, s in settings.ENVIRONMENT.items():
            {"flag": settings.flag, "int": settings.integer, "text": settings.text}[s.kind](name)
        store.settings()

    read_all()
    assert _exceptions_raised(read_all) == []


def test_settings_follow_the_environment_as_it_changes(unset):
    assert store.settings() == (True, 64 * 1024, 16 * 1024 * 1024)
    unset.setenv("LOCALSCHED_SHM", "off")
    unset.setenv("LOCALSCHED_SHM_THRESHOLD", "4096")
    assert store.settings() == (False, 4096, 16 * 1024 * 1024)
    unset.setenv("LOCALSCHED_SHM", "1")
    unset.setenv("LOCALSCHED_SHM_THRESHOLD", "not a number")
    assert store.settings() == (True, 64 * 1024, 16 * 1024 * 1024)
    unset.setenv("LOCALSCHED_SHM_THRESHOLD", "0")  # (at least its minimum)
    assert settings.integer("LOCALSCHED_SHM_THRESHOLD") == 1
    unset.delenv("LOCALSCHED_SHM_THRESHOLD")
    assert settings.integer("LOCALSCHED_SHM_THRESHOLD") == 64 * 1024
    assert settings.text("LOCALSCHED_DASHBOARD_LINK") is None
    unset.setenv("LOCALSCHED_DASHBOARD_LINK", "  http://{host}:{port}/  ")
    assert settings.text("LOCALSCHED_DASHBOARD_LINK") == "http://{host}:{port}/"
    unset.setenv("LOCALSCHED_DASHBOARD_LINK", "")
    assert settings.text("LOCALSCHED_DASHBOARD_LINK") is None


def test_settings_follow_a_replaced_environment(unset):
    # (``os.environ`` rebound to a plain dict, as some test helpers do:
    # read through it, never through the mapping it replaced)
    unset.setattr(os, "environ", {**os.environ, "LOCALSCHED_SHM": "no"})
    assert settings.flag("LOCALSCHED_SHM") is False
    os.environ["LOCALSCHED_SHM"] = "yes"
    assert settings.flag("LOCALSCHED_SHM") is True
    del os.environ["LOCALSCHED_SHM"]
    assert settings.flag("LOCALSCHED_SHM") is True
    assert settings.integer("LOCALSCHED_SHM_RESERVE") == 16 * 1024 * 1024
