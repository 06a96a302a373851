"""Zero-copy transport through shared memory (localsched/_shm/, #10).

Every test runs on real worker processes, on each kind of segment
(tests/support/shm_kinds.py), and checks, through an autouse fixture, that no
localsched segment of this process is left once the shared pools are
stopped; several also check right after a computation returns, with the
pool still up.  What happens when an owner goes: tests/shm/test_shm_owners.py.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from localsched import multiprocessing as lmp
from localsched._shm import store as segments
from localsched._shm import transport as shm
from localsched.callbacks import Callback
from localsched.run import batching
from tests.support import shm_kinds
from tests.support.platform_marks import needs_posix_signals
from tests.support.shm_kinds import (
    BIG,
    backing,
    files_only,
    make,
    mine,
    platform_now,
    pools,
    released,
    store_now,
    writer,
)

# The autouse fixtures: each test runs on every kind of segment, and leaves none.
segment_kind, clean_shm = shm_kinds.segment_kind, shm_kinds.clean_shm


# -- tasks (module level: workers import them) -------------------------------------


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
    return pools().get(dsk, keys, **kw)


# -- round trips -------------------------------------------------------------------

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "longdouble", "complex64", "complex128",
          "clongdouble", "datetime64[ns]", "timedelta64[s]", "U3", "S2"]


def test_arrays_of_every_dtype_reach_the_next_worker_mapped_not_copied():
    # Every dtype in one computation, a producer and a consumer each (one
    # pool started per kind of segment, not one per dtype); what went wrong
    # is reported per dtype.
    dsk = {}
    for dtype in DTYPES:
        dsk[f"a-{dtype}"] = (make, dtype)
        dsk[f"b-{dtype}"] = (described, f"a-{dtype}")
    keys = [f"b-{dtype}" for dtype in DTYPES] + [f"a-{dtype}" for dtype in DTYPES]
    out = dict(zip(keys, get(dsk, keys), strict=True))
    wrong = {}
    for dtype in DTYPES:
        (how, b), a = out[f"b-{dtype}"], out[f"a-{dtype}"]
        if how != "mmap":  # the consumer's input points into the segment
            wrong[dtype] = f"the consumer's input was {how}"
        elif not (np.array_equal(b, make(dtype)) and np.array_equal(a, make(dtype))
                  and a.dtype == np.dtype(dtype) and b.dtype == np.dtype(dtype)):
            wrong[dtype] = f"arrived as {a.dtype} / {b.dtype}: {a[:4]!r} / {b[:4]!r}"
    assert wrong == {}
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
    out = pools().get(dsk, [f"c{i}" for i in range(n)], num_workers=2,
                      callbacks=[Callback(posttask=where)])
    assert list(out) == [4 * i + 1 for i in range(n)]
    together = sum(ran[f"p{2 * i}"] == ran[f"p{2 * i + 1}"] == ran[f"c{i}"] for i in range(n))
    # (the first producers start before any result is back)
    assert together >= n - 4, ran
    # The next computation does as well: a time remembered from this one
    # never grows a batch past one task of a group not yet timed in that
    # run (localsched.run.batching, "Across computations"), so its first
    # batches go as this one's did, and the placement follows.  (A budget
    # that a pair fits in however loaded the machine.)
    monkeypatch.setattr(batching, "LARGE_BUDGET", 0.5)
    ran.clear()
    pools().get(dsk, [f"c{i}" for i in range(n)], num_workers=2,
                callbacks=[Callback(posttask=where)])
    together = sum(ran[f"p{2 * i}"] == ran[f"p{2 * i + 1}"] == ran[f"c{i}"] for i in range(n))
    assert together >= n - 4, ran


# -- lifetime ----------------------------------------------------------------------


def test_a_segment_goes_when_the_cache_releases_its_result():
    live = []

    def count(key, result, dsk, state, worker_id):
        # Results' segments, and those released: unlinked, or kept under
        # their names in the free list for reuse during the computation (a
        # worker that cannot lock a lent one at once -- its mapping of the
        # input not yet gone, on a loaded machine -- writes a new one).
        store = store_now()
        spare = {os.path.basename(n) for n in [*store.free, *store.lent, *store.deferred]}
        names = [os.path.basename(n) for n in mine()]
        live.append(len([n for n in names if n not in spare]))
        kept.append(len(names) - live[-1])

    kept: list = []

    # A chain of 12 big results: each is released when the next one ends.
    dsk = {"x0": (make, "f8")}
    for i in range(1, 12):
        dsk[f"x{i}"] = (np.add, f"x{i - 1}", 1)
    out = get(dsk, "x11", num_workers=1, callbacks=[Callback(posttask=count)])
    assert out[0] == 11
    # At most the last result and its input: never the chain (and a
    # bounded free list beside them)
    assert max(live) <= 2, live
    assert max(kept) <= segments.FREE_MAX, kept
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
    assert released(), store_state()
    assert get({"a": (make, "f8"), "b": (first, "a")}, "b") == 0  # the next one works


def store_state() -> str:
    """What is left, and where the store holds it (a failure's message:
    once, beside 3 CPU hogs and the suite, a posix segment outlived this
    wait; run alone beside hogs, 24 of 24 passed)."""
    store = store_now()
    return (f"left: {sorted(mine())}; running {store.running}, free {sorted(store.free)}, "
            f"lent {sorted(store.lent)}, deferred {list(store.deferred)}, "
            f"mapped {sorted(store.mapped)}, owned {sorted(store.owned)}, "
            f"events {list(store.events)}")


def test_a_worker_killed_while_holding_segments_leaves_none():
    dsk = {"a": (make, "f8"), "b": (slow_big, 1), "c": (die, "a"),
           "out": (lambda *args: None, "b", "c")}
    with pytest.raises(lmp.WorkerDiedError):
        get(dsk, "out")
    assert get({"a": (make, "f8"), "b": (first, "a")}, "b") == 0


def write_segment_then_die(platform, prefix, emit):
    kind = shm.WorkerSide(platform).kind
    shm.share(make("f8"), shm.WorkerSegments(kind, prefix, []))  # written, never reported
    die(None)


def test_segments_a_dead_worker_wrote_but_never_reported_are_swept():
    with lmp.ProcessPool(1, platform=platform_now()) as pool:
        # Job 1 of this pool: its segments are named with this prefix.
        prefix = store_now().job_prefix(pool._token, 1)
        future = pool.submit(write_segment_then_die, pool.platform, prefix,
                             emit=lambda records: None)
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


def interrupted_at(codes: set, nth: int):
    """A trace that raises KeyboardInterrupt at the ``nth`` line run in any
    of ``codes`` (a Ctrl-C landing there), and what it saw: ``[lines]``."""
    seen: list = []

    def local(frame, event, arg):
        if event == "line":
            seen.append(frame.f_lineno)
            if len(seen) == nth:
                raise KeyboardInterrupt(f"injected at line {frame.f_lineno}")
        return local

    def trace(frame, event, arg):
        return local if frame.f_code in codes else None

    return trace, seen


def test_ctrl_c_at_any_line_of_a_computations_start_leaves_the_store_balanced():
    # (A computation counts itself running in the store, which keeps released
    # segments for reuse while any runs: a start that a Ctrl-C cut short and
    # never counted out would keep every later release in the free list.)
    from localsched._shm.handles import Inbox
    from localsched.run import core, poolloop

    codes = {poolloop.PoolLoop.__init__.__code__, core._run_pool.__code__,
             Inbox.__init__.__code__}
    dsk = {"a": (make, "f8"), "b": (first, "a")}
    store = store_now()
    for nth in range(1, 400):
        trace, seen = interrupted_at(codes, nth)
        sys.settrace(trace)
        try:
            result = get(dsk, "b")
        except KeyboardInterrupt:
            result = None
        finally:
            sys.settrace(None)
        assert store.running == 0, f"Ctrl-C at line {seen[-1]}: {store_state()}"
        assert get(dsk, "b") == 0
        assert released(), f"Ctrl-C at line {seen[-1]}: {store_state()}"
        if result is not None:  # (every line of the start had its turn)
            break
    assert len(seen) > 20


def test_sweep_removes_only_segments_nobody_owns():
    store = store_now()
    prefix = store.job_prefix(999, 1)
    owned = shm.share(make("f8"), writer(prefix))
    orphan = shm.share(make("f8"), writer(prefix + "x"))
    handle = shm.SharedValue(owned.name, owned.size, owned.meta, owned.layout, store)
    assert store.sweep(prefix) == 1
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


#: /dev/shm's room left above the reserve in the tests of a full /dev/shm,
#: and a value (float64 elements) twice that size: 48 MB of margin both ways
#: for what other programs take or free meanwhile.
ROOM = 48 << 20
TOO_BIG = 2 * ROOM // 8


@files_only
def test_a_segment_that_does_not_fit_in_a_worker_takes_the_pipe(monkeypatch, capfd):
    # Room for the scheduler's check (threshold + reserve), not for the value:
    # wide margins both ways, since other processes use /dev/shm too (other
    # test runs beside this one took 25 MB of a 16 MB margin meanwhile).
    free = segments.free_bytes(store_now().kind) or 0
    monkeypatch.setenv("LOCALSCHED_SHM_RESERVE", str(max(0, free - ROOM)))
    dsk = {"a": (make, "f8", TOO_BIG), "b": (described, "a")}
    with pytest.warns(RuntimeWarning, match="shared memory is full") as record:
        how, b = get(dsk, "b")
    assert how != "mmap"
    np.testing.assert_array_equal(b, make("f8", TOO_BIG))
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

    free = segments.free_bytes(store_now().kind) or 0
    monkeypatch.setenv("LOCALSCHED_SHM_RESERVE", str(max(0, free - ROOM)))
    dsk = {"a": (make, "f8", TOO_BIG), "b": (described, "a")}
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


def _moved_into_a_held_segment(size: int, measure) -> tuple:
    """``(memory measured with a private array of size bytes, a handle this
    process holds to a segment the array was moved into)``."""
    a = np.ones(size // 8)
    base = measure()
    store = store_now()
    shared = shm.share(a, writer(store.job_prefix(998, 1)))
    handle = shm.SharedValue(shared.name, shared.size, shared.meta, shared.layout, store)
    return base, handle


@files_only
@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="Linux /proc only")
def test_resource_profiler_counts_shared_memory_once():
    from localsched.diagnostics import ResourceProfiler

    size = 64 << 20
    prof = ResourceProfiler(dt=1)
    base, handle = _moved_into_a_held_segment(size, lambda: prof.sample().mem)
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
    from localsched.diagnostics.collectors.resource import _ProcessTree

    size = 64 << 20
    tree = _ProcessTree(platform_now())  # (the ResourceProfiler's, as this platform has it)

    def measure() -> float:
        return tree.measure()[0]

    base, handle = _moved_into_a_held_segment(size, measure)
    try:
        held = measure()
    finally:
        handle.release()
    released = measure()
    mb = size / 1e6
    assert abs(held - base) < 0.25 * mb, (base, held)
    assert abs(base - released - mb) < 0.25 * mb, (base, released)
