"""The spill store (``localsched.run.spill``): values round-trip, the private
directory is made, kept closed and removed on every exit path, a killed
owner's directory is reaped by the next store and nothing else is, and a
disk that refuses bytes gives one clear ``SpillError`` with the value kept.

Processes that own a store in these tests print their directory and then
block on their stdin, so the test acts (SIGINT, SIGKILL) on a known state,
never after a sleep.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import pickle
import re
import signal
import stat
import subprocess
import sys
import textwrap
import time
import tracemalloc
import uuid

import numpy as np
import pandas as pd
import pytest

from localsched.run import spill
from localsched.run.budget_record import BudgetRecord
from localsched.run.spill import (
    LOCK_NAME,
    LOCKLESS_GRACE,
    PREFIX,
    SpillError,
    SpillStore,
    reap_stale,
)
from tests.support.platform_marks import kill_session, needs_fork, needs_posix_signals

#: POSIX owners and modes (Windows has neither: the temp directory is the user's own).
needs_posix_owners = pytest.mark.skipif(not hasattr(os, "geteuid"),
                                        reason="POSIX file owners and modes")
needs_fifos_and_links = pytest.mark.skipif(not hasattr(os, "mkfifo"),
                                           reason="fifos and symbolic links to plant")


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "spillroot"
    r.mkdir()
    return str(r)


@pytest.fixture
def store(root):
    s = SpillStore(root)
    yield s
    s.close()


def _spill_dirs(root: str) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith(PREFIX))


# -- round trips -------------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    np.arange(100_000, dtype="f8"),
    np.arange(12).reshape(3, 4)[:, ::2],  # not contiguous: pickled in-band
    np.array(3.5),
    np.array(["a", None, 3], dtype=object),
    np.zeros((0, 5), dtype="i4"),
    np.asfortranarray(np.arange(20.).reshape(4, 5)),
])
def test_numpy_round_trip(store, value):
    store.put(7, value)
    back = store.get(7)
    assert back.dtype == value.dtype and back.shape == value.shape
    assert back.flags.f_contiguous == value.flags.f_contiguous
    np.testing.assert_array_equal(back, value)


def test_arrays_come_back_in_fresh_buffers_as_writable_as_they_went(store):
    a = np.arange(1000.0)
    store.put(1, a)
    b = store.get(1)
    b[0] = 42.0  # fresh buffers, not the caller's nor the file's
    assert a[0] == 0.0 and store.get(1)[0] == 0.0
    a.flags.writeable = False
    store.put(2, a)
    assert not store.get(2).flags.writeable


def test_pandas_round_trip(store):
    df = pd.DataFrame({"x": np.arange(10_000), "y": np.random.default_rng(0).random(10_000),
                       "s": ["a", "b"] * 5_000,
                       "c": pd.Categorical(["u", "v"] * 5_000)},
                      index=pd.date_range("2026-01-01", periods=10_000, freq="s"))
    store.put(1, df)
    pd.testing.assert_frame_equal(store.get(1), df)
    store.put(2, df["y"])
    pd.testing.assert_series_equal(store.get(2), df["y"])


def test_plain_objects_and_cloudpickle_fallback(store):
    value = {"a": [1, 2.5, "x"], "b": (None, b"bytes" * 100), "c": {1, 2}}
    store.put(1, value)
    assert store.get(1) == value
    store.put(2, lambda x: x + 1)  # plain pickle refuses a lambda
    assert store.get(2)(1) == 2


def test_bytes_accounting_replace_and_drop(store):
    n1 = store.put(1, np.zeros(1000))
    n2 = store.put(2, np.zeros(2000))
    assert n1 > 8000 and n2 > 16000
    assert store.spilled_bytes == n1 + n2 and len(store) == 2 and 1 in store
    n1b = store.put(1, np.zeros(10))
    assert store.spilled_bytes == n1b + n2
    np.testing.assert_array_equal(store.get(1), np.zeros(10))
    store.drop(1)
    store.drop(1)  # again: nothing
    assert store.spilled_bytes == n2 and 1 not in store
    assert os.listdir(store.directory) == [LOCK_NAME, "2.spill"] or \
        sorted(os.listdir(store.directory)) == sorted([LOCK_NAME, "2.spill"])
    with pytest.raises(KeyError):
        store.get(1)


def test_events_use_distributed_activity_names(store):
    n = store.put(3, np.zeros(100))
    store.get(3)
    (w0, w1, wa, wk, wn), (r0, r1, ra, rk, rn) = store.events
    assert (wa, wk, wn) == ("disk-write", 3, n) and (ra, rk, rn) == ("disk-read", 3, n)
    assert w0 <= w1 <= r0 <= r1


def test_put_makes_no_copy_of_large_buffers(store):
    """The array's bytes go from its own buffer to the file: what put
    allocates is tiny next to the array; get allocates the array once."""
    a = np.ones(4_000_000)  # 32 MB
    tracemalloc.start()
    try:
        store.put(1, a)
        _, put_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        b = store.get(1)
        _, get_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert put_peak < 1_000_000
    assert get_peak < a.nbytes + 1_000_000
    assert b.sum() == a.sum()


# -- the directory ----------------------------------------------------------------------

@needs_posix_owners
def test_directory_is_private_made_on_first_put_and_removed_by_close(root):
    s = SpillStore(root)
    assert s.directory is None and _spill_dirs(root) == []  # nothing before a spill
    s.put(1, b"x" * 100)
    st = os.lstat(s.directory)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == os.geteuid()
    assert os.path.dirname(s.directory) == root
    assert stat.S_IMODE(os.stat(os.path.join(s.directory, "1.spill")).st_mode) == 0o600
    path = s.directory
    s.close()
    assert not os.path.exists(path) and s.directory is None
    s.close()  # idempotent
    with pytest.raises(ValueError):
        s.put(2, 1)


def test_two_stores_two_directories(root):
    with SpillStore(root) as a, SpillStore(root) as b:
        a.put(1, 1)
        b.put(1, 2)
        assert a.directory != b.directory and a.get(1) == 1 and b.get(1) == 2
    assert _spill_dirs(root) == []


def test_default_root_is_the_temp_directory_read_at_call_time(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with SpillStore() as s:
        s.put(1, 1)
        assert os.path.dirname(s.directory) == str(tmp_path)


def test_dropped_store_removes_its_directory(root):
    s = SpillStore(root)
    s.put(1, np.zeros(10))
    path = s.directory
    del s
    gc.collect()
    assert not os.path.exists(path)


def test_failure_in_callers_finally_removes_the_directory(root):
    s = SpillStore(root)
    with pytest.raises(RuntimeError):
        try:
            s.put(1, np.zeros(10))
            raise RuntimeError("a task failed")
        finally:
            s.close()
    assert _spill_dirs(root) == []


_OWNER = textwrap.dedent("""
    import sys
    import numpy as np
    from localsched.run.spill import SpillStore
    store = SpillStore(sys.argv[1])
    store.put(1, np.zeros(100_000))
    {body}
