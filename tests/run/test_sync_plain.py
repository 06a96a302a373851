"""A synchronous run nobody watches (no callback at all, no budget) takes a
lean loop (``inline._run_plain``): it must run the tasks in the same order,
free results at the same moments, keep a caller's ``cache=`` as the other
loop does and fail the same way as a watched run."""

from __future__ import annotations

import gc
import weakref
from operator import add

import pytest

from localsched.callbacks import Callback
from localsched.local import get_sync


class Box:
    """A result the test can watch being freed."""

    def __init__(self, v):
        self.v = v


def _graph(log: list, live: list) -> tuple[dict, list]:
    """A tree of 64 leaves with a shared input and a diamond, whose tasks
    note the order they ran in and how many results were alive then."""

    def leaf(i):
        log.append(("leaf", i))
        live.append(_alive())
        return Box(i)

    def join(name, a, b):
        log.append(name)
        live.append(_alive())
        return Box(a.v + b.v)

    dsk: dict = {("x", i): (leaf, i) for i in range(64)}
    level, n = "x", 64
    while n > 1:
        nxt = f"{level}'"
        for i in range(n // 2):
            dsk[(nxt, i)] = (join, f"{nxt}{i}", (level, 2 * i), (level, 2 * i + 1))
        level, n = nxt, n // 2
    dsk["shared"] = (join, "join-shared", ("x", 0), ("x", 63))
    dsk["top"] = (join, "join-top", (level, 0), "shared")
    return dsk, ["top", ("x", 5)]


_refs: list = []


def _alive() -> int:
    return sum(r() is not None for r in _refs)


def _run(callbacks):
    log: list = []
    live: list = []
    dsk, keys = _graph(log, live)
    _refs.clear()

    def note(f):
        def noted(*args):
            out = f(*args)
            _refs.append(weakref.ref(out))
            return out
        return noted

    dsk = {k: (note(v[0]),) + v[1:] for k, v in dsk.items()}
    collecting = gc.isenabled()
    gc.disable()  # (the frees counted are the scheduler's, not the collector's)
    try:
        out = get_sync(dsk, keys, callbacks=callbacks)
    finally:
        if collecting:
            gc.enable()
    return out, log, live


def test_an_unwatched_run_keeps_the_order_and_the_frees_of_a_watched_one():
    seen: list = []
    watched = Callback(pretask=lambda key, dsk, state: seen.append(key))
    out_plain, log_plain, live_plain = _run(None)
    out_watched, log_watched, live_watched = _run([watched])
    assert seen  # (the watched run took the other loop)
    assert [o.v for o in out_plain[:1]] == [o.v for o in out_watched[:1]] == [2079]
    assert out_plain[1].v == out_watched[1].v == 5
    assert log_plain == log_watched
    assert live_plain == live_watched
    assert max(live_plain) < 16  # (results leave as their last user runs)


def test_an_unwatched_run_fills_and_empties_a_callers_cache_as_a_watched_one():
    dsk = {"a": 1, "b": (add, "a", 1), "c": (add, "b", "b"), "d": (add, "c", "a")}
    caches = []
    for callbacks in (None, [Callback(pretask=lambda *a: None)]):
        cache: dict = {}
        assert get_sync(dsk, ["d", "b"], cache=cache, callbacks=callbacks) == (5, 2)
        caches.append(cache)
    assert caches[0] == caches[1]


def test_an_unwatched_failure_names_its_task_with_its_own_frames_first():
    def boom(x, y):
        raise ValueError("no")

    dsk = {"a": 1, "b": (add, "a", 1), "c": (boom, "b", "a"), "d": (add, "c", 1)}
    with pytest.raises(ValueError) as info:
        get_sync(dsk, "d")
    assert any("'c'" in note for note in getattr(info.value, "__notes__", []))
    assert info.traceback[-1].name == "boom"


def test_an_unwatched_run_with_every_task_shape_gives_dask_s_answers():
    dsk = {
        "a": 1,
        "b": (add, "a", 2),  # two args, one a key
        "c": (add, "a", "b"),  # two keys
        "d": (sum, ["a", "b", "c"]),  # a list
        "e": "d",  # an alias
        "f": (add, 10, 5),  # no key
        "g": (lambda *xs: sum(xs), "a", "b", "c", "e", "f"),
        "h": (add, "a", "a"),  # the same key twice
    }
    assert get_sync(dsk, ["g", "h", "e"]) == (31, 2, 8)
