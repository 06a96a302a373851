"""A run's task records (``state.outcome.records``), kept by column.

They must read as the tuples a posttask hook sees (``state.task``) on every
local scheduler, and keeping them must not give the garbage collector an
object per task to track (what made every diagnostic cost more on long runs).
"""

from __future__ import annotations

import gc
import importlib
import operator

import pytest

from localsched.callbacks import Callback, Needs
from localsched.run.task_records import TaskRecords
from localsched.view import TaskRecord
from localsched.worker.records_wire import Probe

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module

GETS = {
    "sync": ("localsched.local", "get_sync"),
    "threads": ("localsched.threaded", "get"),
    "processes": ("localsched.multiprocessing", "get"),
}


def _get(name):
    module, attr = GETS[name]
    return getattr(importlib.import_module(module), attr)


def tree(n_leaves: int) -> tuple[dict, tuple]:
    dsk: dict = {("leaf", i): (operator.neg, i) for i in range(n_leaves)}
    level, names = 0, [("leaf", i) for i in range(n_leaves)]
    while len(names) > 1:
        level += 1
        pairs = [names[i:i + 2] for i in range(0, len(names), 2)]
        names = []
        for j, pair in enumerate(pairs):
            key = ("sum", level, j)
            dsk[key] = (sum, list(pair))
            names.append(key)
    return dsk, names[0]


class Reader(Callback):
    """Keeps the run's records (no hook per task)."""

    needs = Needs(results=False, records=True)

    def _start_state(self, dsk, state):
        self.records = state.outcome.records


class Hook(Callback):
    """What a posttask hook sees of each task."""

    needs = Needs(results=False)

    def __init__(self):
        self.seen = []

    def _posttask(self, key, result, dsk, state, worker_id):
        self.seen.append(tuple(state.task))


def test_records_read_back_as_written():
    records = TaskRecords()
    writer = records.writer(measured=True)
    writer.keep("a", 1.0, 2.0, 7, [])
    writer.keep("b", 2.0, 3.0, 7, ["a"], (0.5, None))
    records.append(("c", 3.0, 4.0, 8, ("b",), (0.1, 0.2), None, (("x", 1.0, 2.0),), 10))
    records.append(TaskRecord("d", 4.0, 5.0, 8, ["c", "x"]))
    want = [
        ("a", 1.0, 2.0, 7, (), None, None, None, None),
        ("b", 2.0, 3.0, 7, ("a",), None, (0.5, None), None, None),
        ("c", 3.0, 4.0, 8, ("b",), (0.1, 0.2), None, (("x", 1.0, 2.0),), 10),
        ("d", 4.0, 5.0, 8, ("c", "x"), None, None, None, None),
    ]
    assert len(records) == 4
    assert list(records) == records[:] == want
    assert records[1:3] == want[1:3] and records[::2] == want[::2] and records[3:1] == []
    assert records[-1] == want[-1] and records[0] == want[0]
    assert TaskRecord._make(records[2]).nbytes == 10
    with pytest.raises(IndexError):
        records[4]
    assert records.columns(1, 3) == (["b", "c"], [2.0, 3.0], [3.0, 4.0], [7, 8])
    writer.keep("e", 5.0, 6.0, 8, [], None, 10)  # (a size: a column this run does not keep)
    assert records[4] == ("e", 5.0, 6.0, 8, (), None, None, None, None)


def test_records_appended_before_a_writers_first_record_keep_their_place():
    records = TaskRecords()
    writer = records.writer(measured=True, sized=True)
    records.append(("a", 0.0, 1.0, 1, ()))
    writer.keep("b", 1.0, 2.0, 1, [], (0.5, None), 3)
    assert [(r[0], r[6], r[8]) for r in records] == [("a", None, None), ("b", (0.5, None), 3)]