""")


def _owner(root: str, body: str) -> subprocess.Popen:
    code = _OWNER.format(body=textwrap.indent(textwrap.dedent(body), "").strip())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen([sys.executable, "-c", code, root], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)


@contextlib.contextmanager
def _running(root: str, body: str):
    p = _owner(root, body)
    try:
        line = p.stdout.readline().strip()
        assert line.startswith(root), p.stderr.read()
        yield p, line
    finally:
        kill_session(p)
        p.wait(timeout=60)


_WAIT_IN_FINALLY = """
try:
    print(store.directory, flush=True)
    sys.stdin.readline()
finally:
    store.close()
"""

_WAIT_NO_FINALLY = """
print(store.directory, flush=True)
sys.stdin.readline()
"""


@needs_posix_signals
@pytest.mark.parametrize("body", [_WAIT_IN_FINALLY, _WAIT_NO_FINALLY],
                         ids=["callers-finally", "finalizer-at-exit"])
def test_ctrl_c_removes_the_directory(root, body):
    with _running(root, body) as (p, path):
        assert os.path.isdir(path)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert "KeyboardInterrupt" in err
    assert not os.path.exists(path) and _spill_dirs(root) == []


@needs_posix_signals
def test_sigkilled_owner_is_reaped_by_the_next_store_live_owner_is_not(root):
    with _running(root, _WAIT_NO_FINALLY) as (live, live_path), \
            _running(root, _WAIT_NO_FINALLY) as (dead, dead_path):
        dead.send_signal(signal.SIGKILL)
        dead.wait(timeout=60)
        assert os.path.isdir(dead_path)  # a SIGKILL leaves it
        with SpillStore(root) as s:
            s.put(1, 1)  # the first put reaps
            assert not os.path.exists(dead_path)
            assert os.path.isdir(live_path) and os.path.exists(
                os.path.join(live_path, "1.spill"))
            assert sorted(_spill_dirs(root)) == sorted(
                os.path.basename(p) for p in (live_path, s.directory))


@needs_fork
def test_forked_child_never_removes_its_parents_directory(store):
    store.put(1, np.zeros(10))
    pid = os.fork()
    if pid == 0:  # the child drops its copy and exits normally (finalizers run)
        try:
            store.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.path.isdir(store.directory)
    np.testing.assert_array_equal(store.get(1), np.zeros(10))


# -- reaping touches nothing else ---------------------------------------------------

def test_lockless_directory_reaped_only_when_old(root):
    young = os.path.join(root, PREFIX + "young")
    old = os.path.join(root, PREFIX + "old")
    for d in (young, old):
        os.mkdir(d, 0o700)
        open(os.path.join(d, "1.spill"), "wb").close()
    past = time.time() - LOCKLESS_GRACE - 60
    os.utime(old, (past, past))
    assert reap_stale(root) == 1
    assert os.path.isdir(young) and not os.path.exists(old)


@needs_fifos_and_links
def test_planted_names_are_neither_followed_deleted_nor_waited_on(root, tmp_path):
    # a directory elsewhere that looks dead (an unlocked lock file)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / LOCK_NAME).write_bytes(b"")
    (victim / "precious").write_bytes(b"keep me")
    os.symlink(victim, os.path.join(root, PREFIX + "link"))
    os.mkfifo(os.path.join(root, PREFIX + "fifo"))
    open(os.path.join(root, PREFIX + "file"), "wb").close()
    # a spill directory whose lock file is a link to a dead-looking lock
    linked = os.path.join(root, PREFIX + "linkedlock")
    os.mkdir(linked, 0o700)
    os.symlink(victim / LOCK_NAME, os.path.join(linked, LOCK_NAME))
    # a spill directory whose lock file is a fifo (opening it must not block)
    fifo_lock = os.path.join(root, PREFIX + "fifolock")
    os.mkdir(fifo_lock, 0o700)
    os.mkfifo(os.path.join(fifo_lock, LOCK_NAME))
    foreign = None
    if os.geteuid() == 0:  # a directory of another user, dead-looking
        foreign = os.path.join(root, PREFIX + "foreign")
        os.mkdir(foreign, 0o700)
        open(os.path.join(foreign, LOCK_NAME), "wb").close()
        os.chown(os.path.join(foreign, LOCK_NAME), 65534, 65534)
        os.chown(foreign, 65534, 65534)
    before = sorted(os.listdir(root))
    assert reap_stale(root) == 0
    assert sorted(os.listdir(root)) == before
    assert (victim / "precious").read_bytes() == b"keep me"
    assert os.path.exists(os.path.join(linked, LOCK_NAME))
    if foreign is not None:
        assert os.listdir(foreign) == [LOCK_NAME]
    with SpillStore(root) as s:  # and a store still works beside them
        s.put(1, 1)
        assert s.get(1) == 1


# -- the disk refuses ---------------------------------------------------------------

@contextlib.contextmanager
def _tmpfs(path: str, size: str, options: str = ""):
    os.makedirs(path, exist_ok=True)
    opts = f"size={size}" + (f",{options}" if options else "")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", path],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], check=False)


@pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"),
                    reason="mounting a small tmpfs needs root on Linux")
def test_full_disk_gives_one_clear_error_and_keeps_the_value(tmp_path):
    with _tmpfs(str(tmp_path / f"small-{uuid.uuid4().hex}"), "1m") as small:
        with SpillStore(small) as s:
            s.put(1, np.zeros(1000))
            a = np.arange(1_000_000, dtype="f8")  # 8 MB: does not fit
            with pytest.raises(SpillError) as info:
                s.put(2, a)
            e = info.value
            assert isinstance(e, OSError) and e.errno == errno.ENOSPC
            assert re.search(rf"cannot spill 8000\d\d\d bytes to {re.escape(s.directory)}",
                             str(e)), str(e)
            assert a[-1] == 999_999.0  # the caller still has it
            assert sorted(os.listdir(s.directory)) == sorted([LOCK_NAME, "1.spill"])
            assert 2 not in s
            np.testing.assert_array_equal(s.get(1), np.zeros(1000))
            s.put(3, "still works")
            assert s.get(3) == "still works"
        assert _spill_dirs(small) == []


@pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"),
                    reason="mounting a read-only tmpfs needs root on Linux")
def test_read_only_disk_gives_a_spill_error_naming_the_place(tmp_path):
    with _tmpfs(str(tmp_path / f"ro-{uuid.uuid4().hex}"), "1m", "ro") as ro:
        s = SpillStore(ro)
        with pytest.raises(SpillError) as info:
            s.put(1, np.zeros(10))
        assert info.value.errno == errno.EROFS and ro in str(info.value)
        s.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="RLIMIT_FSIZE in a child")
def test_file_size_limit_gives_spill_error_in_a_child(root):
    """Where no tmpfs can be mounted: RLIMIT_FSIZE makes the disk refuse."""
    code = textwrap.dedent("""
        import resource, sys, os
        import numpy as np
        from localsched.run.spill import SpillStore, SpillError
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
        s = SpillStore(sys.argv[1])
        a = np.ones(1_000_000)
        try:
            s.put(1, a)
        except SpillError as e:
            print("SpillError", e.errno, s.directory in str(e), os.listdir(s.directory),
                  a.sum())
        s.close()
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.stdout.split(maxsplit=1) == ["SpillError",
                                          f"{errno.EFBIG} True ['{LOCK_NAME}'] 1000000.0\n"], \
        r.stderr
    assert _spill_dirs(root) == []


