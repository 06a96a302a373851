"""Workloads whose graphs dask builds and fuses: a bag pipeline, a bag
foldby, a delayed pandas pipeline and a 1,600-chunk array sum.

Each runs through ``dask.compute`` with dask's scheduler and with
localsched's, alternating, best of ``--repeat``; the results must agree.
In these, both schedulers spend most of the call in dask's own graph
handling (``__dask_graph__``: optimisation, legacy conversion, fusion) and
in the fused tasks, where dask's ``execute_graph`` orders each task's inner
graph with ``dask.order`` every time it runs; localsched finds that order
once, at compile time (``localsched.plan.fused``).

Run:  python benchmarks/bench_dask_graphs.py [--repeat N] [--only NAME]
      [--schedulers sync,threads,processes] [--cpu]

``--cpu``: calls timed by this process's CPU seconds (all its threads,
not worker processes) instead of wall seconds, for a loaded machine.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Callable

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pandas as pd

import localsched.local
import localsched.multiprocessing
import localsched.threaded

SCHEDULERS: dict[str, tuple[str, Callable]] = {
    "sync": ("sync", localsched.local.get_sync),
    "threads": ("threads", localsched.threaded.get),
    "processes": ("processes", localsched.multiprocessing.get),
}


def double(x: int) -> int:
    return x * 2


def not_third(x: int) -> bool:
    return bool(x % 3)


def record(x: int) -> dict:
    return {"k": x % 10, "v": x}


def by_k(r: dict) -> int:
    return r["k"]


def add_v(acc: int, r: dict) -> int:
    return acc + r["v"]


def plus(a: int, b: int) -> int:
    return a + b


def load(i: int) -> pd.DataFrame:
    return pd.DataFrame({"a": np.arange(1000) + i, "b": np.arange(1000) % 7})


def clean(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.a % 2 == 0]


def agg(df: pd.DataFrame) -> pd.Series:
    return df.groupby("b").a.sum()


def combine(parts: list) -> pd.Series:
    return pd.concat(parts).groupby(level=0).sum()


def bag_pipeline():
    b = db.from_sequence(range(20_000), npartitions=400)
    return b.map(double).filter(not_third).frequencies(sort=True).topk(5, key=1)


def bag_foldby():
    b = db.from_sequence(range(20_000), npartitions=200)
    return b.map(record).foldby(by_k, add_v, 0, plus)


def pandas_pipeline():
    parts = [dask.delayed(agg)(dask.delayed(clean)(dask.delayed(load)(i))) for i in range(300)]
    return dask.delayed(combine)(parts)


def array_sum():
    return da.ones((4000, 4000), chunks=(100, 100)).sum()


WORKLOADS: dict[str, Callable] = {
    "bag-pipeline": bag_pipeline,
    "bag-foldby": bag_foldby,
    "pandas-pipeline": pandas_pipeline,
    "array-sum-1600": array_sum,
}


def same(a, b) -> bool:
    if isinstance(a, pd.Series | pd.DataFrame):
        return a.equals(b)
    return bool(np.all(a == b)) if isinstance(a, np.ndarray | np.generic) else a == b


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, metavar="N")
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--schedulers", default="sync,threads,processes")
    parser.add_argument("--cpu", action="store_true",
                        help="process CPU seconds instead of wall (sync and threads)")
    args = parser.parse_args(argv)
    clock = time.process_time if args.cpu else time.perf_counter
    load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()}, dask {dask.__version__}, {os.cpu_count()} CPUs, "
          f"load average {load_avg:.1f}, best of {args.repeat}"
          f"{', process CPU ms' if args.cpu else ''}")
    print(f"{'workload':<17} {'scheduler':<10} {'dask ms':>9} {'localsched ms':>14} "
          f"{'dask/localsched':>16}")
    try:
        for name, build in WORKLOADS.items():
            if args.only and not any(o in name for o in args.only):
                continue
            for sched in args.schedulers.split(","):
                dask_get, ls_get = SCHEDULERS[sched]
                best = {"dask": float("inf"), "localsched": float("inf")}
                results = {}
                for r in range(args.repeat):
                    for who in (("dask", "localsched") if r % 2 else ("localsched", "dask")):
                        x = build()  # (a fresh collection: nothing cached between runs)
                        gc.collect()
                        t0 = clock()
                        (results[who],) = dask.compute(
                            x, scheduler=dask_get if who == "dask" else ls_get)
                        best[who] = min(best[who], clock() - t0)
                if not same(results["dask"], results["localsched"]):
                    raise AssertionError(f"{name} on {sched}: the results differ")
                print(f"{name:<17} {sched:<10} {best['dask'] * 1e3:>9.1f} "
                      f"{best['localsched'] * 1e3:>14.1f} "
                      f"{best['dask'] / best['localsched']:>15.2f}x", flush=True)
    finally:
        localsched.multiprocessing.shutdown()
        localsched.threaded.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