def test_a_writer_after_appended_records_lines_its_columns_up():
    records = TaskRecords()
    records.append(("a", 0.0, 1.0, 1, ()))
    writer = records.writer(measured=True, sized=True)
    writer.keep("b", 1.0, 2.0, 1, [], (0.5, None), 3)
    records.append(("c", 2.0, 3.0, 1, (), None, (0.25, "user"), None, 7))
    assert [(r[0], r[6], r[8]) for r in records] == [
        ("a", None, None), ("b", (0.5, None), 3), ("c", (0.25, "user"), 7)]
    assert [(r[0], r[6], r[8]) for r in (records[0], records[1], records[2])] == [
        ("a", None, None), ("b", (0.5, None), 3), ("c", (0.25, "user"), 7)]


@pytest.mark.parametrize("measure,sizes", [(False, False), (False, True), (True, False),
                                           (True, True)])
@pytest.mark.parametrize("name", list(GETS))
def test_records_are_what_the_hooks_see(name, measure, sizes):
    dsk, out = tree(300)
    reader, hook = Reader(), Hook()
    reader.needs = Needs(results=False, records=True, measure=measure, sizes=sizes)
    assert _get(name)(dsk, out, callbacks=[reader, hook]) == -sum(range(300))
    assert len(reader.records) == len(dsk)
    assert list(reader.records) == hook.seen
    # the freed keys are each task's inputs, released once their last user ended
    assert sorted(k for r in reader.records for k in r[4]) == sorted(k for k in dsk if k != out)


def _collections() -> int:
    return sum(g["collections"] for g in gc.get_stats())


def test_kept_records_cost_no_collections_and_little_memory():
    """Keeping 40,000 records must not make the collector run more often (a
    tuple per record did: ~40 % more collections over the run) nor hold
    much memory (a tuple per record and one of its freed keys: ~200 bytes)."""
    import tracemalloc

    from localsched.local import get_sync

    dsk, out = tree(20_000)
    get_sync(dsk, out)
    gc.collect()
    c0 = _collections()
    get_sync(dsk, out)
    bare = _collections() - c0
    reader = Reader()
    gc.collect()
    c0 = _collections()
    get_sync(dsk, out, callbacks=[reader])
    kept = _collections() - c0
    assert len(reader.records) == len(dsk)
    assert kept <= bare * 1.05 + 2, (kept, bare)

    tracemalloc.start()
    try:
        reader = Reader()
        get_sync(dsk, out, callbacks=[reader])
        gc.collect()
        with_records = tracemalloc.get_traced_memory()[0]
        reader.records = None  # (what the records alone held goes)
        gc.collect()
        held = with_records - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held / len(dsk) < 120, held / len(dsk)  # (a tuple per record: ~200)


def test_a_cpu_note_is_split_among_its_records_by_wall_time():
    """A measuring worker reads its CPU clock once per hand-off and sends
    the seconds as one note before the tasks they cover: each task's probe
    gets its share by wall time when read, whatever the task carried itself."""
    records = TaskRecords()
    writer = records.writer(measured=True)
    records.cpu_note(0.6, 2, 3.0)  # 0.6 s of CPU for the next two tasks, 3 s of wall
    metered = [("I/O", "seconds", 0.5, 0.0, 1.0, 1.5)]
    # 1 s of the 3: 0.2 s of CPU
    writer.keep("a", 1.0, 2.0, 7, [], Probe(None, metered, (0.0, 0.0), 1.0, True))
    writer.keep("b", 2.0, 4.0, 7, [])  # 2 s: 0.4 s
    # a task with its own CPU reading (sync) and no note
    writer.keep("c", 4.0, 5.0, 7, [], Probe(0.05))
    records.cpu_note(0.3, 1, 0.0)  # a note over a task of no measurable wall time
    writer.keep("d", 5.0, 5.0, 8, [])
    first = records[0]  # (read one by one, then all at once: the same)
    assert first[6][0] == pytest.approx(0.2)
    assert first[6][1:] == (metered, (0.0, 0.0), 1.0, True, None)
    probes = [r[6] for r in records]
    assert probes[0] == first[6]
    assert probes[1][0] == pytest.approx(0.4) and probes[1][1] is None
    # (every probe is laid out as records_wire.Probe: six fields)
    assert probes[2] == (0.05, None, None, None, None, None)
    assert probes[3] == (0.3, None, None, None, None, None)
    assert sum(p[0] for p in probes) == pytest.approx(0.6 + 0.05 + 0.3)
    assert [r[6] for r in records[1:3]] == probes[1:3]