def test_cap_on_spilled_bytes(root):
    with SpillStore(root, max_bytes=100_000) as s:
        n = s.put(1, np.zeros(5_000))  # 40 kB
        a = np.zeros(10_000)
        with pytest.raises(SpillError) as info:
            s.put(2, a)
        message = str(info.value)
        assert s.directory in message and "100000" in message and str(n) in message
        assert s.spilled_bytes == n and 2 not in s
        assert sorted(os.listdir(s.directory)) == sorted([LOCK_NAME, "1.spill"])
        s.drop(1)
        s.put(2, a)  # room again
        assert s.spilled_bytes <= 100_000


def test_unwritable_root_gives_spill_error(tmp_path):
    missing = str(tmp_path / "no" / "such")
    with pytest.raises(SpillError) as info:
        SpillStore(missing).put(1, 1)
    assert missing in str(info.value)


def test_unpicklable_value_raises_pickles_error_and_leaves_nothing(store):
    import threading

    with pytest.raises((TypeError, pickle.PicklingError)):
        store.put(1, threading.Lock())
    assert 1 not in store and store.spilled_bytes == 0


# -- where the platform has no *at calls, writev or flock (Windows) ----------------

@pytest.fixture
def portable(monkeypatch):
    """The store as it runs on Windows: directories by path, one write per
    buffer (simulated here: the checks that stay are the platform's own)."""
    monkeypatch.setattr(spill, "_AT", False)
    monkeypatch.setattr(spill, "_WRITEV", False)


