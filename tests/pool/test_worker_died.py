"""A worker process that dies under a task: the post-mortem names that
task, exactly, even when the worker died with finished tasks' records
still unsent (a worker hands records over every millisecond or every few
results, not per task)."""

from __future__ import annotations

import os

import pytest

from localsched import multiprocessing as lmp
from localsched.callbacks import Callback, Needs
from localsched.diagnostics import Profiler
from tests.support.platform_marks import START_METHODS, needs_posix_signals


def _step(x, die_at):
    if x == die_at:
        os._exit(3)
    return x + 1


def _chain(n: int, die_at: int) -> dict:
    dsk: dict = {"step-0": (_step, 0, die_at)}
    dsk.update({f"step-{i}": (_step, f"step-{i - 1}", die_at) for i in range(1, n)})
    return dsk


def _wide(n: int, die_at: int) -> dict:
    dsk: dict = {("w", i): (_step, i, die_at) for i in range(n)}
    dsk["total-0"] = (sum, [("w", i) for i in range(n)])
    return dsk


@pytest.mark.parametrize("context", START_METHODS)
@pytest.mark.parametrize("shape", ["chain", "wide"])
def test_the_task_whose_worker_died_is_named_exactly(shape, context):
    # The chain runs as one batch: the tasks before step-7 had finished,
    # their records unsent, when step-7 killed the worker.
    if shape == "chain":
        dsk, out, culprit = _chain(10, 7), "step-9", "step-7"
    else:
        dsk, out, culprit = _wide(200, 137), "total-0", ("w", 137)
    outcomes: list = []
    with Profiler() as prof, Callback(finish=lambda dsk, state, errored: outcomes.append(
            dict(state.failed))), pytest.raises(lmp.WorkerDiedError) as info:
        lmp.get(dsk, out, num_workers=2, context=context)
    assert [(f.key, f.exc_type) for f in prof.failed] == [(culprit, "WorkerDiedError")]
    assert str(info.value).endswith(f"while running task {culprit!r}")
    assert info.value.exitcode == 3
    (failed,) = outcomes
    assert list(failed) == [culprit]
    assert isinstance(failed[culprit][0], lmp.WorkerDiedError)
    # The pool replaced the worker: the next computation works.
    dsk = _chain(10, -1) if shape == "chain" else _wide(200, -1)
    assert lmp.get(dsk, out, num_workers=2, context=context) == (
        10 if shape == "chain" else sum(range(1, 201)))


def test_without_a_task_slot_every_task_the_worker_may_have_run_is_named():
    # Where a worker cannot say which task it runs (no shared slot on this
    # platform), the error and the post-mortem name every unreported task
    # of the lost batch as "one of" them, never a wrong single task.
    import dataclasses

    from localsched.system import platform as _platform

    shared = lmp.SharedPools(dataclasses.replace(_platform.Platform.detect(), task_slots=False))
    with Profiler() as prof, pytest.raises(lmp.WorkerDiedError, match="one of tasks") as info:
        shared.get(_chain(10, 7), "step-9", num_workers=2)
    failed = {f.key for f in prof.failed}
    assert failed >= {"step-7", "step-8", "step-9"}  # (unreported: step-7 and after)
    assert not failed & {r.key for r in prof.results}
    assert info.value.task_index is None
    assert {f.exc_type for f in prof.failed} == {"WorkerDiedError"}
    assert all("one of tasks" in f.message for f in prof.failed)
    shared.shutdown()


def test_on_windows_the_task_whose_worker_died_is_named_exactly(monkeypatch):
    # Windows' workers (multiprocessing's spawn, no descriptors) are handed
    # their task slot by name: their death names the task as elsewhere.
    from tests.support.windows_sim import WINDOWS, windows_subprocess

    if WINDOWS.slot_names is None:
        pytest.skip("no POSIX objects to simulate Windows' named mappings with")
    windows_subprocess(monkeypatch)
    shared = lmp.SharedPools(WINDOWS)
    try:
        with Profiler() as prof, pytest.raises(lmp.WorkerDiedError,
                                               match="task 'step-7'$") as info:
            shared.get(_chain(10, 7), "step-9", num_workers=2)
        assert [f.key for f in prof.failed] == ["step-7"]
        assert info.value.exitcode == 3
        assert shared.get(_chain(10, -1), "step-9", num_workers=2) == 10
    finally:
        shared.shutdown()


class _Measuring(Callback):
    """Asks for CPU times and sizes: the batch runner's measured path."""

    needs = Needs(results=False, measure=True, sizes=True)


def test_the_task_whose_worker_died_is_named_exactly_while_measuring():
    with Profiler() as prof, _Measuring(), pytest.raises(lmp.WorkerDiedError,
                                                         match="task 'step-7'$"):
        lmp.get(_chain(10, 7), "step-9", num_workers=2)
    assert [f.key for f in prof.failed] == ["step-7"]
    assert lmp.get(_chain(10, -1), "step-9", num_workers=2) == 10


def _nested_then_step(x, die_at):
    # The task that dies first runs a computation of its own (threads, in
    # the worker): its batches must not overwrite which task the worker runs.
    if x == die_at:
        from localsched import threaded

        inner = {f"inner-{i}": (abs, -i) for i in range(20)}
        assert threaded.get(inner, list(inner), num_workers=2) == tuple(range(20))
    return _step(x, die_at)


def test_a_computation_nested_in_a_task_does_not_hide_the_task_that_died():
    with pytest.raises(lmp.WorkerDiedError) as plain:
        lmp.get(_chain(10, 7), "step-9", num_workers=2)
    dsk = _chain(10, 7)
    dsk.update({k: (_nested_then_step, *spec[1:]) for k, spec in dsk.items()})
    with Profiler() as prof, pytest.raises(lmp.WorkerDiedError, match="task 'step-7'$") as info:
        lmp.get(dsk, "step-9", num_workers=2)
    assert [f.key for f in prof.failed] == ["step-7"]
    # (the same graph's index of step-7, not one of the nested computation's)
    assert info.value.task_index == plain.value.task_index is not None


def _interrupt_at(x, at, caller):
    if x == at:  # Ctrl-C reaches the caller while this task runs; it is killed
        import signal
        import time

        os.kill(caller, signal.SIGINT)
        time.sleep(60)  # (until the pool kills this worker)
    return x + 1


@needs_posix_signals  # (os.kill(pid, SIGINT) is TerminateProcess on Windows)
def test_ctrl_c_names_the_task_that_was_running_exactly():
    # Same as a death: the tasks before step-7 had finished, their records
    # unsent, when the computation was interrupted.
    dsk: dict = {"step-0": (_interrupt_at, 0, 7, os.getpid())}
    dsk.update({f"step-{i}": (_interrupt_at, f"step-{i - 1}", 7, os.getpid())
                for i in range(1, 10)})
    with Profiler() as prof, pytest.raises(KeyboardInterrupt):
        lmp.get(dsk, "step-9", num_workers=2)
    assert [t.key for t in prof.interrupted] == ["step-7"]
    assert prof.failed == []
    assert lmp.get(_chain(10, -1), "step-9", num_workers=2) == 10
