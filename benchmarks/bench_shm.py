"""Array work across the process boundary: dask and localsched, threads and processes.

The workload of issue #10: ``(x + x.T).mean(axis=0)`` on a random
8000×8000 dask array of 1000×1000 chunks (8 MB each), two workers.  Four
contenders run it in one process, alternating which goes first each round,
best of ``--repeat``:

====================  ==============================================
dask threads          ``dask.threaded.get(num_workers=2)``
dask processes        ``dask.multiprocessing.get(num_workers=2)``
localsched threads    ``localsched.threaded.get(num_workers=2)``
localsched processes  ``localsched.multiprocessing.get(num_workers=2)``
====================  ==============================================

The figure that matters is each library's processes / threads ratio (the
price of crossing the process boundary); the bar (#10) is localsched
processes ≤ 1.5 × localsched threads.  ``--transport pipe`` runs
localsched's processes with shared memory switched off
(``LOCALSCHED_SHM=0``), as before #10, for the before/after figure.
``--cold`` makes localsched's planner forget, before each of its runs,
what earlier computations taught it (``localsched.run.batching.forget``): the
figure for a first computation, whose first batches go one task at a time
until each function is timed.  ``--memory`` also reports the peak of
ResourceProfiler's ``mem`` (shared
memory counted once) for the localsched processes run.

localsched's process pool is started before timing (it persists by
design); dask's multiprocessing scheduler starts a pool per call, which is
part of what a dask user pays (well under a second here).

Run:  python benchmarks/bench_shm.py [--repeat N] [--size 8000] [--chunk 1000]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time


def build(size: int, chunk: int):
    import dask.array as da

    x = da.random.RandomState(42).random_sample((size, size), chunks=chunk)
    y = (x + x.T).mean(axis=0)
    return y


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, metavar="N")
    parser.add_argument("--size", type=int, default=8000)
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--transport", choices=("shm", "pipe"), default="shm",
                        help="localsched processes' transport (pipe: LOCALSCHED_SHM=0)")
    parser.add_argument("--memory", action="store_true",
                        help="also report ResourceProfiler's peak for localsched processes")
    parser.add_argument("--cold", action="store_true",
                        help="localsched forgets what earlier computations taught its planner")
    parser.add_argument("--only", action="append", default=[],
                        help="run only contenders whose name contains this")
    args = parser.parse_args(argv)
    if args.transport == "pipe":
        os.environ["LOCALSCHED_SHM"] = "0"  # read by the parent and by workers started now

    import dask
    import dask.multiprocessing
    import dask.threaded
    import numpy as np

    import localsched.multiprocessing
    import localsched.run.batching
    import localsched.threaded

    y = build(args.size, args.chunk)
    # The low-level graph once, outside the timing (both libraries take it).
    (y_opt,) = dask.optimize(y)
    dsk = dict(y_opt.__dask_graph__())
    keys = y_opt.__dask_keys__()
    ntasks = len(dsk)
    n = 2
    contenders = {
        "dask threads": lambda: dask.threaded.get(dsk, keys, num_workers=n),
        "dask processes": lambda: dask.multiprocessing.get(dsk, keys, num_workers=n),
        "localsched threads": lambda: localsched.threaded.get(dsk, keys, num_workers=n),
        "localsched processes": lambda: localsched.multiprocessing.get(dsk, keys,
                                                                       num_workers=n),
    }
    if args.only:
        contenders = {k: v for k, v in contenders.items() if any(o in k for o in args.only)}
    print(f"(x + x.T).mean(axis=0), {args.size}x{args.size}, chunks {args.chunk}: "
          f"{ntasks} tasks, {n} workers, localsched transport: {args.transport}"
          f"{', cold planner' if args.cold else ''}; "
          f"Python {sys.version.split()[0]}, dask {dask.__version__}, best of {args.repeat}")
    # Warm up: localsched's pools (they persist), imports in workers.
    localsched.multiprocessing.get(dsk, keys, num_workers=n)
    localsched.threaded.get(dsk, keys, num_workers=n)
    best: dict[str, float] = {}
    reference = None
    names = list(contenders)
    for r in range(args.repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            gc.collect()
            if args.cold:
                localsched.run.batching.forget()
            t0 = time.perf_counter()
            out = contenders[name]()
            t = time.perf_counter() - t0
            best[name] = min(best.get(name, t), t)
            value = np.concatenate([np.asarray(o) for o in out]) if isinstance(out, (list, tuple)) \
                else np.asarray(out)
            if reference is None:
                reference = value
            elif not np.allclose(reference, value):
                raise AssertionError(f"{name} computed a different result")
            out = value = None
    for name in names:
        if name in best:
            print(f"  {name:22s} {best[name]:7.3f} s")

    def ratio(a: str, b: str):
        return best[a] / best[b] if a in best and b in best else None

    rows = [
        ("dask processes / dask threads", ratio("dask processes", "dask threads"), None),
        ("localsched processes / localsched threads",
         ratio("localsched processes", "localsched threads"), 1.5),
        ("dask processes / localsched processes",
         ratio("dask processes", "localsched processes"), None),
    ]
    for label, value, bar in rows:
        if value is None:
            continue
        verdict = "" if bar is None else \
            f"  (bar ≤ {bar}x: {'met' if value <= bar else 'NOT met'})"
        print(f"  {label:44s} {value:5.2f}x{verdict}")

    if args.memory:
        from localsched.diagnostics import ResourceProfiler

        gc.collect()
        with ResourceProfiler(dt=0.01) as rprof:
            localsched.multiprocessing.get(dsk, keys, num_workers=n)
        peak = max(r.mem for r in rprof.results)
        base = rprof.results[0].mem
        print(f"  localsched processes peak memory {peak:8.0f} MB "
              f"(at start {base:.0f} MB; ResourceProfiler dt=0.01, shared counted once)")
    localsched.multiprocessing.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
