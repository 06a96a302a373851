"""A threads run whose tasks gain nothing from running at once (they hold
the GIL) runs them one at a time, after a trial on its own tasks; tasks
that release the GIL or wait for I/O keep running at once (see
``localsched/run/contention.py``)."""

from __future__ import annotations

import threading
import time

import pytest

from localsched import threaded
from localsched.run import contention, threadloop
from localsched.system import platform as _platform
from tests.support.windows_sim import WINDOWS

# -- the trial's decision, on figures measured on this machine --------------------


def _trial(together: tuple, alone: tuple | None, workers: int = 2) -> contention.Trial:
    """A trial fed ``TOGETHER`` tasks of (wall, CPU) seconds with ``workers``
    running, then ``ALONE`` tasks of ``alone`` run one at a time."""
    trial = contention.Trial()
    for _ in range(contention.TOGETHER):
        trial.add("f", *together, workers)
    if alone is not None and trial.state == contention.TRYING:
        for _ in range(contention.ALONE):
            trial.add("f", *alone, 1)
    return trial


def test_work_holding_the_gil_is_tried_and_then_run_one_at_a_time():
    # Two threads of the pandas pipeline's tasks, quiet: on a CPU 54 % of
    # their time, and a task's CPU time 1.56x what it is alone.
    trial = _trial((1e-3, 0.54e-3), None)
    assert trial.state == contention.TRYING and trial.laned
    for _ in range(contention.ALONE):
        trial.add("f", 0.35e-3, 0.346e-3, 1)
    assert trial.gain() == pytest.approx(2 * 0.54 / 0.99 / 1.56, rel=0.02)
    assert trial.state == contention.LANED and trial.laned and not trial.measuring


def test_work_releasing_the_gil_runs_at_once_without_a_trial():
    trial = _trial((1e-3, 0.99e-3), None)  # (NumPy's sort: two CPUs busy)
    assert trial.state == contention.FREE and not trial.laned and not trial.measuring


def test_tasks_waiting_for_io_run_at_once_without_a_trial():
    trial = _trial((5e-3, 0.25e-3), None, workers=8)  # (8 workers, 0.4 CPUs busy)
    assert trial.state == contention.FREE


def test_a_loaded_machine_does_not_make_work_releasing_the_gil_run_one_at_a_time():
    # NumPy beside three CPU hogs: on a CPU 41 % of the time at once, which
    # is tried, and 49 % alone, for the same CPU a task: running at once wins.
    trial = _trial((1e-3, 0.41e-3), (0.41e-3 / 0.49, 0.41e-3))
    assert trial.gain() == pytest.approx(2 * 0.41 / 0.49, rel=0.01)
    assert trial.state == contention.FREE


def test_beside_cpu_hogs_work_holding_the_gil_keeps_the_cpu_share_two_threads_get():
    # The pandas pipeline beside three hogs: two threads gained 1.15x (more
    # of the machine's CPUs), on a CPU 31 % of their time: not tried.
    assert _trial((1e-3, 0.31e-3), None).state == contention.FREE


def test_io_that_happens_to_look_like_one_busy_cpu_is_run_at_once_after_its_trial():
    # Tasks half on a CPU, half waiting for I/O: one CPU busy with two
    # workers (tried), but alone they wait as much: running at once wins.
    trial = _trial((2e-3, 1e-3), (2e-3, 1e-3))
    assert trial.gain() == pytest.approx(2.0)
    assert trial.state == contention.FREE


def test_tasks_ending_alone_while_watching_are_not_counted_together():
    trial = contention.Trial()
    for _ in range(3 * contention.TOGETHER):
        trial.add("f", 1e-3, 0.5e-3, 1)
    assert trial.state == contention.WATCHING and trial.together[0] == 0


def test_a_trial_whose_tasks_never_end_alone_is_given_up():
    trial = _trial((1e-3, 0.5e-3), None)
    for _ in range(contention.GIVE_UP * contention.ALONE - 1):
        trial.add("f", 1e-3, 0.5e-3, 2)
        assert trial.state == contention.TRYING
    trial.add("f", 1e-3, 0.5e-3, 2)
    assert trial.state == contention.FREE


def test_the_cpu_per_task_compares_each_function_with_itself():
    # Function a's tasks are ten times b's: comparing all tasks at once
    # would read a's share of the samples, not contention.
    trial = contention.Trial()
    for i in range(contention.TOGETHER):
        trial.add("a" if i % 2 else "b", 2e-3 if i % 2 else 0.2e-3,
                  1e-3 if i % 2 else 0.1e-3, 2)
    for i in range(contention.ALONE):
        trial.add("b" if i < 7 else "a", 0.15e-3 if i < 7 else 1.5e-3,
                  0.1e-3 if i < 7 else 1e-3, 1)
    # each function's CPU a task is the same alone: only the shares count
    # (all tasks pooled would read 0.21 ms a task alone against 0.55: 0.58)
    assert trial.gain() == pytest.approx(2 * 0.5 / (1.7e-3 / 2.55e-3), rel=0.01)
    assert trial.state == contention.FREE


