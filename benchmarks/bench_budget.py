"""A memory budget (issue #34): what it costs when never reached, and what it holds.

Two parts.

``overhead``: the tiny-task graphs of ``graphs.py`` (a 20,000-leaf tree and
a 10,000-task chain) on sync and threads(2), localsched without a budget
and with ``memory_limit="100GB"`` (never reached: the budget only watches),
alternating in one process, ``--repeat`` times; the best process CPU time
of each (on a shared machine wall time is mostly other people's work); the
difference per task (bar: at most 0.3 us/task).

``workloads``: the held-out workloads of ``tests/support/budget_workloads.py``
(array fan-in, a persisted intermediate reused late, a dataframe shuffle, a
bag groupby), each in a fresh process whose process tree (RSS plus its
``/dev/shm`` files) is sampled every 20 ms from outside: dask's threaded
scheduler without a budget, localsched on sync, threads(2) and
processes(2) with ``memory_limit`` = 200 MB and spilling on, and
``LocalCluster(n_workers=1, threads_per_worker=2, memory_limit=200 MB)``
(the same budget, distributed's own spilling and pausing; a run longer
than ``CLUSTER_TIMEOUT`` is called stuck and killed): peak MB
above the baseline (bar for localsched: 1.1 x 200 + 100 = 320 MB) and
seconds.

Run:  python benchmarks/bench_budget.py [--part overhead|workloads|all]
      [--repeat N] [--only NAME] [--modes sync,threads,processes,dask,cluster]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import graphs  # noqa: E402

import localsched.local  # noqa: E402
import localsched.multiprocessing  # noqa: E402
import localsched.threaded  # noqa: E402

MB = 10**6
# Seconds a LocalCluster run may take before it is called stuck (a worker
# paused or restarted for good).
CLUSTER_TIMEOUT = 300


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()  # (CPU: the machine is shared, wall time is noise)
        fn()
        best = min(best, time.process_time() - t0)
    return best


def overhead(repeat: int, only: str | None = None) -> None:
    import statistics

    cases = {
        "tree-sync": (graphs.tree_reduction(20_000), localsched.local.get_sync, {}),
        "tree-threads": (graphs.tree_reduction(20_000), localsched.threaded.get,
                         {"num_workers": 2}),
        "chain-sync": (graphs.chain(10_000), localsched.local.get_sync, {}),
        "chain-threads": (graphs.chain(10_000), localsched.threaded.get, {"num_workers": 2}),
        # (processes: the caller's CPU, where the budget's readings run)
        "tree-processes": (graphs.tree_reduction(20_000), localsched.multiprocessing.get,
                           {"num_workers": 2}),
    }
    print(f"{'case':<16}{'tasks':>8}{'none us/task':>14}{'budget us/task':>16}{'diff':>8}"
          f"{'median diff':>13}")
    for name, ((dsk, keys), get, kw) in cases.items():
        if only and only not in name:
            continue
        n = graphs.count_tasks(dsk)
        times: dict = {False: [], True: []}
        for r in range(repeat):  # alternating, which goes first too
            order = (False, True) if r % 2 == 0 else (True, False)
            for with_budget in order:
                extra = {"memory_limit": "100GB"} if with_budget else {}
                times[with_budget].append(
                    _best(lambda: get(dsk, keys, **kw, **extra), 1))  # noqa: B023
        a, b = min(times[False]) / n * 1e6, min(times[True]) / n * 1e6
        median = (statistics.median(times[True]) - statistics.median(times[False])) / n * 1e6
        print(f"{name:<16}{n:>8}{a:>14.2f}{b:>16.2f}{b - a:>+8.2f}{median:>+13.2f}", flush=True)


def _cluster_run(name: str, budget: int) -> tuple[int, float]:
    """The workload on a LocalCluster whose two workers share the budget."""
    import subprocess

    from tests.support.memory_sampler import MemorySampler

    code = f"""
import sys, time
sys.path.insert(0, {os.path.join(os.path.dirname(HERE), 'tests', 'support')!r})
import dask, distributed
from budget_workloads import WORKLOADS
coll, check = WORKLOADS[{name!r}]()
with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                              memory_limit={budget}, dashboard_address=None) as c, \\
        distributed.Client(c) as client:
    sys.stdout.write("go\\n"); sys.stdout.flush(); sys.stdin.readline()
    t0 = time.time()
    r = coll.compute()
    seconds = time.time() - t0
    check(r)
    print(seconds, flush=True)
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert p.stdout is not None and p.stdin is not None
    if p.stdout.readline().strip() != "go":
        p.kill()
        p.wait()
        return -1, float("nan")
    with MemorySampler(p.pid) as s:
        p.stdin.write("\n")
        p.stdin.flush()
        try:
            out, _ = p.communicate(timeout=CLUSTER_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return -2, float("nan")
    if p.returncode:
        return -1, float("nan")
    return s.peak_above_baseline, float(out.split()[-1])


def workloads(only: str | None, modes: list) -> None:
    from tests.support.budget_workloads import BUDGET, WORKLOADS, run_measured

    allowed = 1.1 * BUDGET + 100 * MB
    print(f"budget {BUDGET / MB:.0f} MB; localsched's bar: peak <= {allowed / MB:.0f} MB")
    print(f"{'workload':<20}{'mode':<11}{'peak MB':>9}{'seconds':>9}")
    for name in WORKLOADS:
        if only and only not in name:
            continue
        for mode in modes:
            try:
                if mode == "cluster":
                    peak, seconds = _cluster_run(name, BUDGET)
                else:
                    peak, seconds, _ = run_measured(name, mode, BUDGET)
            except AssertionError as exc:
                print(f"{name:<20}{mode:<11}   failed: {str(exc).splitlines()[-1]}")
                continue
            if peak < 0:
                print(f"{name:<20}{mode:<11}   " + ("failed" if peak == -1 else
                                                     f"stuck: killed after {CLUSTER_TIMEOUT} s"))
                continue
            print(f"{name:<20}{mode:<11}{peak / MB:>9.0f}{seconds:>9.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", default="all", choices=["overhead", "workloads", "all"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only")
    ap.add_argument("--modes", default="dask,sync,threads,processes,cluster")
    args = ap.parse_args()
    if args.part in ("overhead", "all"):
        overhead(args.repeat, args.only)
    if args.part in ("workloads", "all"):
        workloads(args.only, args.modes.split(","))


if __name__ == "__main__":
    main()
