"""The embedded cluster: dask.distributed's own ``SpecCluster`` whose
scheduler and nannies are ``dask spec`` subprocesses (as
``distributed.deploy.subprocess.SubprocessCluster`` makes them), started
and stopped so that they leave nothing behind.

Why not ``SubprocessCluster`` as it is: its close SIGKILLs every process it
started and their children.  A nanny talks to its worker process through
multiprocessing queues whose semaphores, under the spawn start method, are
named files in /dev/shm (``sem.mp-*``, 6 per nanny); only the nanny's own
exit (the semaphores' finalizers) or its multiprocessing resource tracker
(a child of the nanny, which unlinks what is left once every process
holding them is gone) removes them, and the SIGKILL takes both: every run
left 12 behind for good.  (``Client.shutdown()`` does not help: with a
cluster object it only calls the cluster's close.)  And nothing stopped the
processes when the program that started them was killed.  So here, each
process is a ``_DaskSpec`` (dask's ``ProcessInterface``, the member type
``SpecCluster`` expects) that

* **closes** by SIGTERM, on which ``dask spec`` closes its server (a nanny
  closes its worker process first) and exits, then waits, up to ``GRACE``
  seconds, for the process and every process it had started.  If it hangs
  (a nanny closing while it restarts its worker can wait for ever on a
  worker that cannot reach a closed scheduler), it is SIGKILLed alone:
  its worker process exits when its nanny's pipe closes (distributed's
  own watch) and the resource tracker then unlinks the semaphores.  SIGKILL
  for anything still there after that, as a last resort;
* **watches its parent** (this process): ``_BOOT`` starts a thread, then
  runs ``dask spec``'s own ``main``.  When the parent is gone without
  closing the cluster (killed: no ``atexit`` runs), the thread sends its
  process that same SIGTERM, and exits it after ``GRACE`` seconds if it
  hung.  Nothing of the cluster outlives the program that started it.

Each process runs in a session of its own: a Ctrl-C in the terminal
(SIGINT to the program's process group) interrupts the program's
computation, not its cluster, whose workers keep their data.  The processes
import neither localsched nor the caller's ``__main__`` (no
``if __name__ == "__main__":`` guard needed), and log warnings and errors
only (``DASK_LOGGING__DISTRIBUTED=warning``: a script's output stays its
own).  ``SpecCluster`` gives everything else: ``Client(cluster)``, scaling,
and ``client.restart()`` (the nannies restart their worker processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import time
import uuid

import psutil
from distributed import SpecCluster
from distributed.deploy.spec import ProcessInterface
from distributed.worker_memory import parse_memory_limit

#: Seconds a process of the cluster has to close on SIGTERM (and what it
#: started, to exit) before it is SIGKILLed.
GRACE = 10.0

#: Seconds the scheduler has to write its address.
START_TIMEOUT = 60.0

#: ``python -c`` code: a thread watching the parent, then ``dask spec``.
_BOOT = """
import os, signal, threading, time

def watch(parent, grace):
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)  # dask spec closes its server and exits
    time.sleep(grace)
    os._exit(1)  # (it hung closing)

threading.Thread(target=watch, args=({parent}, {grace}), daemon=True,
                 name="watch-parent").start()
from distributed.cli.dask_spec import main
main(prog_name="dask spec")
"""


def start(n_workers: int, threads_per_worker: int) -> SpecCluster:
    """Start the cluster on 127.0.0.1 (ephemeral ports, dashboards
    included); it is running when this returns."""
    nanny = {"cls": _Nanny, "options": {"nanny_kwargs": {
        "host": "127.0.0.1", "nthreads": threads_per_worker,
        "dashboard_address": "127.0.0.1:0", "silence_logs": logging.WARN,
        "memory_limit": parse_memory_limit(
            "auto", 1, n_workers, logger=logging.getLogger(__name__))}}}
    scheduler = {"cls": _Scheduler, "options": {"scheduler_kwargs": {
        "host": "127.0.0.1", "port": 0, "dashboard": True,
        "dashboard_address": "127.0.0.1:0"}}}
    return SpecCluster(workers=dict.fromkeys(range(n_workers), nanny), scheduler=scheduler,
                       worker=nanny, name="localsched-embedded", silence_logs=logging.WARN)


class _DaskSpec(ProcessInterface):
    """One ``dask spec`` subprocess running one dask server (see the
    module docstring for how it stops)."""

    def __init__(self, spec: dict, *args: str, name=None):
        super().__init__(name=name)
        self.process: asyncio.subprocess.Process | None = None
        self._command = [sys.executable, "-c", _BOOT.format(parent=os.getpid(), grace=GRACE),
                         *args, "--spec", json.dumps(spec)]

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *self._command, env=dict(os.environ, DASK_LOGGING__DISTRIBUTED="warning"),
            start_new_session=True)  # (a Ctrl-C in the terminal is not for them)
        await super().start()

    async def close(self) -> None:
        if self.process is not None:
            await _stop(self.process)
        await super().close()


class _Scheduler(_DaskSpec):
    def __init__(self, scheduler_kwargs: dict):
        self.file = os.path.join(tempfile.gettempdir(), f"localsched-scheduler-{uuid.uuid4()}.json")
        super().__init__({"cls": "distributed.Scheduler",
                          "opts": {**scheduler_kwargs, "scheduler_file": self.file}})

    async def start(self) -> None:
        await super().start()
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while self.address is None:
            with contextlib.suppress(OSError, ValueError, KeyError):
                with open(self.file, encoding="utf-8") as f:
                    self.address = json.load(f)["address"]
                break
            if self.process.returncode is not None or time.monotonic() > deadline:
                await self.close()
                raise RuntimeError(
                    "the embedded cluster's scheduler did not start (its error, if any, is above"
                    f" on stderr; exit code {self.process.returncode})")
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        await super().close()
        with contextlib.suppress(OSError):  # (the scheduler removes it unless it was killed)
            os.remove(self.file)


class _Nanny(_DaskSpec):
    def __init__(self, scheduler: str, name=None, nanny_kwargs: dict | None = None):
        opts = {**(nanny_kwargs or {}), "name": name}
        super().__init__({"cls": "distributed.Nanny", "opts": opts}, scheduler, name=name)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM ``process``; wait up to ``GRACE`` seconds for it, SIGKILL it
    alone if it hung; wait up to ``GRACE`` seconds for the processes it had
    started to go; SIGKILL those of them still there."""
    if process.returncode is not None:
        return
    try:
        family = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        family = []
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), GRACE)
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    deadline = time.monotonic() + GRACE
    while _running(family) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    for child in _running(family):
        with contextlib.suppress(psutil.Error):
            child.kill()


def _running(processes: list) -> list:
    out = []
    for p in processes:
        with contextlib.suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
    return out
