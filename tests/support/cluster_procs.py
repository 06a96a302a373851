"""Real ``dask scheduler`` + ``dask worker`` subprocesses for the cluster tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import distributed
import psutil

from tests.support.platform_marks import kill_session, session_alive

#: A scheduler ``--preload`` that shifts the scheduler's wall clock by
#: ``{seconds}`` (format it first): its ``time.time`` and distributed's.
SHIFT_CLOCK = """
import sys, time, distributed.metrics as m
if not hasattr(time, "_unshifted"):
    time._unshifted = time.time
    _real = time.time
    def shifted():
        return _real() + {seconds}
    time.time = shifted
    m.time = shifted
    for mod in list(sys.modules.values()):
        if getattr(mod, "time", None) is _real:
            try:
                mod.time = shifted
            except Exception:
                pass
"""


#: The lifeline each process is started behind (``tests/support/lifeline.py``).
LIFELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lifeline.py")


class SubprocessCluster:
    """``dask scheduler`` and ``dask worker`` processes, each in a session of
    its own, so a finalizer can kill them with everything they started, and
    each behind a lifeline (``lifeline.py``): a test run killed before its
    finalizers ran leaves none of them behind."""

    def __init__(self, tmp_path, n_workers=2, nanny=False, env=None, scheduler_args=()):
        self.procs: list = []
        self.tmp = tmp_path
        # (the workers import this module's task functions)
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.pathsep.join([here, os.path.dirname(os.path.dirname(here)),
                                os.environ.get("PYTHONPATH", "")])
        self.env = dict(os.environ, PYTHONPATH=path, **(env or {}))
        self.file = str(tmp_path / "scheduler.json")
        self.client = None
        self.scheduler_args = list(scheduler_args)
        try:
            self._launch(n_workers, nanny)
        except BaseException:
            self.close()
            raise

    def _launch(self, n_workers, nanny):
        self.scheduler = self._start(
            ["scheduler", "--host", "127.0.0.1", "--port", "0",
             "--dashboard-address", "127.0.0.1:0", "--scheduler-file", self.file,
             *self.scheduler_args])
        deadline = time.monotonic() + 30
        while not os.path.exists(self.file):
            assert time.monotonic() < deadline, "dask scheduler did not start"
            time.sleep(0.05)
        self.workers = [self.start_worker(nanny) for _ in range(n_workers)]
        self.client = distributed.Client(scheduler_file=self.file, set_as_default=False)
        self.client.wait_for_workers(n_workers, timeout=30)

    def _start(self, args):
        # (behind a lifeline: a pipe this process alone writes to, whose end
        # -- this test run killed -- ends the command's whole session)
        p = subprocess.Popen(
            [sys.executable, LIFELINE, sys.executable, "-m", "dask", *args],
            start_new_session=True, env=self.env, stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def start_worker(self, nanny=False):
        return self._start(
            ["worker", "--scheduler-file", self.file, "--nthreads", "1", "--host", "127.0.0.1",
             "--dashboard-address", "127.0.0.1:0", "--nanny" if nanny else "--no-nanny"])

    def pids(self) -> set:
        """The pids of every process of the cluster now (and their children)."""
        out = set()
        for p in self.procs:
            if p.poll() is None:
                out.add(p.pid)
                try:
                    out.update(c.pid for c in psutil.Process(p.pid).children(recursive=True))
                except psutil.Error:
                    pass
        return out

    def restore_workers(self, n_workers=2, nanny=False) -> None:
        """Start workers until ``n_workers`` run (after a test killed some)."""
        alive = len(self.client.scheduler_info()["workers"])
        for _ in range(n_workers - alive):
            self.start_worker(nanny)
        self.client.wait_for_workers(n_workers, timeout=60)

    def worker_pids(self) -> dict:
        """worker address -> pid (of the worker process itself)."""
        return self.client.run(os.getpid)

    def close(self):
        try:
            if self.client is not None:
                self.client.close()
        finally:
            self._stop_processes()

    def _stop_processes(self, grace: float = 10.0) -> None:
        """SIGTERM first (dask's commands close cleanly on it, and each one's
        multiprocessing resource tracker then unlinks its semaphores in
        /dev/shm: a SIGKILL of the whole group left 12 behind per run), to
        the workers and then the scheduler, then SIGKILL to whatever of each
        session is left after ``grace`` seconds each.
        (Windows has no sessions and its SIGTERM is TerminateProcess, which
        orphans a nanny's worker: what each process had started is noted
        first and killed last.)"""
        started = [psutil.Process(pid) for pid in self.pids() if psutil.pid_exists(pid)]
        # The workers first, then the scheduler: a worker whose scheduler is
        # already gone spends seconds trying to reach it before it exits (a
        # nanny's: 8-10 s, so every close of a cluster with nannies took the
        # whole grace; in this order 3-4 s, all of it on SIGTERM).
        scheduler = getattr(self, "scheduler", None)
        for group in ([p for p in self.procs if p is not scheduler],
                      [p for p in self.procs if p is scheduler]):
            for p in group:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            for p in group:
                while time.monotonic() < deadline and (p.poll() is None or session_alive(p)):
                    time.sleep(0.05)
        for p in self.procs:
            kill_session(p)
            p.wait(10)
            if p.stdin is not None:
                p.stdin.close()
        for q in started:
            with contextlib.suppress(psutil.Error):
                q.kill()  # (psutil checks it is still the process noted, not a reused pid)
