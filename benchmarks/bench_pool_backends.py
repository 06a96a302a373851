"""Process-pool backends under localsched's scheduler, against dask's.

Why localsched keeps a process pool of its own rather than running on loky
or CPython's ProcessPoolExecutor (the note at the top of
``localsched/_pool/pool.py`` quotes these figures): the same graph, the
overhead benchmark's tree reduction, runs on

- ``dask.multiprocessing.get`` (the reference),
- ``localsched.multiprocessing.get`` on its own ProcessPool (records streamed
  as tasks end),
- ``localsched.multiprocessing.get(pool=...)`` on loky's reusable executor
  and on a ProcessPoolExecutor (no stream: a batch's records arrive with its
  result),

2 workers each, in one process, alternating, best of ``--repeat``, as in
``bench_overhead.py``.  loky is optional: without it its row says so.

Run:  python benchmarks/bench_pool_backends.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import time
from concurrent.futures import ProcessPoolExecutor

import dask
import dask.multiprocessing

import localsched.multiprocessing as lmp

try:  # run as a script or as a module
    from . import graphs
except ImportError:
    import graphs

NUM_WORKERS = 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, metavar="N")
    parser.add_argument("--quick", action="store_true", help="a 3,999-task tree")
    args = parser.parse_args(argv)
    dsk, keys = graphs.tree_reduction(2_000 if args.quick else 57_000)
    n = graphs.count_tasks(dsk)
    executors = {"ProcessPoolExecutor (no stream)": ProcessPoolExecutor(NUM_WORKERS)}
    try:
        import loky

        executors[f"loky {loky.__version__} (no stream)"] = loky.get_reusable_executor(
            max_workers=NUM_WORKERS, timeout=600)
    except ImportError:
        print("loky is not installed: its row is left out")
    runners = {
        "dask.multiprocessing.get": lambda: dask.multiprocessing.get(
            dsk, keys, num_workers=NUM_WORKERS),
        "localsched ProcessPool (streamed)": lambda: lmp.get(dsk, keys, num_workers=NUM_WORKERS),
    }
    for name, ex in executors.items():
        runners[f"localsched on {name}"] = lambda ex=ex: lmp.get(dsk, keys, pool=ex)
    try:
        expected = None
        for run in runners.values():  # warm up every pool; all must agree
            result = run()
            assert expected is None or result == expected, "backends disagree"
            expected = result
        best = dict.fromkeys(runners, float("inf"))
        names = list(runners)
        for r in range(args.repeat):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                gc.collect()
                t0 = time.perf_counter()
                runners[name]()
                best[name] = min(best[name], time.perf_counter() - t0)
    finally:
        for ex in executors.values():
            ex.shutdown()
        lmp.shutdown()
    reference = best["dask.multiprocessing.get"]
    print(f"dask {dask.__version__}, {n:,} tasks, {NUM_WORKERS} workers, best of {args.repeat}")
    for name, seconds in best.items():
        print(f"{name:<48} {seconds / n * 1e6:8.2f} µs/task  {reference / seconds:5.1f}x dask")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