def test_windows_coarse_thread_clock_measures_nothing():
    assert _platform.thread_cpu_clock(WINDOWS) is None
    assert _platform.thread_cpu_clock() is time.thread_time


# -- real runs --------------------------------------------------------------------


def spin(x, ms: float = 1.0):
    """A task of ``ms`` of wall time (over ``SHORT``: never a short task)."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass
    return x


class Overlaps:
    """Tasks that note how many of them ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.at_once: list = []  # how many ran at once as each started

    def task(self, x):
        with self.lock:
            self.now += 1
            self.at_once.append(self.now)
        try:
            return spin(x)
        finally:
            with self.lock:
                self.now -= 1


class Decided(contention.Trial):
    """A trial that decides as told, whatever the machine measures."""

    gains = 0.5

    def cpus(self) -> float:
        return 1.0

    def gain(self) -> float:
        return self.gains


def laned_after_each_measured_task(monkeypatch) -> list:
    """Whether the run went one task at a time, after each measured task."""
    states: list = []
    real_probed = threadloop.Crew._probed

    def probed(crew, g, sample):
        real_probed(crew, g, sample)
        states.append(crew.all_laned)

    monkeypatch.setattr(threadloop.Crew, "_probed", probed)
    return states


@pytest.fixture
def decided(monkeypatch):
    monkeypatch.setattr(contention, "Trial", Decided)
    return laned_after_each_measured_task(monkeypatch)


def two_that_meet(n: int = 40) -> dict:
    """n spinning tasks, then two that end only once both run ("out")."""
    barrier = threading.Barrier(2, timeout=30)
    dsk: dict = {("t", i): (spin, i) for i in range(n)}
    dsk["first"] = (sum, [("t", i) for i in range(n)])
    dsk["a"] = (lambda first: barrier.wait() is not None and first, "first")
    dsk["b"] = (lambda first: barrier.wait() is not None and first, "first")
    dsk["out"] = (sum, ["a", "b"])
    return dsk


def test_a_run_its_trial_found_no_faster_at_once_runs_one_task_at_a_time(decided):
    overlaps = Overlaps()
    n = 120
    dsk: dict = {("t", i): (overlaps.task, i) for i in range(n)}
    dsk["all"] = (sum, [("t", i) for i in range(n)])
    assert threaded.get(dsk, "all", num_workers=2) == sum(range(n))
    # every task is measured until the trial ends, then none
    trial_tasks = len(decided)
    assert decided[-1] is True and trial_tasks < n
    after = overlaps.at_once[trial_tasks + 2:]  # (the trial's last tasks ending)
    # one at a time (a holder preempted for a whole patience may be taken over)
    assert sum(k > 1 for k in after) <= len(after) // 10, overlaps.at_once


def test_a_run_its_trial_found_faster_at_once_still_spreads(decided, monkeypatch):
    monkeypatch.setattr(Decided, "gains", 1.5)
    # after the trial: two tasks that must run at once to end
    assert threaded.get(two_that_meet(40), "out", num_workers=2) == 2 * sum(range(40))
    assert decided[-1] is False


def test_tasks_that_wait_for_each_other_meet_in_a_run_going_one_at_a_time(decided):
    # The lane's patience: a worker takes it over from a holder that started
    # no task for twice the longest mean task time.
    assert threaded.get(two_that_meet(40), "out", num_workers=2) == 2 * sum(range(40))
    assert True in decided


def test_a_failing_task_during_the_trial_fails_the_run_and_names_it(decided):
    def boom(x):
        if x == 5:
            raise ValueError("task five")
        return spin(x)

    dsk: dict = {("t", i): (boom, i) for i in range(30)}
    dsk["all"] = (sum, [("t", i) for i in range(30)])
    with pytest.raises(ValueError, match="task five"):
        threaded.get(dsk, "all", num_workers=2)
    assert threaded.get({"x": (spin, 1)}, "x", num_workers=2) == 1


def test_sleeping_tasks_are_never_tried_one_at_a_time(monkeypatch):
    states = laned_after_each_measured_task(monkeypatch)
    barrier = threading.Barrier(4, timeout=30)

    def wait(i):
        if i < 4:
            barrier.wait()  # (four at once, whatever the machine's load)
        time.sleep(2e-3)
        return i

    dsk: dict = {("w", i): (wait, i) for i in range(40)}
    dsk["all"] = (sum, [("w", i) for i in range(40)])
    assert threaded.get(dsk, "all", num_workers=4) == sum(range(40))
    assert states and not any(states)


def test_one_worker_measures_nothing(monkeypatch):
    calls: list = []
    monkeypatch.setattr(threadloop.Crew, "_probe",
                        lambda crew, spec, cache: calls.append(1))
    dsk: dict = {("t", i): (spin, i) for i in range(10)}
    dsk["all"] = (sum, [("t", i) for i in range(10)])
    assert threaded.get(dsk, "all", num_workers=1) == 45
    assert not calls
