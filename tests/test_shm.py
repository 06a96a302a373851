"""Zero-copy transport through shared memory (localsched/_pool/shm.py, #10).

Every test runs on real worker processes and checks, through an autouse
fixture, that no localsched segment of this process is left in /dev/shm
once the shared pools are stopped; several also check right after a
computation returns, with the pool still up.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from localsched import _platform, batching
from localsched import multiprocessing as lmp
from localsched._pool import segments, shm
from localsched.callbacks import Callback
from tests.macos_sim import end_simulation, objects_of, simulate_macos
from tests.platform_marks import needs_posix_signals
from tests.windows_sim import simulate_windows

# This platform's own kind runs natively (macOS: posix, Windows: named);
# Linux also simulates the other two.
_KIND_HERE = _platform.shared_memory_kind()
# (a whole run under LOCALSCHED_SIMULATE_WINDOWS=1 counts as Windows)
NATIVE_KIND = "named" if _KIND_HERE == "named-simulated" else _KIND_HERE
SIMULATES = sys.platform.startswith("linux") and NATIVE_KIND == "files"

BIG = 200_000  # elements: above the 64 KiB threshold for every dtype

# Every test runs on each kind of segment: files in /dev/shm (Linux), POSIX
# objects (macOS, simulated: tests/macos_sim.py) and named mappings (Windows,
# simulated with the rest of Windows' process pool: tests/windows_sim.py).
# All live in Linux's /dev/shm, where ``mine()`` counts them.
files_only = pytest.mark.files_only  # (free room, /proc: what the files kind alone has)


def released() -> bool:
    """Whether this process's segments are all gone.  At once for files and
    POSIX objects, released as the computation returns; for named mappings
    once each worker has let go of what it wrote (``named_mappings``: the
    pool tells it to as it reads the worker's last message), a moment later."""
    if _kind_now[0] == "named":
        deadline = time.monotonic() + 10
        while mine() and time.monotonic() < deadline:
            time.sleep(0.01)
    return not mine()


_kind_now = ["files"]


def mine() -> dict:
    """This process's localsched segments now, as the store sees them and,
    where it cannot list them (POSIX objects), as /dev/shm shows them."""
    found = dict(shm.live_segments(pids=[os.getpid()]))
    found.update(dict.fromkeys(objects_of(os.getpid()), -1))
    return found


@pytest.fixture(autouse=True, params=["files", "posix", "named"])
def segment_kind(request, monkeypatch):
    param = request.param
    native = NATIVE_KIND == param
    if not native and not (SIMULATES and param != "files"):
        pytest.skip(f"the {param} kind: native elsewhere, simulated on Linux only")
    if param != "files" and request.node.get_closest_marker("files_only"):
        pytest.skip("the files kind's own behaviour")
    if not native:
        (simulate_macos if param == "posix" else simulate_windows)(monkeypatch)
    _kind_now[0] = param
    yield param
    if not native:
        end_simulation()


@pytest.fixture(autouse=True)
def clean_shm(segment_kind, monkeypatch):
    for var in ("LOCALSCHED_SHM", "LOCALSCHED_SHM_THRESHOLD", "LOCALSCHED_SHM_RESERVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(segments, "_warned", False)
    lmp.shutdown()  # workers start with this test's environment
    before = mine()
    yield
    lmp.shutdown()  # (kills what an aborted computation left running, sweeps)
    left = set(mine()) - set(before)
    assert not left, f"segments left in {shm.SHM_DIR}: {sorted(left)}"


# -- tasks (module level: workers import them) -------------------------------------


def make(dtype: str, n: int = BIG):
    return (np.arange(n) % 120).astype(dtype)


def backing(a) -> str:
    """What an array's memory belongs to: 'mmap' when it points into a
    mapped segment (Python's mmap in a worker, a descriptor-less mapping in
    the caller), else the owner's type (or 'own')."""
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, np.ndarray):
        return "own"
    if isinstance(base, memoryview):
        if isinstance(base.obj, (mmap.mmap, ctypes.Array)):
            return "mmap"
        return type(base.obj).__name__
    return type(base).__name__


def described(a):
    """The array back (so the result still travels) and how it arrived."""
    return backing(a), a


def bump_in_place(a):
    a += 1  # a private copy-on-write page: nobody else sees this
    return int(a[0])


def first(a):
    return int(a[0])


def die(_):
    import psutil

    psutil.Process().kill()  # (SIGKILL; TerminateProcess on Windows)


def boom(_):
    raise ValueError("boom")


def slow_big(i):
    time.sleep(0.02)
    return np.full(BIG, i, dtype="f8")


def medium_big(i):
    time.sleep(0.005)
    return np.full(BIG, i, dtype="f8")


def first_of_sum(a, b):
    return int(a[0] + b[0])


def get(dsk, keys, **kw):
    kw.setdefault("num_workers", 2)
    kw.setdefault("chunksize", 1)  # every task its own batch: results travel
    return lmp.get(dsk, keys, **kw)


# -- round trips -------------------------------------------------------------------

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "longdouble", "complex64", "complex128",
          "clongdouble", "datetime64[ns]", "timedelta64[s]", "U3", "S2"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_arrays_of_every_dtype_reach_the_next_worker_mapped_not_copied(dtype):
    dsk = {"a": (make, dtype), "b": (described, "a")}
    (how, b), a = get(dsk, ["b", "a"])
    assert how == "mmap"  # the consumer's input points into the segment
    np.testing.assert_array_equal(b, make(dtype))
    np.testing.assert_array_equal(a, make(dtype))
    assert a.dtype == np.dtype(dtype)
    assert released()  # released as soon as the computation returned


def test_outputs_are_the_callers_own_writable_arrays():
    a = get({"a": (make, "f8")}, "a")
    assert backing(a) == "mmap" and a.flags.writeable
    a[:] = 7  # copy-on-write: touches nothing shared
    assert (a == 7).all()
    assert released()


def test_a_task_writing_into_its_input_changes_no_other_tasks_input():
    dsk = {"a": (make, "i8"), "b": (bump_in_place, "a"), "c": (first, "a"),
           "d": (bump_in_place, "a")}
    assert get(dsk, ["b", "c", "d", "a"])[:3] == (1, 0, 1)


def test_non_contiguous_zero_size_and_object_arrays_arrive_intact():
    base = np.arange(4 * BIG, dtype="f8").reshape(4, BIG)
    strided = base[:, ::3]
    empty = np.empty((0, 7), dtype="f4")
    objects = np.array([str(i) for i in range(BIG)], dtype=object)
    dsk = {"s": (np.copy, strided), "s2": (np.ascontiguousarray, "s"),
           "sv": (lambda a: a[:, ::2], "s2"), "sd": (described, "sv"),
           "e": (np.copy, empty), "ed": (described, "e"),
           "o": (np.copy, objects), "od": (described, "o")}
    (how_s, sv), (how_e, e), (how_o, o) = get(dsk, ["sd", "ed", "od"])
    np.testing.assert_array_equal(sv, strided[:, ::2])
    assert e.shape == (0, 7) and e.dtype == np.float32
    assert how_o != "mmap" and o.dtype == object and list(o) == list(objects)  # the pipe
    assert how_s == "mmap"  # a non-contiguous view travels as a contiguous copy


def test_pandas_frames_travel_with_their_numeric_columns_mapped():
    pd = pytest.importorskip("pandas")

    def frame():
        return pd.DataFrame({"x": np.arange(BIG, dtype="f8"), "y": np.arange(BIG) % 7,
                             "s": [f"r{i % 10}" for i in range(BIG)]})

    def column_backing(df):
        return backing(df["x"].to_numpy()), df

    how, df = get({"f": (frame,), "g": (column_backing, "f")}, "g")
    assert how == "mmap"
    pd.testing.assert_frame_equal(df, frame())


def test_bytes_results_arrive_whole():
    data = os.urandom(300_000)
    dsk = {"b": (bytes, data), "n": (len, "b")}
    assert get(dsk, ["b", "n"]) == (data, len(data))


def test_small_results_keep_the_pipe():
    seen = []

    def count(key, result, dsk, state, worker_id):
        seen.append(len(mine()))

    dsk = {"a": (make, "i1", 1000), "b": (np.add, "a", 1), "c": (np.sum, "b")}
    assert get(dsk, "c", callbacks=[Callback(posttask=count)]) == np.sum(make("i1", 1000) + 1)
    assert seen == [0, 0, 0]


def test_inputs_in_the_graph_reach_workers_through_shared_memory():
    x = make("f8")
    how, out = get({"x": x, "y": (described, "x")}, "y")
    assert how == "mmap"
    np.testing.assert_array_equal(out, x)


def test_large_results_and_their_consumer_run_in_one_batch(monkeypatch):
    # Each big result takes longer to make than a batch's usual budget, so
    # it would be a batch of its own, and a task that needs two of them
    # would find at least one in the other worker.  Once the scheduler has
    # seen that the function's results travel through shared memory, it
    # keeps both producers and their consumer in one batch: no crossing.
    ran = {}

    def where(key, result, dsk, state, worker_id):
        ran[key] = worker_id

    n = 16
    dsk = {}
    for i in range(n):
        dsk[f"p{2 * i}"] = (medium_big, 2 * i)
        dsk[f"p{2 * i + 1}"] = (medium_big, 2 * i + 1)
        dsk[f"c{i}"] = (first_of_sum, f"p{2 * i}", f"p{2 * i + 1}")
    out = lmp.get(dsk, [f"c{i}" for i in range(n)], num_workers=2,
                  callbacks=[Callback(posttask=where)])
    assert list(out) == [4 * i + 1 for i in range(n)]
    together = sum(ran[f"p{2 * i}"] == ran[f"p{2 * i + 1}"] == ran[f"c{i}"] for i in range(n))
    # (the first producers start before any result is back)
    assert together >= n - 4, ran
    # The next computation does as well: a time remembered from this one
    # never grows a batch past one task of a group not yet timed in that
    # run (localsched.batching, "Across computations"), so its first
    # batches go as this one's did, and the placement follows.  (A budget
    # that a pair fits in however loaded the machine.)
    monkeypatch.setattr(batching, "LARGE_BUDGET", 0.5)
    ran.clear()
    lmp.get(dsk, [f"c{i}" for i in range(n)], num_workers=2, callbacks=[Callback(posttask=where)])
    together = sum(ran[f"p{2 * i}"] == ran[f"p{2 * i + 1}"] == ran[f"c{i}"] for i in range(n))
    assert together >= n - 4, ran


# -- lifetime ----------------------------------------------------------------------


def test_a_segment_goes_when_the_cache_releases_its_result():
    live = []

    def count(key, result, dsk, state, worker_id):
        # Results' segments (released ones are unlinked or, renamed, wait in
        # the free list for reuse during the computation).
        live.append(len([n for n in mine() if "-free-" not in n]))

    # A chain of 12 big results: each is released when the next one ends.
    dsk = {"x0": (make, "f8")}
    for i in range(1, 12):
        dsk[f"x{i}"] = (np.add, f"x{i - 1}", 1)
    out = get(dsk, "x11", num_workers=1, callbacks=[Callback(posttask=count)])
    assert out[0] == 11
    # At most the last result and its input: never the chain.
    assert max(live) <= 2, live
    assert released()  # the free list went with the computation


def test_a_segment_still_mapped_is_never_reused():
    # The callback keeps every result it sees (mapped in this process):
    # their segments, once released, must not be rewritten with later
    # results while these arrays still point into them.
    kept = {}

    def keep(key, result, dsk, state, worker_id):
        kept[key] = result

    dsk = {"x0": (make, "f8")}
    for i in range(1, 16):
        dsk[f"x{i}"] = (np.add, f"x{i - 1}", 1)
    get(dsk, "x15", callbacks=[Callback(posttask=keep)])
    for i in range(16):
        np.testing.assert_array_equal(kept[f"x{i}"], make("f8") + i)


def test_a_failing_task_leaves_no_segment():
    dsk = {f"a{i}": (slow_big, i) for i in range(6)}
    dsk["bad"] = (boom, "a0")
    dsk["out"] = (sum, [f"a{i}" for i in range(6)] + ["bad"])
    with pytest.raises(ValueError, match="boom") as info:
        get(dsk, "out")
    # The traceback keeps the computation's frames (and its queue) alive: the
    # handles are released anyway, and so is whatever a batch still running
    # sends later (checked by the fixture once the pool stops).
    assert info.value is not None
    deadline = time.monotonic() + 10
    while mine() and time.monotonic() < deadline:
        time.sleep(0.01)  # batches that were running finish and are released
    assert released()
    assert get({"a": (make, "f8"), "b": (first, "a")}, "b") == 0  # the next one works


def test_a_worker_killed_while_holding_segments_leaves_none():
    dsk = {"a": (make, "f8"), "b": (slow_big, 1), "c": (die, "a"),
           "out": (lambda *args: None, "b", "c")}
    with pytest.raises(lmp.WorkerDiedError):
        get(dsk, "out")
    assert get({"a": (make, "f8"), "b": (first, "a")}, "b") == 0


def write_segment_then_die(prefix, emit):
    shm.share(make("f8"), shm.WorkerSegments(prefix, []))  # written, never reported
    die(None)


def test_segments_a_dead_worker_wrote_but_never_reported_are_swept():
    with lmp.ProcessPool(1) as pool:
        # Job 1 of this pool: its segments are named with this prefix.
        prefix = shm.store().job_prefix(pool._token, 1)
        future = pool.submit(write_segment_then_die, prefix, emit=lambda records: None)
        with pytest.raises(lmp.WorkerDiedError):
            future.result(timeout=60)
        assert not [n for n in mine() if n.startswith(prefix)]


@needs_posix_signals
def test_ctrl_c_mid_run_leaves_no_segment():
    main = threading.get_ident()
    ended = []

    def posttask(key, result, dsk, state, worker_id):
        ended.append(key)
        if len(ended) == 3:
            signal.pthread_kill(main, signal.SIGINT)

    dsk = {f"a{i}": (slow_big, i) for i in range(40)}
    dsk["out"] = (len, [f"a{i}" for i in range(40)])
    with pytest.raises(KeyboardInterrupt):
        get(dsk, "out", callbacks=[Callback(posttask=posttask)])
    assert get({"a": (make, "f8"), "b": (first, "a")}, "b") == 0


def test_sweep_removes_only_segments_nobody_owns():
    store = shm.store()
    prefix = store.job_prefix(999, 1)
    owned = shm.share(make("f8"), shm.WorkerSegments(prefix, []))
    orphan = shm.share(make("f8"), shm.WorkerSegments(prefix + "x", []))
    handle = shm.SharedValue(owned.name, owned.size, owned.meta, owned.layout, store)
    assert shm.sweep(prefix) == 1
    assert set(mine()) == {owned.name} and orphan.name not in mine()
    handle.release()
    assert released()


# -- falling back to the pipe ------------------------------------------------------


@files_only
def test_a_too_small_dev_shm_falls_back_to_the_pipe_with_one_warning(monkeypatch):
    monkeypatch.setenv("LOCALSCHED_SHM_RESERVE", str(1 << 62))  # no /dev/shm is that big
    dsk = {"a": (make, "f8"), "b": (described, "a")}
    with pytest.warns(RuntimeWarning, match="too small") as record:
        how, b = get(dsk, "b")
        get(dsk, "b")
    assert len(record) == 1  # once per process
    assert how != "mmap"
    np.testing.assert_array_equal(b, make("f8"))
    assert released()


@files_only
def test_a_segment_that_does_not_fit_in_a_worker_takes_the_pipe(monkeypatch, capfd):
    # Room for the scheduler's check (threshold + reserve), not for 64 MB:
    # wide margins both ways, since other processes use /dev/shm too.
    free = segments.free_bytes() or 0
    monkeypatch.setenv("LOCALSCHED_SHM_RESERVE", str(max(0, free - (16 << 20))))
    dsk = {"a": (make, "f8", 8_000_000), "b": (described, "a")}
    with pytest.warns(RuntimeWarning, match="shared memory is full") as record:
        how, b = get(dsk, "b")
    assert how != "mmap"
    np.testing.assert_array_equal(b, make("f8", 8_000_000))
    # The worker's failure reaches the caller, who warns (once); the
    # worker prints nothing of its own.
    assert len([w for w in record if "shared memory" in str(w.message)]) == 1
    err = capfd.readouterr().err
    assert "localsched:" not in err, err


@files_only
def test_a_workers_warning_made_an_error_fails_the_computation_not_the_pool(monkeypatch,
                                                                            capfd):
    # Under ``-W error`` (or pytest's filterwarnings = error) the worker's
    # note is an exception where the caller warns.  It fails the job whose
    # worker sent it, as the caller's own warning would fail its get; the
    # pool's listener thread goes on (it used to die: BrokenProcessPool,
    # and a thread traceback on stderr).
    import warnings

    free = segments.free_bytes() or 0
    monkeypatch.setenv("LOCALSCHED_SHM_RESERVE", str(max(0, free - (16 << 20))))
    dsk = {"a": (make, "f8", 8_000_000), "b": (described, "a")}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(RuntimeWarning, match="shared memory is full"):
            get(dsk, "b")
    assert get({"x": (abs, -1)}, "x") == 1  # the same pool, still serving
    assert "Exception in thread" not in capfd.readouterr().err


def test_switched_off_it_uses_the_pipe_silently(monkeypatch, recwarn):
    monkeypatch.setenv("LOCALSCHED_SHM", "0")
    how, b = get({"a": (make, "f8"), "b": (described, "a")}, "b")
    assert how != "mmap" and not [w for w in recwarn if "shared memory" in str(w.message)]
    np.testing.assert_array_equal(b, make("f8"))


# -- ResourceProfiler ----------------------------------------------------------------


def _moved_into_a_held_segment(size: int, prof) -> tuple:
    """``(memory sampled with a private array of size bytes, a handle this
    process holds to a segment the array was moved into)``."""
    a = np.ones(size // 8)
    base = prof.sample().mem
    store = shm.store()
    shared = shm.share(a, shm.WorkerSegments(store.job_prefix(998, 1), []))
    handle = shm.SharedValue(shared.name, shared.size, shared.meta, shared.layout, store)
    return base, handle


@files_only
@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="Linux /proc only")
def test_resource_profiler_counts_shared_memory_once():
    from localsched.diagnostics import ResourceProfiler

    size = 64 << 20
    prof = ResourceProfiler(dt=1)
    base, handle = _moved_into_a_held_segment(size, prof)
    try:
        held = prof.sample().mem  # the segment, mapped by nobody: counted by its size
        maps = [handle.load() for _ in range(3)]  # three mappings of the same pages
        assert all(m.sum() == size // 8 for m in maps)  # (every page touched)
        mapped = prof.sample().mem
    finally:
        maps = None
        handle.release()
    mb = size / 1e6
    # The private array went (-64), the segment came (+64): about even.
    assert abs(held - base) < 0.25 * mb, (base, held)
    # Three mappings add (almost) nothing: the pages are counted once.
    assert abs(mapped - held) < 0.25 * mb, (held, mapped)


def test_resource_profiler_counts_results_held_in_no_mapping(segment_kind):
    """Where a held segment is mapped by nobody (POSIX objects on macOS,
    which readers copy out; named mappings on Windows, held by a handle), a
    result the scheduler holds is in no process's RSS: the profiler adds
    it, so moving 64 MB from a private array into a held segment leaves
    the total about even."""
    if segment_kind == "files":
        pytest.skip("files: /proc counts them (test_resource_profiler_counts_shared_memory_once)")
    from localsched.diagnostics import ResourceProfiler

    size = 64 << 20
    prof = ResourceProfiler(dt=1)
    base, handle = _moved_into_a_held_segment(size, prof)
    try:
        held = prof.sample().mem
    finally:
        handle.release()
    released = prof.sample().mem
    mb = size / 1e6
    assert abs(held - base) < 0.25 * mb, (base, held)
    assert abs(base - released - mb) < 0.25 * mb, (base, released)


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
    # Its workers die with it (PDEATHSIG, lifeline); wait until they have.
    psutil.wait_procs([p for p in map(_process, workers) if p is not None], timeout=10)
    if how == "SIGINT":  # Ctrl-C: the process cleans up on its way out
        assert "KeyboardInterrupt" in proc.stderr
        assert not shm.live_segments(pids=[pid])
    else:  # killed outright: its reaper removes what it held (nothing here sweeps)
        deadline = time.monotonic() + 5
        while shm.live_segments(pids=[pid]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not shm.live_segments(pids=[pid])


def _process(pid: int):
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


# -- owners that are gone, and names (both kinds; POSIX objects cannot be listed) ---


def _dead_owner_segment(segment_kind) -> tuple[str, str]:
    """A segment of an owner that is gone (its lock file held by no one,
    its reaper never ran), made as that owner would: ``(name, lock path)``."""
    owner = segment_kind.owner_label(_unused_pid())
    lock = os.path.join(segment_kind.directory, f"{segment_kind.prefix}{owner}.lock")
    os.close(os.open(lock, os.O_CREAT | os.O_WRONLY, 0o600))
    name = f"{segment_kind.prefix}{owner}-1-1-0"
    segments.write_segment(name, [memoryview(make("f8"))], 0)
    return name, lock


def _unused_pid() -> int:
    import psutil

    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid -= 1
    return pid


def test_what_a_dead_owner_left_is_swept_by_the_next_store():
    from localsched._pool.segments import kind

    segment_kind = kind()
    if not segment_kind.owner_lock:
        pytest.skip("Windows frees a dead owner's mappings itself")
    name, lock = _dead_owner_segment(segment_kind)
    try:
        assert segment_kind.size(name) >= make("f8").nbytes
        assert segments.sweep_stale() >= 1
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
    from localsched._pool.segment_kinds import PosixObjects

    kind = PosixObjects()
    owner = kind.owner_label(4_194_304)  # (Linux's largest pid)
    longest = f"/{kind.prefix}{owner}-{kind.number_text(36 ** 2 - 1)}-" \
              f"{kind.number_text(2 ** 31)}-{kind.number_text(36 ** 2 - 1)}"
    assert len(longest) <= 31, longest


def test_posix_journal_is_compacted_when_no_computation_runs(segment_kind):
    if segment_kind != "posix":
        pytest.skip("POSIX objects' journal")
    from localsched._pool.segment_kinds import JOURNAL_COMPACT, JOURNAL_SUFFIX

    store = shm.store()
    journal = os.path.join(store.kind.directory, f"{store.prefix[:-1]}{JOURNAL_SUFFIX}")
    for i in range(JOURNAL_COMPACT // 16):  # names of objects long gone
        store.kind.register(f"{store.prefix}9-9-{i}")
    kept = shm.share(make("f8"), shm.WorkerSegments(store.job_prefix(9, 10), []))
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
    from localsched._pool.named_mappings import SimulatedNamedMappings

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
