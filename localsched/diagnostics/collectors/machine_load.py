"""The machine around a recording: how busy its cores were, and BLAS's threads.

Two facts the findings need and the task records cannot give:

- ``LoadMeter``: the CPU seconds the whole machine spent (``psutil.cpu_times``:
  every process's) and this process with its descendants (the workers)
  spent, between ``start()`` and ``stop()``.  Their difference, less
  what a hypervisor took from this virtual machine's cores (``steal``:
  other machines' work, or its own on this one's behalf -- a first touch
  of fresh memory costs it), is what other processes took: a machine busy
  with them makes tasks wait for a CPU, which looks like waiting for the
  GIL, stragglers and overhead (``analysis.causes``' ``busy`` finding
  holds those back).  Also the CPU
  of this process's threads that Python did not start (BLAS's pools), and
  how long the threads of this process and its workers waited for a CPU
  (``cpu_wait``: Linux's run-queue wait, ``/proc/<pid>/task/<tid>/schedstat``,
  read at start and stop only): a burst of load that an average hides still
  makes them wait, and that wait is no GIL's, I/O's or hand-off's.
- ``blas_threads()``: how many threads the BLAS/OpenMP libraries NumPy
  loaded will use per call -- threadpoolctl's answer where it is installed
  (it asks the loaded libraries), else the environment variables, which the
  libraries read once, when NumPy is imported.

Both are plain dicts (``RunData.meta["load"]``, ``meta["blas"]``), saved with
the run.

>>> meter = LoadMeter().start()
>>> sorted(meter.stop())
['caller_cpu', 'cores', 'cpu_wait', 'machine_cpu', 'native_cpu', 'own_cpu', 'seconds', 'steal']
"""

from __future__ import annotations

import os
import sys
import time

from ...system import blas as _blas
from ...system import platform as _platform

__all__ = ["LoadMeter", "blas_threads", "BLAS_VARIABLES"]

#: The variables BLAS and OpenMP libraries read when loaded, most specific first.
BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def _busy(times) -> float:
    """CPU seconds spent on something other than idling or waiting for I/O."""
    idle = getattr(times, "idle", 0.0) + getattr(times, "iowait", 0.0)
    total = sum(times)
    # (guest time is already counted in user time on Linux)
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return total - idle


class LoadMeter:
    """CPU seconds of the machine and of this process tree over a stretch.

    ``descendants=False``: this process alone (with its reaped children),
    without the scan of every process that finds its live descendants
    (psutil: 2-25 ms, twice) -- for a dashboard's computations on threads,
    which a millisecond can matter to and no worker process runs."""

    def __init__(self, descendants: bool = True):
        import psutil

        self._psutil = psutil
        self._descendants = descendants
        self._me = psutil.Process()
        self._t0 = self._machine0 = self._thread0 = self._steal0 = 0.0
        self._own0: dict = {}
        self._waits0: dict | None = None

    def _own(self) -> dict:
        """``{pid: CPU seconds}`` of this process (its reaped children's
        included) and its live descendants."""
        gone = (self._psutil.NoSuchProcess, self._psutil.AccessDenied)
        t = self._me.cpu_times()
        out = {self._me.pid: t.user + t.system + t.children_user + t.children_system}
        try:
            children = self._me.children(recursive=True) if self._descendants else []
        except gone:
            children = []
        for child in children:
            try:
                c = child.cpu_times()
            except gone:
                continue
            out[child.pid] = c.user + c.system
        return out

    def _threads(self) -> dict:
        """``{native thread id: CPU seconds}`` of this process's threads."""
        try:
            return {t.id: t.user_time + t.system_time for t in self._me.threads()}
        except (self._psutil.AccessDenied, self._psutil.NoSuchProcess, OSError):
            return {}

    def start(self) -> LoadMeter:
        self._threads0 = self._threads()
        self._thread0 = time.thread_time()
        self._t0 = time.monotonic()
        times = self._psutil.cpu_times()
        self._machine0, self._steal0 = _busy(times), getattr(times, "steal", 0.0)
        self._own0 = self._own()
        self._waits0 = _platform.threads_cpu_waits(self._own0)
        return self

    def stop(self) -> dict:
        """``{"cores", "seconds", "machine_cpu", "own_cpu", "caller_cpu",
        "native_cpu", "cpu_wait", "steal"}`` since ``start()``: ``caller_cpu``, the CPU
        of the thread that started and stops it (the caller's: building
        graphs, its own work; call ``stop`` from the same thread);
        ``native_cpu``, that of this process's threads that are not Python's
        (BLAS's and OpenMP's pools: their CPU is no task thread's);
        ``cpu_wait``, the seconds the threads of this process and its workers
        waited for a CPU (summed over threads; a thread started meanwhile
        counts from its start; None where the system does not say);
        ``steal``, the seconds a hypervisor ran something else while this
        machine's CPUs wanted to run (in ``machine_cpu``; 0 on bare metal)."""
        import threading

        times = self._psutil.cpu_times()
        machine = _busy(times) - self._machine0
        steal = getattr(times, "steal", 0.0) - self._steal0
        owned = self._own()
        own = sum(v - self._own0.get(pid, 0.0) for pid, v in owned.items())
        before = self._waits0
        waits = _platform.threads_cpu_waits(owned) if before is not None else None
        waited = None if waits is None or before is None else sum(
            max(0.0, v - before.get(k, 0.0)) for k, v in waits.items())
        python = {t.native_id for t in threading.enumerate()}
        native = sum(v - self._threads0.get(tid, 0.0) for tid, v in self._threads().items()
                     if tid not in python)
        return {"cores": os.cpu_count() or 1, "seconds": time.monotonic() - self._t0,
                "machine_cpu": max(0.0, machine), "own_cpu": max(0.0, own),
                "caller_cpu": max(0.0, time.thread_time() - self._thread0),
                "native_cpu": max(0.0, native), "cpu_wait": waited,
                "steal": max(0.0, steal)}


def blas_threads() -> dict | None:
    """``{"threads", "source", "libraries", "environment"}``: the threads a
    BLAS call of NumPy will use (the most of its loaded libraries), and the
    BLAS variables the environment sets (``system.blas.VARIABLES``: a process
    pool's workers then run as many, else their share of the cores); None
    when NumPy is not imported (no BLAS loaded: nothing to say)."""
    if "numpy" not in sys.modules:
        return None
    found = _blas_threads()
    found["environment"] = {name: os.environ[name] for name in _blas.VARIABLES
                            if name in os.environ}
    return found


def _blas_threads() -> dict:
    """``blas_threads`` without the environment's variables."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        threadpool_info = None
    if threadpool_info is not None:
        try:
            info = threadpool_info()
        except Exception:  # (a library it cannot ask: fall back on the environment)
            info = []
        if info:
            return {"threads": max(int(i.get("num_threads") or 1) for i in info),
                    "source": "threadpoolctl",
                    "libraries": sorted({str(i.get("internal_api")) for i in info})}
    for var in BLAS_VARIABLES:
        value = os.environ.get(var, "").strip().split(",")[0]
        if value.isdigit() and int(value) > 0:
            return {"threads": int(value), "source": var, "libraries": []}
    # (unset: OpenBLAS and OpenMP start a thread per core)
    return {"threads": os.cpu_count() or 1, "source": "default", "libraries": []}
