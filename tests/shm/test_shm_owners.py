"""What becomes of shared memory when its owner -- the process whose
scheduler runs the computation -- goes: interrupted, killed outright, or
gone before a worker of its pool held its lock; and what owners that are
gone left, found by name (POSIX objects cannot be listed).  Each test runs
on every kind of segment (tests/support/shm_kinds.py)."""

from __future__ import annotations

import os
import pickle
import threading
import time

import numpy as np
import pytest

from localsched._shm import store as segments
from localsched._shm import transport as shm
from localsched.system.platform import LOCK_EX, LOCK_UN, flock
from tests.support import shm_kinds
from tests.support.macos_sim import objects_of
from tests.support.platform_marks import needs_posix_signals
from tests.support.shm_kinds import SIMULATES, backing, make, platform_now, pools, store_now, writer

# The autouse fixtures: each test runs on every kind of segment, and leaves none.
segment_kind, clean_shm = shm_kinds.segment_kind, shm_kinds.clean_shm


# -- the scheduler's process itself ends -------------------------------------------

_SCRIPT = """
import os, signal, sys, numpy as np
from localsched.callbacks import Callback
from localsched.multiprocessing import default_pool, get

def stop(key, result, dsk, state, worker_id):
    if len(state.finished) == 4:
        print(os.getpid(), *default_pool(2).pids, flush=True)
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))

dsk = {f"a{i}": (np.full, 200_000, i) for i in range(30)}
dsk["out"] = (len, [f"a{i}" for i in range(30)])
get(dsk, "out", num_workers=2, chunksize=1, callbacks=[Callback(posttask=stop)])
"""


