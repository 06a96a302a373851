"""Runs whose tasks gain nothing from running at once: the crew's trial of
one worker at a time, for work that holds the GIL.

Two threads running pure-Python work (pandas on small frames,
``json.loads``) do not run at once: they take turns at the GIL, and the
turns cost.  On this machine two threads running a delayed pandas
pipeline's tasks took 415 ms where one took 289: each task's CPU time rose
by half (the GIL handed over, caches refilled).  So the crew
(``localsched.run.threadloop``) measures whether its workers gain from
running at once and, where they lose, runs its tasks one at a time, in the
lane short tasks take.

It is measured on the run's own tasks, with the worker thread's CPU clock
(``platform.thread_cpu_clock``) beside the wall clock, for the run as a
whole: which of two threads loses is a matter of the pair (the one that
keeps the GIL looks busy, the other starves), so one function's figures
would mislead.

1. *Watching*: the first ``TOGETHER`` tasks (of functions not short) that
   end while other workers run tasks.  The workers at once times the share
   of the tasks' time on a CPU is how many CPUs the tasks kept busy.  Work
   holding the GIL keeps one busy, less on a loaded machine; from
   ``TRY_ABOVE`` to ``TRY_BELOW`` the run is tried.  Fewer: the tasks mostly
   waited for I/O, more: they released the GIL; either way the run goes on
   at once (``FREE``), without a trial.
2. *Trying*: else every task runs in the lane, one at a time, for
   ``ALONE`` tasks, and the gain of running at once is estimated from the
   two samples::

       workers at once x (share of the tasks' time on a CPU, together / alone)
                       x (a function's CPU seconds a task, alone / together)

   (the last averaged over the functions in both samples).  Below
   ``MIN_GAIN`` the rest of the run goes one at a time (``LANED``), else at
   once (``FREE``), as it does when too few tasks ran alone (``GIVE_UP``).
   Tasks that wait for I/O wait as long alone as together: the estimate
   says "at once" for them.

A machine busy with other work does not fool it: both samples are of the
run's tasks under the same load.  Beside three CPU hogs two threads of the
pandas pipeline do gain, 1.15x (the process gets more of the machine's
CPUs): on a CPU 31 % of their time, they keep 0.62 CPUs busy and are not
tried.  NumPy there keeps 0.82 busy, is tried, and runs at once.  Where the
thread's CPU clock is coarse (Windows: 15.6 ms ticks), nothing is measured
and tasks run at once, as before.
"""

from __future__ import annotations

__all__ = ["Trial", "WATCHING", "TRYING", "FREE", "LANED"]

# Tasks sampled while others run, then one at a time.
TOGETHER = 12
ALONE = 8
# The CPUs the tasks kept busy, running at once, for which the run is tried.
TRY_ABOVE, TRY_BELOW = 0.7, 1.3
# A trial that ends this many times ``ALONE`` tasks without ``ALONE`` of
# them alone (workers waiting for the lane took it over: tasks that wait for
# one another) is given up: the run goes on at once.
GIVE_UP = 3
# Running at once must be estimated to gain at least this much.
MIN_GAIN = 1.0

WATCHING, TRYING, FREE, LANED = 0, 1, 2, 3


class Trial:
    """A run's samples and the state they led to (see the module
    docstring).  ``add`` takes a task's function, wall and CPU seconds and
    the workers running tasks as it ended; ``laned`` says whether tasks go
    one at a time now, ``measuring`` whether tasks are still measured."""

    __slots__ = ("state", "together", "alone", "functions", "tried")

    def __init__(self) -> None:
        self.state = WATCHING
        self.together = [0, 0.0, 0.0, 0]  # tasks, wall, on a CPU, workers at once
        self.alone = [0, 0.0, 0.0, 0]
        self.functions: dict = {}  # function -> [tasks, CPU] together, [tasks, CPU] alone
        self.tried = 0  # tasks ended while trying (alone or not: see GIVE_UP)

    @property
    def measuring(self) -> bool:
        return self.state < FREE

    @property
    def laned(self) -> bool:
        return self.state in (TRYING, LANED)

    def add(self, function, wall: float, cpu: float, running: int) -> None:
        if self.state == WATCHING:
            if running > 1:
                self._accrue(self.together, 0, function, wall, cpu, running)
                if self.together[0] >= TOGETHER:
                    self.state = TRYING if TRY_ABOVE <= self.cpus() <= TRY_BELOW else FREE
        elif self.state == TRYING:
            self.tried += 1
            if running == 1:
                self._accrue(self.alone, 2, function, wall, cpu, running)
            if self.alone[0] >= ALONE:
                self.state = LANED if self.gain() < MIN_GAIN else FREE
            elif self.tried >= GIVE_UP * ALONE:
                self.state = FREE

    def cpus(self) -> float:
        """How many CPUs the tasks kept busy, running at once."""
        tasks, wall, cpu, workers = self.together
        return workers / tasks * cpu / wall if wall > 0.0 else 0.0

    def gain(self) -> float:
        """The estimated gain of running the tasks at once (see the module
        docstring; 2.0 where a sample took no time to measure)."""
        (n_t, wall_t, cpu_t, workers), (_, wall_a, cpu_a, _) = self.together, self.alone
        if min(wall_t, wall_a, cpu_t, cpu_a) <= 0.0:
            return 2.0
        share = (cpu_t / wall_t) / (cpu_a / wall_a)
        ratios = [(f[3] / f[2]) / (f[1] / f[0]) for f in self.functions.values()
                  if f[0] and f[2] and f[1] > 0.0]
        cpu_per_task = sum(ratios) / len(ratios) if ratios else 1.0
        return workers / n_t * share * cpu_per_task

    def _accrue(self, sums: list, at: int, function, wall: float, cpu: float,
                running: int) -> None:
        sums[0] += 1
        sums[1] += wall
        sums[2] += cpu
        sums[3] += running
        f = self.functions.get(function)
        if f is None:
            f = self.functions[function] = [0, 0.0, 0, 0.0]
        f[at] += 1
        f[at + 1] += cpu
