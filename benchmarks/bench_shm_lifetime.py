"""What the segment store's lifetime rules cost (issue 16, item 2).

Four figures, printed with the machine's load:

- the cost of one release (``SharedValue.release`` while a computation
  runs) with ``/dev/shm`` empty and with 2,000 unrelated files in it: a
  release counts the free list in memory and never lists the directory, so
  the two must match;
- one fresh hand-off of a value (write, pass, map, unpickle) through a
  named segment, against ``memfd_create`` passed with ``SCM_RIGHTS`` (the
  alternative the design note in ``localsched/_shm/store.py`` weighs);
- starting this process's store (its owner lock and its detached reaper);
- how long after a SIGKILL of an owner holding 16 segments of 4 MB its
  reaper has removed them.

    python benchmarks/bench_shm_lifetime.py
"""

from __future__ import annotations

import itertools
import mmap
import os
import pickle
import socket
import subprocess
import sys
import time

import numpy as np

from localsched._shm import handles
from localsched._shm import store as segments

D = segments.SHM_DIR
_jobs = itertools.count()


def _best(f, n: int = 50) -> float:
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            f()
        times.append((time.perf_counter() - t) / n)
    return min(times) * 1e6


def release_cost(store, n: int = 300) -> float:
    """Median µs of one release."""
    times = []
    for _ in range(n):
        writer = segments.WorkerSegments(store.job_prefix(77, next(_jobs)), [])
        name, size, layout = writer.write([memoryview(b"x" * 100_000)], 0)
        handle = handles.SharedValue(name, size, b"", layout, store)
        t = time.perf_counter()
        handle.release()
        times.append(time.perf_counter() - t)
        store.unlink_deferred()
    times.sort()
    return times[len(times) // 2] * 1e6


def hand_offs(store) -> None:
    a, b = socket.socketpair(socket.AF_UNIX)

    def named(buf, meta):
        writer = segments.WorkerSegments(store.job_prefix(78, next(_jobs)), [])
        name, size, layout = writer.write([buf], 0)
        value = handles.map_value(name, size, meta, layout)
        segments.unlink(name)
        return value

    def memfd(buf, meta):
        fd = os.memfd_create("bench")
        os.pwrite(fd, buf, 0)
        socket.send_fds(a, [b"x"], [fd])
        os.close(fd)
        _, fds, _, _ = socket.recv_fds(b, 1, 1)
        mm = mmap.mmap(fds[0], len(buf), access=mmap.ACCESS_COPY)
        os.close(fds[0])
        return pickle.loads(meta, buffers=[memoryview(mm)])

    for size in (160_000, 8_000_000):
        array = np.ones(size // 8)
        buf = memoryview(array.view("u1"))
        meta = pickle.dumps(array, protocol=5, buffer_callback=lambda _: False)
        print(f"  fresh hand-off of {size >> 10} KiB: named segment "
              f"{_best(lambda b=buf, m=meta: named(b, m)):.0f} µs, memfd + SCM_RIGHTS "
              f"{_best(lambda b=buf, m=meta: memfd(b, m)):.0f} µs")
    a.close()
    b.close()


_OWNER = """
import os, time
from localsched._shm import store as segments
s = segments.store()
w = segments.WorkerSegments(s.job_prefix(1, 1), [])
for i in range(16):
    w.write([memoryview(bytes(4 << 20))], 0)
print(os.getpid(), flush=True)
time.sleep(60)
"""


def reaping(rounds: int = 5) -> list:
    out = []
    for _ in range(rounds):
        p = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True)
        pid = int(p.stdout.readline())
        assert len(segments.live_segments([pid])) == 16
        t = time.monotonic()
        p.kill()
        p.wait()
        deadline = t + 10
        while segments.live_segments([pid]) and time.monotonic() < deadline:
            time.sleep(0.001)
        out.append((time.monotonic() - t) * 1e3)
        p.stdout.close()
    return out


def main() -> None:
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}")
    t = time.perf_counter()
    store = segments.store()
    print(f"  store (owner lock + detached reaper) started in "
          f"{(time.perf_counter() - t) * 1e3:.1f} ms")
    store.begin()  # (a computation runs: releases go to the free list)
    try:
        print(f"  release, /dev/shm empty: {release_cost(store):.1f} µs (median)")
        clutter = [os.path.join(D, f"bench-clutter-{os.getpid()}-{i}") for i in range(2000)]
        try:
            for path in clutter:
                open(path, "w").close()
            print(f"  release, 2,000 other files in /dev/shm: {release_cost(store):.1f} µs")
        finally:
            for path in clutter:
                os.unlink(path)
    finally:
        store.end()
    hand_offs(store)
    print("  SIGKILL of an owner -> its 16 segments (64 MB) gone after, ms:",
          [round(x) for x in reaping()])


if __name__ == "__main__":
    main()
