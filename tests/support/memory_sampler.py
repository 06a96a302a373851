"""The real memory of a process tree, measured from outside (test helper).

``MemorySampler(pid)`` starts a separate Python process that polls, every
``interval`` seconds (20 ms), the resident set of ``pid`` and of all its
descendants (psutil) plus the RAM its files in ``/dev/shm`` take (the
segments whose owner label names a process of the tree: localsched's
``localsched-<pid>_...`` on Linux), and keeps the peak.  Used as a context
manager around a computation::

    with MemorySampler(os.getpid()) as s:
        compute(...)
    s.peak_above_baseline  # bytes

The baseline is the first sample, taken before ``__enter__`` returns.  No
sleeps for ordering: the sampler says ``ready`` once it has its baseline,
and prints its result when told to stop.
"""

from __future__ import annotations

import json
import subprocess
import sys

_SCRIPT = r"""
import json, os, sys, time, psutil

pid, interval = int(sys.argv[1]), float(sys.argv[2])
root = psutil.Process(pid)
SHM = "/dev/shm"
PREFIX = "localsched-"


def sample():
    try:
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return None
    total, pids = 0, set()
    for p in procs:
        try:
            total += p.memory_info().rss
            pids.add(str(p.pid))
        except psutil.Error:
            pass
    try:
        names = os.listdir(SHM)
    except OSError:
        names = []
    for name in names:
        if name.startswith(PREFIX) and name[len(PREFIX):].split("_", 1)[0] in pids:
            try:
                total += os.stat(os.path.join(SHM, name)).st_blocks * 512
            except OSError:
                pass
    return total


import threading

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
baseline = sample()
peak = baseline
n = 1
print("ready", flush=True)
while not stop.wait(interval):
    s = sample()
    if s is not None:
        n += 1
        peak = max(peak, s)
s = sample()
if s is not None:
    peak = max(peak, s)
print(json.dumps({"baseline": baseline, "peak": peak, "samples": n}), flush=True)
"""


class MemorySampler:
    """Peak RSS (+ /dev/shm files) of a process tree above its baseline."""

    def __init__(self, pid: int, interval: float = 0.02):
        self.pid = pid
        self.interval = interval
        self.baseline = self.peak = self.samples = 0
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> MemorySampler:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SCRIPT, str(self.pid), str(self.interval)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if line.strip() != "ready":
            self._proc.kill()
            self._proc.wait()
            raise RuntimeError(f"memory sampler did not start: {line!r}")
        return self

    def __exit__(self, *exc) -> None:
        proc, self._proc = self._proc, None
        assert proc is not None
        try:
            out, _ = proc.communicate("stop\n", timeout=60)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if out.strip():
            result = json.loads(out.strip().splitlines()[-1])
            self.baseline, self.peak = result["baseline"], result["peak"]
            self.samples = result["samples"]

    @property
    def peak_above_baseline(self) -> int:
        return self.peak - self.baseline