def test_portable_path_round_trips_and_cleans_up(root, portable):
    df = pd.DataFrame({"x": np.arange(1000), "s": ["a"] * 1000})
    with SpillStore(root) as s:
        s.put(1, np.arange(100_000.0))
        s.put(2, df)
        s.put(3, {"k": b"v" * 10})
        np.testing.assert_array_equal(s.get(1), np.arange(100_000.0))
        pd.testing.assert_frame_equal(s.get(2), df)
        assert s.get(3) == {"k": b"v" * 10}
        s.drop(1)
        assert sorted(os.listdir(s.directory)) == sorted([LOCK_NAME, "2.spill", "3.spill"])
    assert _spill_dirs(root) == []


@needs_posix_signals
@needs_fifos_and_links
def test_portable_reaper_without_file_locks_takes_a_removable_lock_as_a_dead_owner(
        root, portable, monkeypatch):
    with _running(root, _WAIT_NO_FINALLY) as (dead, dead_path):
        dead.send_signal(signal.SIGKILL)
        dead.wait(timeout=60)
    # (on Windows the lock file of a live owner cannot be removed; here the
    # owner is dead, and its lock file goes, then its directory)
    monkeypatch.setattr(spill, "FILE_LOCKS", False)
    link = os.path.join(root, PREFIX + "link")
    os.symlink(dead_path, link)
    assert reap_stale(root) == 1
    assert not os.path.exists(dead_path) and os.path.islink(link)


def test_write_all_handles_partial_writes_and_many_buffers(tmp_path, monkeypatch):
    """writev may write less than asked (a signal, a pipe, 2 GiB per call):
    every byte still lands once, in order."""
    real = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, bufs: real(fd, bufs[:1] if len(bufs) > 1
                                                           else [bufs[0][:7]]))
    views = [memoryview(bytes([i % 256]) * (i % 97 + 1)) for i in range(2000)]
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        spill._write_all(fd, views)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(bytes(v) for v in views)


# -- the record the diagnostics read -----------------------------------------------

def test_budget_record_totals():
    r = BudgetRecord(limit=100, target=60, pause=80,
                     timeline=[(0.0, 10, 0), (1.0, 70, 20), (2.0, 50, 40)],
                     events=[(0.5, 0.7, "disk-write", "a", 20), (1.0, 1.5, "disk-write", "b", 20),
                             (1.6, 1.7, "disk-read", "a", 20)])
    assert r.spilled_bytes() == 40 and r.peak_held() == 70 and r.peak_spilled() == 40
    assert r.disk_seconds() == pytest.approx(0.8)
    assert r.paused_seconds == 0.0
