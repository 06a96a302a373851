"""A memory budget's pause (issue #34): above ``pause``, tasks that would
add to what is held wait while tasks that consume held values run.

No timing: the consumer below runs until the scheduler has *decided* to
wait (``Budget.admit`` said no while a worker was free), or until a
producer starts (the failure this test looks for); whichever comes first.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from localsched import budget
from localsched.threaded import get as threaded_get

MB = 10**6


def _graph(events: list, go: threading.Event):
    """Four 4 MB blocks held at once (a fan-in ``m`` needs them all, and
    so does ``c`` after it: ``c`` is their last user), and three
    producers of 4 MB each, ready with ``c`` once ``m`` is done."""

    def block(i, *_):
        return np.full(4 * MB // 8, float(i))

    def consume(*arrays):
        events.append("c starts")
        # (until the loop chose to wait rather than start a producer on
        # the free worker; a producer starting instead is the failure)
        go.wait(60)
        events.append("c ends")
        return float(sum(float(np.sum(a)) for a in arrays[:-1]))

    def produce(j, m):
        events.append(f"p{j} starts")
        go.set()
        return np.full(4 * MB // 8, float(j) + m * 0)

    dsk = {("h", i): (block, i) for i in range(4)}
    dsk["m"] = (lambda *a: float(sum(float(np.sum(x)) for x in a)), *[("h", i) for i in range(4)])
    dsk["c"] = (consume, *[("h", i) for i in range(4)], "m")
    dsk.update({("p", j): (produce, j, "m") for j in range(3)})
    dsk["out"] = (lambda c, *ps: c + sum(float(np.sum(p)) for p in ps),
                  "c", *[("p", j) for j in range(3)])
    return dsk


@pytest.mark.timeout(120)
def test_above_pause_producers_wait_while_a_consumer_runs(monkeypatch):
    events: list = []
    go = threading.Event()  # the loop paused, or a producer started
    admit = budget.Budget.admit

    def watched_admit(self, loop):
        ok = admit(self, loop)
        if not ok:
            events.append("paused")
            go.set()
        return ok

    monkeypatch.setattr(budget.Budget, "admit", watched_admit)
    monkeypatch.setattr(budget, "ARM", 0)  # counting from the first task
    monkeypatch.setattr(budget.Budget, "_real_memory", lambda self: 10**9)  # (flat: sizes decide)
    dsk = _graph(events, go)
    # 16 MB held against a pause of 0.8 x 18 MB = 14.4 MB; no spilling (off)
    result = threaded_get(dsk, "out", num_workers=2, memory_limit="18MB")
    per = 4 * MB // 8
    assert result == float(sum(i * per for i in range(4)) + sum(j * per for j in range(3)))
    starts = [e for e in events if e.endswith(" starts") and e[0] == "p"]
    assert len(starts) == 3, events
    assert "paused" in events and events.index("paused") < events.index("c ends"), events
    assert events.index("c ends") < events.index(starts[0]), events


# -- a disk that refuses: one clear error, nothing computed lost -------------------------


def _held_graph(n=12, size=2 * MB):
    """n blocks all held until a fan-in ``m`` is done, then used again."""
    dsk = {("x", i): (np.full, size // 8, float(i)) for i in range(n)}
    dsk["m"] = (lambda *a: float(sum(float(np.sum(x)) for x in a)), *[("x", i) for i in range(n)])
    for i in range(n):
        dsk[("y", i)] = (np.add, ("x", i), "m")
    dsk["out"] = (lambda *a: float(sum(float(np.sum(x)) for x in a)),
                  *[("y", i) for i in range(n)])
    return dsk, "out"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["sync", "threads"])
def test_a_refused_spill_is_one_error_naming_the_directory_and_the_cache_keeps_values(
        name, tmp_path):
    """Spilling stops at the cap (``max-spill``, as a full disk does): the
    run raises one ``SpillError`` naming its directory, and a cache the
    caller passed holds values, never placeholders for files that are gone:
    a second run with that cache and no budget gives the right answer."""
    import dask

    from localsched.budget import Spilled
    from localsched.local import get_sync
    from localsched.spill import SpillError

    get = get_sync if name == "sync" else lambda *a, **k: threaded_get(*a, num_workers=2, **k)
    monkeypatch_free = {"localsched.memory.spill": True,
                        "localsched.memory.spill-directory": str(tmp_path),
                        "localsched.memory.max-spill": "5MB"}  # (two blocks fit, not three)
    dsk, key = _held_graph()
    cache: dict = {}
    with dask.config.set(monkeypatch_free), pytest.raises(SpillError) as info:
        get(dsk, key, memory_limit="12MB", cache=cache)
    assert str(tmp_path) in str(info.value) and "localsched-spill-" in str(info.value)
    assert cache and not any(type(v) is Spilled for v in cache.values())
    expected = get_sync(dsk, key)
    assert get(dsk, key, cache=cache) == expected
    assert list(tmp_path.iterdir()) == []
