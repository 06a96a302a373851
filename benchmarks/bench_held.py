"""Memory held after return: outputs the caller drops must go at once.

Eight computations in a loop, each returning a 200 MB array that the caller
drops before the next, with the cyclic garbage collector disabled.  The
figure is the peak, over the loop, of this process's RSS plus the shared
memory it maps or owns (``/dev/shm``), above what it held before: one
computation's input and output (400 MB) when nothing outlives its
computation, eight times more when a reference cycle keeps every run alive
until a collection.

Run:  python benchmarks/bench_held.py [--size-mb 200] [--runs 8]
"""

from __future__ import annotations

import argparse
import gc
import os
import threading
import time

import numpy as np
import psutil

import localsched.multiprocessing
import localsched.threaded

_proc = psutil.Process()


def _shared_memory() -> int:
    """Bytes of /dev/shm this process maps (outputs that arrived through
    shared memory, touched or not) or owns unmapped (its own segments)."""
    total = 0
    seen = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "/dev/shm/" in line:
                span, *_rest, path = line.split(maxsplit=5)
                start, end = (int(x, 16) for x in span.split("-"))
                total += end - start
                seen.add(os.path.basename(path.strip().removesuffix(" (deleted)")))
    prefix = f"localsched-{os.getpid()}-"
    for name in os.listdir("/dev/shm"):
        if name.startswith(prefix) and name not in seen:
            try:
                total += os.stat(os.path.join("/dev/shm", name)).st_blocks * 512
            except OSError:
                pass
    return total


def held() -> int:
    return _proc.memory_info().rss + _shared_memory()


def peak_during(fn) -> int:
    peak = [held()]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], held())
            time.sleep(0.005)

    t = threading.Thread(target=watch)
    t.start()
    try:
        fn()
    finally:
        stop.set()
        t.join()
    return peak[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    n = args.size_mb * 1_000_000 // 8
    gets = {"threads": localsched.threaded.get,
            "processes": lambda d, k: localsched.multiprocessing.get(d, k, num_workers=2)}
    try:
        for name, get in gets.items():
            get({"warm": (abs, -1)}, "warm")
            gc.collect()
            gc.disable()
            try:
                before = held()

                def loop(get=get):
                    for i in range(args.runs):
                        out = get({"x": (np.full, n, float(i)), "y": (np.add, "x", 1)}, "y")
                        del out

                peak = peak_during(loop)
            finally:
                gc.enable()
                gc.collect()
            print(f"{name}: peak +{(peak - before) / 1e6:,.0f} MB over {args.runs} "
                  f"computations of {args.size_mb} MB (gc disabled)", flush=True)
    finally:
        localsched.multiprocessing.shutdown()


if __name__ == "__main__":
    main()
