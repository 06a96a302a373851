"""What a live view reads of a process batch: which of its tasks its worker
runs now (``_JobFuture.task_at_work``, from the worker's task slot), so the
tasks before it count as ended though their records wait in the worker,
and a batch still waiting for a worker runs nothing.  Read only when asked:
the run pays nothing for it per task.

The tasks meet the test at gates (``tests.support.gates``: they cross
processes), so nothing depends on speed.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from localsched import multiprocessing as lmp
from localsched._pool.jobs import QUEUED
from localsched._pool.taskslot import NO_TASK
from localsched.callbacks import Callback
from localsched.plan.graph import CALL
from localsched.run.machine import SLOT_NOT_STARTED, SLOT_QUEUED
from localsched.system import platform as _platform
from localsched.worker.runtime import run_batch
from tests.support.gates import Gate, notify, wait_for
from tests.support.platform_marks import START_METHODS

N = 12  # quick steps before the one that holds


def _hold(x, blocked, release):
    notify(blocked)
    wait_for(release)
    return x


def _step(x, i, blocked, release):
    return _hold(x + 1, blocked, release) if i == N else x + 1


def _call(i: int, key: str, fn, *args) -> tuple:
    """A ``BatchItem`` calling ``fn(*args)``, its result sent back."""
    return (i, key, (CALL, fn, args, ()), False, (), True)


def test_the_pool_and_the_state_speak_of_slots_alike():
    # (RunState.at_work asks a process batch's job, _JobFuture.task_at_work)
    assert (NO_TASK, QUEUED) == (SLOT_NOT_STARTED, SLOT_QUEUED)


@pytest.mark.parametrize("slots", [True, False], ids=["task-slot", "no-task-slot"])
def test_a_job_says_which_task_its_worker_runs_and_which_it_ran_last(slots):
    platform = dataclasses.replace(_platform.Platform.detect(), task_slots=slots)
    records: list = []
    with Gate() as blocked, Gate() as release, lmp.ProcessPool(1, platform=platform) as pool:
        gates = (blocked.address, release.address)
        batch = [_call(5, "a", abs, -1), _call(7, "b", _hold, 2, *gates), _call(9, "c", abs, -3)]
        job = pool.submit(run_batch, batch, {}, None, False, emit=records.extend)
        queued = pool.submit(abs, -4)  # (one worker: this one waits for it)
        blocked.wait()
        during, waiting = job.task_at_work(), queued.task_at_work()
        release.open()
        assert job.result() is None and queued.result() == 4
        after = job.task_at_work()
    assert waiting == QUEUED
    assert sorted(r[0] for r in records) == [5, 7, 9]
    if slots:
        assert (during, after) == (7, 9)  # (9: the batch's last task, ended)
    else:  # where a worker cannot be handed a slot: it cannot be told
        assert during is after is None


def test_a_windows_worker_is_handed_its_slot_by_name(monkeypatch):
    # Windows' workers start through multiprocessing's spawn, which cannot
    # carry a descriptor: the slot is a named mapping the worker opens by
    # name (simulated here with a POSIX object), so a live view still
    # follows its tasks one by one, and no object is left once it is open.
    from tests.support.macos_sim import objects_of
    from tests.support.windows_sim import WINDOWS, windows_subprocess

    windows_subprocess(monkeypatch)
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    records: list = []
    with Gate() as blocked, Gate() as release, lmp.ProcessPool(1, platform=WINDOWS) as pool:
        gates = (blocked.address, release.address)
        batch = [_call(5, "a", abs, -1), _call(7, "b", _hold, 2, *gates), _call(9, "c", abs, -3)]
        job = pool.submit(run_batch, batch, {}, None, False, emit=records.extend)
        blocked.wait()
        during = job.task_at_work()
        release.open()
        assert job.result() is None
        after = job.task_at_work()
        (worker,) = pool._workers
        assert worker.proc._popen.method == "spawn"
        held = set(os.listdir("/dev/shm")) - before if before else set()
    assert (during, after) == (7, 9)
    assert sorted(r[0] for r in records) == [5, 7, 9]
    assert not held - set(objects_of(os.getpid()))  # (the slot's name is gone once open)


@pytest.mark.parametrize("context", START_METHODS)
def test_a_live_view_of_a_process_run_counts_the_tasks_a_worker_ran(context):
    # The worker had ended steps before N, their records still in it: the
    # view counts them ended, and step N alone at work -- whatever the
    # start method (a spawned worker is handed its slot, not left one).
    states: list = []
    with Gate() as blocked, Gate() as release:
        gates = (blocked.address, release.address)
        graph = {("step", 0): (_step, 0, 0, *gates)}
        graph.update({("step", i): (_step, ("step", i - 1), i, *gates)
                      for i in range(1, N + 3)})
        with Callback(start_state=lambda dsk, state: states.append(state)):
            future = _in_thread(lambda: lmp.get(graph, ("step", N + 2), num_workers=2,
                                                context=context))
            blocked.wait()
            (state,) = states
            running, ended = state.at_work()
            finished = set(state["finished"])
            release.open()
            assert future.result(timeout=120) == N + 3
    assert running == {("step", N)}
    assert not finished & set(ended)
    assert finished | set(ended) == {("step", i) for i in range(N)}


def _in_thread(fn):
    """``fn()`` in a thread of its own; its Future."""
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(1)
    try:
        return executor.submit(fn)
    finally:
        executor.shutdown(wait=False)
