"""A memory budget (issue #34), end to end: its pause, a disk that
refuses a spill, a caller killed mid-spill.

- Above ``pause``, tasks that would add to what is held wait while tasks
  that consume held values run.  No timing: the consumer below runs until
  the scheduler has *decided* to wait (``Budget.admit`` said no while a
  worker was free), or until a producer starts (the failure looked for).
- A spill the disk refuses is one error naming the directory; a cache the
  caller passed keeps values, never placeholders.
- A caller SIGKILLed half-way through writing a value leaves its directory;
  the next run that spills removes it, and neither a live computation's
  nor another user's.  The killed process says where it is and waits on
  its stdin: the test acts on a known state, never after a sleep.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import numpy as np
import pytest

from localsched.run import budget
from localsched.threaded import get as threaded_get
from tests.support.platform_marks import needs_posix_signals

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
    """n blocks all held until a fan-in ``m`` of their sums is done, then
    used again."""
    dsk = {("x", i): (np.full, size // 8, float(i)) for i in range(n)}
    dsk.update({("s", i): (np.sum, ("x", i)) for i in range(n)})
    dsk["m"] = (lambda *a: float(sum(a)), *[("s", i) for i in range(n)])
    for i in range(n):
        dsk[("y", i)] = (np.add, ("x", i), "m")
        dsk[("t", i)] = (np.sum, ("y", i))
    dsk["out"] = (lambda *a: float(sum(a)), *[("t", i) for i in range(n)])
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

    from localsched.local import get_sync
    from localsched.run.budget import Spilled
    from localsched.run.spill import SpillError

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


# -- a caller killed mid-spill: the next run reaps its directory, nothing else ----------

_KILLED_MID_SPILL = r"""
import sys
import dask
import numpy as np
from localsched.run import spill
from localsched.local import get_sync

real, calls = spill._write_all, []


def write_all(fd, views):  # the second value: half written, then wait (to be killed)
    calls.append(1)
    if len(calls) != 2:
        return real(fd, views)
    *head, last = views
    last = last.cast("B")
    real(fd, [*head, last[: last.nbytes // 2]])
    print("mid-spill", flush=True)
    sys.stdin.readline()
    real(fd, [last[last.nbytes // 2:]])


spill._write_all = write_all
n, size = 12, 2_000_000
dsk = {("x", i): (np.full, size // 8, float(i)) for i in range(n)}
dsk.update({("s", i): (np.sum, ("x", i)) for i in range(n)})
dsk["m"] = (lambda *a: float(sum(a)), *[("s", i) for i in range(n)])
dsk.update({("y", i): (np.add, ("x", i), "m") for i in range(n)})
dsk.update({("t", i): (np.sum, ("y", i)) for i in range(n)})
dsk["out"] = (lambda *a: float(sum(a)), *[("t", i) for i in range(n)])
with dask.config.set({"localsched.memory.spill": True,
                      "localsched.memory.spill-directory": sys.argv[1]}):
    get_sync(dsk, "out", memory_limit="12MB")
"""


def _spill_dirs(root) -> set:
    from localsched.run.spill import PREFIX

    return {p.name for p in root.iterdir() if p.name.startswith(PREFIX)}


@contextlib.contextmanager
def _caller_mid_spill(root):
    """A computation in another process, stopped half-way through writing
    a spilled value: ``(process, its spill directory's name)``."""
    import subprocess
    import sys

    from tests.support.platform_marks import kill_session

    before = _spill_dirs(root)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-c", _KILLED_MID_SPILL, str(root)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "mid-spill", \
            p.stderr.read() if p.stderr else ""
        (name,) = _spill_dirs(root) - before
        yield p, name
    finally:
        kill_session(p)
        p.wait(timeout=60)
        for f in (p.stdin, p.stdout, p.stderr):
            if f is not None:
                f.close()


@needs_posix_signals
@pytest.mark.timeout(180)
def test_a_caller_killed_mid_spill_is_reaped_by_the_next_run_and_nothing_else(tmp_path):
    import dask

    from localsched.local import get_sync
    from localsched.run.spill import LOCK_NAME, PREFIX

    root = tmp_path / "spillroot"
    root.mkdir()
    foreign = None
    if os.geteuid() == 0:  # another user's directory, its owner gone too: not ours
        foreign = root / (PREFIX + "foreign")
        foreign.mkdir(0o700)
        (foreign / LOCK_NAME).write_bytes(b"")
        (foreign / "1.spill").write_bytes(b"theirs")
        for path in (foreign / LOCK_NAME, foreign / "1.spill", foreign):
            os.chown(path, 65534, 65534)
    with _caller_mid_spill(root) as (live, live_name), \
            _caller_mid_spill(root) as (dead, dead_name):
        dead_files = os.listdir(root / dead_name)
        assert len(dead_files) >= 2  # its lock, a spilled value, the one half written
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(timeout=60)
        assert (root / dead_name).is_dir()  # a SIGKILL leaves it
        dsk, key = _held_graph()
        with dask.config.set({"localsched.memory.spill": True,
                              "localsched.memory.spill-directory": str(root)}):
            assert get_sync(dsk, key, memory_limit="12MB") == get_sync(dsk, key)
        assert not (root / dead_name).exists()
        assert (root / live_name).is_dir() and len(os.listdir(root / live_name)) >= 2
        if foreign is not None:
            assert sorted(os.listdir(foreign)) == sorted([LOCK_NAME, "1.spill"])
        live.stdin.write("\n")  # the live computation goes on, and cleans up after itself
        live.stdin.flush()
        assert live.wait(timeout=120) == 0, live.stderr.read()
    assert _spill_dirs(root) == ({foreign.name} if foreign is not None else set())


# -- batches under an armed budget -----------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["threads", "processes"])
def test_an_armed_budget_still_batches_what_fits(name, monkeypatch):
    """Once a budget counts, a batch keeps taking tasks whose expected
    results fit below ``pause`` (it used to take one task each: every
    hand-off a round trip, on processes 2.7-7x dask's time); none is taken
    that would read a spilled input."""
    from localsched.multiprocessing import get as mp_get
    from localsched.run.batching import Planner

    sizes: list = []
    next_batch = Planner.next_batch

    def recorded(self, spare=0):
        batch = next_batch(self, spare)
        sizes.append(len(batch))
        return batch

    monkeypatch.setattr(Planner, "next_batch", recorded)
    monkeypatch.setattr(budget, "ARM", 0)  # counting from the first task
    monkeypatch.setattr(budget.Budget, "_real_memory", lambda self: 10**9)  # (flat)
    n = 400
    dsk = {("c", 0): (np.zeros, 1000)}
    dsk.update({("c", i): (np.add, ("c", i - 1), 1.0) for i in range(1, n)})  # 8 kB results
    get = threaded_get if name == "threads" else mp_get
    result = get(dsk, ("c", n - 1), num_workers=1, memory_limit="100MB")
    assert result[0] == n - 1
    assert max(sizes) > 1 and len(sizes) < n / 2, sizes
