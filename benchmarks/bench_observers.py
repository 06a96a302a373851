"""What observing costs: each diagnostic alone, all six, and the report.

Threads (2 workers), the tree reduction of ``graphs.py``: the wall time per
task of a run with one diagnostic entered (outside the timed region) minus
the same run without, best of ``--repeat`` each, alternating.  Beside it,
what a shared machine disturbs less: the CPU time of the whole process
(all its threads, which share the GIL) per task, and the garbage
collector's collections, of the same best runs.  Processes
(2 workers), independent chains of tasks whose results are 200 kB lists:
the wall time with ``performance_report`` against without (the bar: within
10 %), since there a diagnostic that read results would make them travel.

Run:  python benchmarks/bench_observers.py [--repeat N] [--leaves N]
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import resource
import tempfile
import time
from contextlib import ExitStack

import localsched.multiprocessing
import localsched.threaded
from localsched.diagnostics import (
    CacheProfiler,
    FineMetrics,
    Profiler,
    ProgressBar,
    ResourceProfiler,
    SampleProfiler,
    performance_report,
)

try:  # run as a script or as a module
    from . import graphs
except ImportError:
    import graphs


def classic() -> list:
    return [ProgressBar(out=io.StringIO()), Profiler(), ResourceProfiler(dt=1),
            CacheProfiler()]


OBSERVERS = {
    "ProgressBar": lambda: [ProgressBar(out=io.StringIO())],
    "Profiler": lambda: [Profiler()],
    "ResourceProfiler(dt=1)": lambda: [ResourceProfiler(dt=1)],
    "CacheProfiler()": lambda: [CacheProfiler()],
    "CacheProfiler('nbytes')": lambda: [CacheProfiler(metric="nbytes")],
    "FineMetrics": lambda: [FineMetrics()],
    "SampleProfiler(0.01)": lambda: [SampleProfiler(interval=0.01)],
    "all six": lambda: classic() + [FineMetrics(), SampleProfiler(interval=0.01)],
}


def timed(get, dsk, keys, make) -> float:
    return timed_cpu(get, dsk, keys, make)[0]


def timed_cpu(get, dsk, keys, make) -> tuple:
    """(wall seconds, process CPU seconds, garbage collections) of one run."""
    with ExitStack() as stack:
        for cm in make():
            stack.enter_context(cm)
        gc.collect()
        collections = sum(s["collections"] for s in gc.get_stats())
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        get(dsk, keys)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        return wall, cpu, sum(s["collections"] for s in gc.get_stats()) - collections


def threads(repeat: int, leaves: int) -> None:
    dsk, keys = graphs.tree_reduction(leaves)
    n = graphs.count_tasks(dsk)

    def get(d, k):
        return localsched.threaded.get(d, k, num_workers=2)

    get(dsk, keys)  # warm
    print(f"threads(2), tree of {n} tasks, best of {repeat}; µs/task added "
          f"(wall; process CPU), garbage collections")
    for name, make in OBSERVERS.items():
        inf = (float("inf"), 0.0, 0)
        base = obs = inf
        for _ in range(repeat):
            base = min(base, timed_cpu(get, dsk, keys, list))
            obs = min(obs, timed_cpu(get, dsk, keys, make))
        added_wall, added_cpu = (1e6 * (obs[k] - base[k]) / n for k in (0, 1))
        print(f"  {name:26s} {added_wall:6.2f}; {added_cpu:5.2f}"
              f"   (without {1e6 * base[0] / n:.2f}; {1e6 * base[1] / n:.2f}, "
              f"with {1e6 * obs[0] / n:.2f}; {1e6 * obs[1] / n:.2f})  "
              f"gc {base[2]} -> {obs[2]}")


def make_list(i, n):
    return list(range(i, i + n))


def step(values):
    return [v + 1 for v in values]


def processes(repeat: int) -> None:
    dsk = {}
    for c in range(40):
        dsk[("m", c, 0)] = (make_list, c, 25_000)  # about 200 kB a result
        for j in range(1, 6):
            dsk[("m", c, j)] = (step, ("m", c, j - 1))
    dsk["total"] = (len, [("m", c, 5) for c in range(40)])

    def get(d, k):
        return localsched.multiprocessing.get(d, k, num_workers=2)

    get(dsk, "total")  # warm the pool and the planner
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "r.html")
    base = obs = float("inf")
    for _ in range(repeat):
        base = min(base, timed(get, dsk, "total", list))
        obs = min(obs, timed(get, dsk, "total",
                             lambda: [performance_report(filename=path)]))
    print(f"processes(2), {len(dsk)} tasks of 200 kB results, best of {repeat}: "
          f"without {base:.3f} s, with performance_report {obs:.3f} s "
          f"({100 * (obs / base - 1):+.1f} %)")
    os.remove(path)
    os.rmdir(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--leaves", type=int, default=20_000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    threads(args.repeat, args.leaves)
    processes(args.repeat)
    localsched.multiprocessing.shutdown()


if __name__ == "__main__":
    main()