def test_a_cpu_note_read_before_its_records_all_arrived():
    """A reader in another thread may read while a note's records are still
    being kept: each record read gets its final share."""
    records = TaskRecords()
    writer = records.writer(measured=True)
    records.cpu_note(1.0, 2, 2.0)
    writer.keep("a", 0.0, 1.5, 7, [])
    assert records[0][6][0] == pytest.approx(0.75)
    writer.keep("b", 1.5, 2.0, 7, [])
    writer.keep("c", 2.0, 3.0, 7, [])  # (no note covers it: unmeasured)
    assert [r[6] for r in records] == [pytest.approx((0.75, None, None, None, None, None)),
                                       pytest.approx((0.25, None, None, None, None, None)), None]


@pytest.mark.parametrize("name", ["threads", "processes"])
def test_measuring_on_a_pool_adds_no_collections(name):
    """Fine metrics on a pool cost a CPU clock reading per hand-off and
    nothing built per task: a measured run makes the collector run no
    more often than the same run keeping its records unmeasured (a probe
    tuple per task, split in the worker, made it run a third more often)."""
    dsk, out = tree(20_000)
    get = _get(name)
    runs = {}
    for measure in (False, True, False, True):
        reader = Reader()
        reader.needs = Needs(results=False, records=True, measure=measure)
        gc.collect()
        c0 = _collections()
        get(dsk, out, callbacks=[reader])
        runs.setdefault(measure, []).append(_collections() - c0)
        assert len(reader.records) == len(dsk)
        assert all(r[6] is not None for r in reader.records) == measure
    bare, measured = min(runs[False]), min(runs[True])
    assert measured <= bare * 1.1 + 3, (measured, bare)


class _CountingLock:
    def __init__(self):
        self.taken = 0

    def __enter__(self):
        self.taken += 1

    def __exit__(self, *exc):
        return False


def test_reading_measured_records_shares_their_notes_in_one_pass():
    """Reading n records covered by CPU notes works out their shares once
    per read, not once per record (which copied the notes each time:
    seconds to read a 100k-task run)."""
    records = TaskRecords()
    writer = records.writer(measured=True)
    for n in range(200):
        records.cpu_note(0.01, 50, 0.05)
        for j in range(50):
            writer.keep(("k", n, j), n + j / 1000, n + (j + 1) / 1000, 1, [])
    lock = records._read_lock = _CountingLock()
    probes = [r[6] for r in records]
    assert lock.taken <= 2 * (len(records) // 4096 + 1), lock.taken
    assert sum(p[0] for p in probes) == pytest.approx(200 * 0.01)
    assert probes[0][0] == pytest.approx(0.01 / 50)


class ProbeHook(Callback):
    """Every probe a measuring, sizing callback is handed."""

    needs = Needs(results=False, measure=True, sizes=True)

    def __init__(self):
        super().__init__()
        self.probes: list = []

    def _posttask(self, key, result, dsk, state, worker_id):
        self.probes.append(state.task.probe)


@pytest.mark.parametrize("scheduler", list(GETS))
def test_every_probe_has_the_probe_layout_on_every_scheduler(scheduler):
    """``state.task.probe`` is laid out as records_wire.Probe, six fields
    whatever the loop and whatever was measured (no reading by length)."""
    dsk, out = tree(16)
    hook = ProbeHook()
    with hook:
        _get(scheduler)(dsk, out)
    assert len(hook.probes) == len(dsk)
    assert {len(p) for p in hook.probes} == {6}
    named = [Probe._make(p) for p in hook.probes]
    assert all(p.cpu is not None and p.cpu >= 0.0 for p in named)
    assert all(isinstance(p.nbytes, int) for p in named) or scheduler == "sync"
    if scheduler != "sync":  # a pool's batches say when they started
        assert any(p.started is not None for p in named)