@needs_posix_signals
@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_a_scheduler_interrupted_or_killed_leaves_nothing_behind(how):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _SCRIPT, how], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    import psutil

    pid, *workers = map(int, proc.stdout.split())
    # Its workers die with it (PDEATHSIG, lifeline); wait until they have
    # (the 60 s are for a loaded machine, not a bound).
    _, alive = psutil.wait_procs([p for p in map(_process, workers) if p is not None],
                                 timeout=60)
    assert not alive, alive
    if how == "SIGINT":  # Ctrl-C: the process cleans up on its way out
        assert "KeyboardInterrupt" in proc.stderr
        assert not shm.live_segments(pids=[pid])  # (the script's: this machine's kind)
    else:  # killed outright: its reaper removes what it held (nothing here sweeps)
        deadline = time.monotonic() + 60
        while shm.live_segments(pids=[pid]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not shm.live_segments(pids=[pid])


def _process(pid: int):
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


# -- a worker whose owner is gone before it held the owner's lock ------------------
#
# A worker takes its owner's lock with its first job.  If the owner was
# killed meanwhile and its reaper has run, nothing would ever remove what
# the job wrote: the worker must write no segment (its values take the
# pipe, which fails at once if the owner is really gone).


def _owner_lock_path() -> str:
    store = store_now()
    if store.lock_path is None:
        pytest.skip("Windows frees a dead owner's mappings itself: no owner lock")
    return store.lock_path


def test_a_worker_writes_no_segment_for_an_owner_whose_lock_file_is_gone():
    """The owner's lock file removed (as its reaper does once it is gone):
    a fresh worker's result takes the pipe -- the same graph travels in a
    segment once the file is back."""
    lock = _owner_lock_path()
    dsk = {"big": (make, "f8")}
    os.rename(lock, lock + ".away")
    try:
        without = pools().get(dsk, "big", num_workers=1)
    finally:
        os.rename(lock + ".away", lock)
    with_lock = pools().get(dsk, "big", num_workers=1)
    np.testing.assert_array_equal(without, make("f8"))
    np.testing.assert_array_equal(with_lock, make("f8"))
    assert backing(without) != "mmap", backing(without)
    assert backing(with_lock) == "mmap", backing(with_lock)


def test_a_lock_file_removed_while_the_worker_waits_for_it_is_not_held():
    """The reaper holds the lock exclusively while it removes what the owner
    left, then the lock file: a worker that opened the file before and waits
    for a shared lock gets one on a file that is gone -- which must not
    count as holding its owner's lock."""
    side = shm.WorkerSide(platform_now())
    side.kind = segment_kind = type(side.kind)()  # (a kind object of this test's own)
    if not segment_kind.owner_lock:
        pytest.skip("Windows frees a dead owner's mappings itself: no owner lock")
    owner = segment_kind.owner_label(_unused_pid())  # (an owner of the test's own)
    path = os.path.join(segment_kind.directory, f"{segment_kind.prefix}{owner}.lock")
    prefix = f"{segment_kind.prefix}{owner}-1-1-"
    reaper = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    opened, asked = segment_kind.open_lock, threading.Event()

    def open_lock(owner):
        fd = opened(owner)
        asked.set()  # (the worker's side has the file open, and asks for the lock)
        return fd

    segment_kind.open_lock = open_lock  # (this object's alone)
    held: list = []
    try:
        flock(reaper, LOCK_EX)
        worker = threading.Thread(target=lambda: held.append(side.hold_owner_lock(prefix)))
        worker.start()
        assert asked.wait(30)
        os.unlink(path)  # the reaper removes the lock file, then lets go
        flock(reaper, LOCK_UN)
        worker.join(30)
        assert held == [False]
        assert owner not in side.owner_locks
        # A live owner's lock file is held (the control).
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
        assert side.hold_owner_lock(prefix) is True
        assert owner in side.owner_locks
    finally:
        os.close(reaper)
        fd = side.owner_locks.pop(owner, None)
        if fd is not None:
            os.close(fd)
        if os.path.exists(path):
            os.unlink(path)


# -- owners that are gone, and names (both kinds; POSIX objects cannot be listed) ---


def _dead_owner_segment(segment_kind) -> tuple[str, str]:
    """A segment of an owner that is gone (its lock file held by no one,
    its reaper never ran), made as that owner would: ``(name, lock path)``."""
    owner = segment_kind.owner_label(_unused_pid())
    lock = os.path.join(segment_kind.directory, f"{segment_kind.prefix}{owner}.lock")
    os.close(os.open(lock, os.O_CREAT | os.O_WRONLY, 0o600))
    name = f"{segment_kind.prefix}{owner}-1-1-0"
    segments.write_segment(segment_kind, name, [memoryview(make("f8"))], 0)
    return name, lock


def _unused_pid() -> int:
    import psutil

    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid -= 1
    return pid


def test_what_a_dead_owner_left_is_swept_by_the_next_store():
    segment_kind = store_now().kind
    if not segment_kind.owner_lock:
        pytest.skip("Windows frees a dead owner's mappings itself")
    name, lock = _dead_owner_segment(segment_kind)
    try:
        assert segment_kind.size(name) >= make("f8").nbytes
        assert segments.sweep_stale(segment_kind) >= 1
        with pytest.raises(FileNotFoundError):
            segment_kind.size(name)
        assert not os.path.exists(lock)
    finally:
        segment_kind.unlink(name)
        if os.path.exists(lock):
            os.unlink(lock)


def test_posix_object_names_fit_macos_31_characters(segment_kind):
    if segment_kind != "posix":
        pytest.skip("POSIX objects' names")
    from localsched._shm.kinds import PosixObjects

    kind = PosixObjects()
    owner = kind.owner_label(4_194_304)  # (Linux's largest pid)
    longest = f"/{kind.prefix}{owner}-{kind.number_text(36 ** 2 - 1)}-" \
              f"{kind.number_text(2 ** 31)}-{kind.number_text(36 ** 2 - 1)}"
    assert len(longest) <= 31, longest


def test_posix_journal_is_compacted_when_no_computation_runs(segment_kind):
    if segment_kind != "posix":
        pytest.skip("POSIX objects' journal")
    from localsched._shm.kinds import JOURNAL_COMPACT, JOURNAL_SUFFIX

    store = store_now()
    journal = os.path.join(store.kind.directory, f"{store.prefix[:-1]}{JOURNAL_SUFFIX}")
    for i in range(JOURNAL_COMPACT // 16):  # names of objects long gone
        store.kind.register(f"{store.prefix}9-9-{i}")
    kept = shm.share(make("f8"), writer(store.job_prefix(9, 10)))
    handle = shm.SharedValue(kept.name, kept.size, kept.meta, kept.layout, store)
    assert os.path.getsize(journal) > JOURNAL_COMPACT
    store.begin()
    store.end()  # the last computation ended: the journal keeps what exists
    with open(journal) as f:
        assert f.read().split() == [kept.name]
    np.testing.assert_array_equal(handle.load(), make("f8"))
    handle.release()


def test_simulated_named_mappings_live_exactly_while_held(segment_kind):
    """The Windows simulation keeps Windows' rule (two kind objects stand in
    for two processes: each holds its own handles): a mapping lives while
    any holder keeps it and is gone with the last, so opening it then fails
    as on Windows; and a writer's results survive its letting go only once
    the owner has adopted them."""
    if segment_kind != "named" or not SIMULATES:
        pytest.skip("Windows' named mappings (simulated)")
    from tests.support.windows_sim import SimulatedNamedMappings

    writer, owner = SimulatedNamedMappings(), SimulatedNamedMappings()
    name = f"{writer.prefix}{writer.owner_label(os.getpid())}-9-9-0"
    writer.done_writing(writer.create(name, 4096))
    writer.write(name, 4096, ((0, 4),), [b"abcd"])
    owner.adopt(name)
    writer.let_go([name])  # (the pool read the job to its end)
    assert bytes(owner.read_private(name, 4096)[:4]) == b"abcd"
    owner.unlink(name)  # the last holder: gone
    with pytest.raises(FileNotFoundError):
        owner.read_private(name, 4096)
    assert name not in objects_of(os.getpid())

    # Let go before the owner adopted: lost, as it would be on Windows.
    writer.done_writing(writer.create(name, 4096))
    writer.let_go([name])
    owner.adopt(name)
    with pytest.raises(FileNotFoundError):
        owner.read_private(name, 4096)


# -- the edges of the owner lock and the journal (issue #35) --------------------------


def _fork_and_look_for_lock_files(_a) -> list:
    """(a task) Fork a child, as a task's own multiprocessing would, and
    report which lock files the child holds open."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        held = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.endswith(".lock"):
                held.append(target)
        os.write(write, "\n".join(held).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return [line for line in out.split("\n") if line]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="/proc/self/fd")
def test_a_process_forked_in_a_worker_holds_no_owner_lock():
    """A worker holds its owner's lock (the owner counts as alive while it
    may write segments); a process a task forks from it must not: it would
    keep a dead owner's segments from ever being reaped while it lives."""
    dsk = {"a": (make, "f8"), "b": (_fork_and_look_for_lock_files, "a")}
    assert pools().get(dsk, "b", num_workers=1, chunksize=1) == []


def test_posix_journal_compaction_keeps_a_name_written_meanwhile(segment_kind, monkeypatch):
    """A worker may make an object while its owner compacts the journal
    (a computation abandoned after an error still runs its jobs): its name
    must survive the compaction, or a later kill leaks the object."""
    if segment_kind != "posix":
        pytest.skip("POSIX objects' journal")
    from localsched._shm.kinds import JOURNAL_COMPACT, JOURNAL_SUFFIX

    store = store_now()
    kind = store.kind
    journal = os.path.join(kind.directory, f"{store.prefix[:-1]}{JOURNAL_SUFFIX}")
    for i in range(JOURNAL_COMPACT // 16):  # names of objects long gone
        kind.register(f"{store.prefix}9-9-{i}")
    made: list = []
    job_writer = writer(store.job_prefix(9, 11))

    def worker_writes():
        made.append(shm.share(make("f8"), job_writer))

    looked = kind.open_for_reading
    started: list = []

    def look_and_let_a_worker_write(name):
        if not started:  # the compaction has read the journal: a worker writes now
            started.append(threading.Thread(target=worker_writes))
            started[0].start()
            started[0].join(timeout=2)  # (it may have to wait for the compaction)
        return looked(name)

    kind.open_for_reading = look_and_let_a_worker_write  # (this object's alone)
    try:
        store.begin()
        store.end()
    finally:
        del kind.open_for_reading
    started[0].join(timeout=30)
    (value,) = made
    with open(journal) as f:
        assert value.name in f.read().split()
    shm.SharedValue(value.name, value.size, value.meta, value.layout, store).release()


def test_the_owner_rewrites_a_free_segment_through_the_descriptor_it_holds():
    """A released segment waits in the free list under its own name, held
    by a descriptor of the owner's; the owner's next job input rewrites it
    in place through that descriptor (never renamed, never reopened by
    name), and the worker reads the new value."""
    from localsched._shm import oob

    store = store_now()
    if not store.kind.reuse:
        pytest.skip("no free list for this kind")
    store.begin()
    try:
        first = shm.share(make("f8"), writer(store.job_prefix(9, 20)))
        shm.SharedValue(first.name, first.size, first.meta, first.layout, store).release()
        assert first.name in store.free
        new = make("f8") + 1
        body, handle = oob.dumps_job(("args", new), store.job_prefix(9, 21), pickle.dumps, store)
        assert handle is not None and handle.name == first.name  # (reused in place)
        _, value = oob.loads_job(body, store.kind)
        np.testing.assert_array_equal(value, new)
        handle.release()
    finally:
        store.end()
