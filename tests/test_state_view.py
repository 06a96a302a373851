"""One state interface for every diagnostic, whatever loop produced the state.

A callback's ``state`` is localsched's ``State`` (local loops), companion
mode's ``ClusterState`` (a dask.distributed cluster) or dask's plain dict
(localsched's callbacks under dask's own schedulers).  ``state_view(state)``
reads all three the same way: the diagnostics ask it, never ``getattr``.
"""

from __future__ import annotations

import ast
from operator import add
from pathlib import Path

import pytest

import localsched
from localsched.callbacks import Callback
from localsched.distributed._state import ClusterState
from localsched.view import RunOutcome, State, StateView, state_view

DSK = {"a": 1, "b": (add, "a", 1), "c": (add, "b", 1), "d": (add, "b", "c")}


def boom(x):
    raise ValueError("boom")


class Seen(Callback):
    """The views a computation's start_state and finish give."""

    def __init__(self):
        super().__init__()
        self.start = self.end = None
        self.raw: list = []

    def _start_state(self, dsk, state):
        self.raw.append(state)
        view = state_view(state)
        self.start = (view.ntasks, view.task_keys(), view.failed, view.running_since,
                      view.lost, view.dashboard_link, view.cluster_metrics,
                      view.worker_monitors(0.0, 1.0))

    def _finish(self, dsk, state, errored):
        view = state_view(state)
        self.end = (view.ntasks, sorted(view.failed), view.running_since is None,
                    view.outcome.samples, view.outcome.span)


def test_localsched_state_is_its_own_view():
    seen = Seen()
    with seen:
        assert localsched.get_sync(DSK, "d") == 5
    assert isinstance(seen.raw[0], State) and state_view(seen.raw[0]) is seen.raw[0]
    ntasks, keys, failed, running, lost, link, metrics, monitors = seen.start
    assert (ntasks, sorted(keys), failed, running) == (3, ["b", "c", "d"], {}, {})
    assert (list(lost), link, metrics, monitors) == ([], None, None, None)
    assert seen.end == (3, [], False, [], ())


def test_a_failure_is_in_the_view_of_every_local_loop():
    seen = Seen()
    with seen, pytest.raises(ValueError):
        localsched.get_sync({"x": 1, "y": (boom, "x")}, "y")
    assert seen.end[1] == ["y"]


def test_dasks_plain_dict_state_reads_through_the_same_interface():
    dask_local = pytest.importorskip("dask.local")
    seen = Seen()
    with seen:
        assert dask_local.get_sync(DSK, "d") == 5
    raw = seen.raw[0]
    assert type(raw) is dict  # dask's own scheduler ran: its state
    view = state_view(raw)
    assert isinstance(view, StateView) and view["cache"] is raw["cache"]
    assert sorted(view) == sorted(raw) and len(view) == len(raw)
    ntasks, keys, failed, running, lost, link, metrics, monitors = seen.start
    assert (ntasks, sorted(keys), failed) == (3, ["b", "c", "d"], {})
    # dask's schedulers report no running tasks at the end: the hooks tell
    assert running is None
    assert (list(lost), link, metrics, monitors) == ([], None, None, None)
    assert seen.end == (3, [], True, [], ())
    assert view.outcome == RunOutcome()  # dask's schedulers report nothing else


def test_a_cluster_state_reads_through_the_same_interface():
    state = ClusterState(outputs=frozenset({"d"}))
    # (key, dependencies, in memory): "a" is held by the cluster already
    state.load([("a", [], True), ("b", ["a"], False), ("c", ["b"], False),
                ("d", ["b", "c"], False)])
    view = state_view(state)
    assert view is state
    assert (view.ntasks, view.task_keys(), view.failed, view.running_since) == (
        3, ["b", "c", "d"], {}, {})
    assert (view.lost, view.dashboard_link, view.cluster_metrics) == ([], None, None)
    state.task = state.task._replace(nbytes=8)
    assert view.task.nbytes == 8


def _state_probes() -> list[str]:
    """``getattr``/``hasattr`` calls on a hook's ``state`` in the diagnostics."""
    root = Path(localsched.__file__).parent / "diagnostics"
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and node.args):
                target = ast.unparse(node.args[0])
                if "state" in target or "outcome" in target:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_diagnostics_probe_no_state():
    assert _state_probes() == []
