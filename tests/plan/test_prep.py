"""Preparing a graph (compile, order, initial state): the garbage collector
is paused while it runs and is as the caller left it afterwards, on every
exit path; tasks run with it as the caller set it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Mapping
from operator import add

import pytest

from localsched.local import get_sync
from localsched.plan.graph import CycleError, MissingDependencyError, compile_graph
from localsched.threaded import get as get_threads


class Watched(Mapping):
    """A graph that notes whether the collector runs while its keys are
    read (``compile_graph`` lists them first); ``fail`` is raised from there."""

    def __init__(self, dsk: dict, fail: BaseException | None = None):
        self.dsk, self.fail, self.seen = dsk, fail, []

    def __getitem__(self, k):
        return self.dsk[k]

    def __iter__(self) -> Iterator:
        self.seen.append(gc.isenabled())
        if self.fail is not None:
            raise self.fail
        return iter(self.dsk)

    def __len__(self) -> int:
        return len(self.dsk)


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_paused_while_preparing_and_on_while_tasks_run(collector_on):
    dsk = Watched({"a": 1, "b": (add, "a", 1), "on": (gc.isenabled,)})
    assert get_sync(dsk, ["b", "on"]) == (2, True)
    assert dsk.seen and not any(dsk.seen)
    assert gc.isenabled()


def test_a_caller_who_turned_the_collector_off_finds_it_off(collector_on):
    gc.disable()
    dsk = Watched({"a": 1, "b": (add, "a", 1), "on": (gc.isenabled,)})
    assert get_sync(dsk, ["b", "on"]) == (2, False)
    assert not gc.isenabled()


@pytest.mark.parametrize("fail", [KeyboardInterrupt(), ValueError("boom")])
def test_the_collector_is_back_when_preparing_fails(collector_on, fail):
    with pytest.raises(type(fail)):
        get_sync(Watched({"a": (add, 1, 1)}, fail), "a")
    assert gc.isenabled()
    with pytest.raises(CycleError):
        get_sync({"a": (add, "b", 1), "b": (add, "a", 1)}, "a")
    assert gc.isenabled()


def test_concurrent_and_nested_gets_leave_the_collector_on(collector_on):
    """Gets preparing in several threads at once, and gets nested in tasks."""
    barrier = threading.Barrier(4, timeout=30)
    inner = {"x": 1, "y": (add, "x", 1)}

    def nested(_):
        return get_sync(inner, "y") + get_threads(inner, "y", num_workers=2)

    def one() -> None:
        barrier.wait()
        for _ in range(20):
            dsk = {("t", i): (nested, i) for i in range(10)}
            dsk["s"] = (sum, list(dsk))
            assert get_threads(dsk, "s", num_workers=2) == 40

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert gc.isenabled()


def test_arguments_found_in_the_graph_are_keys_in_every_task_shape():
    """The fast paths of ``compile_graph`` recognise what the general one does."""
    dsk = {
        101: 10, 102: 20, "k": 5, ("t", 0): 7,
        "int-keys": (add, 101, 102),  # ints that are keys
        "same-twice": (add, "k", "k"),  # one dependency, twice
        "tuple-key": (add, ("t", 0), 101),  # a tuple key and an int key
        "literal-int": (abs, -3),  # an int that is not a key
        "literal-str": (len, "not-a-key"),
        "literal-none": (bool, None),
        "unhashable": (len, [1, 2, 3]),
        "key-in-list": (sum, ["k", 1]),
        "nested-task": (add, (add, "k", 1), 1),
        "key-in-literal-tuple": (len, ("k", "zz")),
    }
    g = compile_graph(dsk)
    deps = {g.keys[i]: sorted(map(str, (g.keys[j] for j in d))) for i, d in enumerate(g.deps)}
    assert deps["int-keys"] == ["101", "102"]
    assert deps["same-twice"] == ["k"]
    assert deps["tuple-key"] == ["('t', 0)", "101"]
    assert deps["literal-int"] == deps["literal-str"] == deps["literal-none"] == []
    assert deps["unhashable"] == []
    assert deps["key-in-list"] == deps["nested-task"] == deps["key-in-literal-tuple"] == ["k"]
    out = ["int-keys", "same-twice", "tuple-key", "literal-int", "literal-str", "literal-none",
           "unhashable", "key-in-list", "nested-task", "key-in-literal-tuple"]
    assert get_sync(dsk, out) == (30, 10, 17, 3, 9, False, 3, 6, 7, 2)


def test_a_missing_explicit_dependency_is_refused(collector_on):
    pytest.importorskip("dask")
    from dask._task_spec import Task, TaskRef

    with pytest.raises(MissingDependencyError):
        get_sync({"a": Task("a", add, TaskRef("nope"), 1)}, "a")
    assert gc.isenabled()
