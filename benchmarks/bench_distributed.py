"""localsched.distributed against a bare ``client.get`` on a LocalCluster.

Two bars (issue #9), on a LocalCluster of 2 worker processes (one thread
each, 127.0.0.1, no dashboard):

1. **Overhead.**  ``tree_reduction(2500)`` (4,999 trivial tasks) through
   ``localsched.distributed.get`` with every diagnostic on (Profiler,
   ResourceProfiler(dt=0.25), CacheProfiler, ProgressBar to /dev/null)
   against the same graph through ``client.get``: alternating, same process,
   best of ``--repeat``; target ratio <= 1.1.
2. **Default Client.**  A dask array reduction (``da.ones`` summed, about
   ``--chunks``^2 chunks) by ``x.compute()`` with the Client as the default
   (``scheduler="dask.distributed"``), with a localsched ProgressBar
   registered against without it: alternating, best of ``--repeat``;
   target ratio <= 1.1.
3. **Timing fidelity.**  The Profiler's start/end per task against
   dask.distributed's own task stream (``get_task_stream``, the compute
   startstops): the largest difference over all tasks; target <= 1 ms.

Run:  python benchmarks/bench_distributed.py [--repeat N] [--leaves N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.graphs import count_tasks, tree_reduction


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--leaves", type=int, default=2500)
    ap.add_argument("--chunks", type=int, default=50)
    args = ap.parse_args(argv)

    import distributed

    import localsched.distributed as ld
    from localsched.diagnostics import CacheProfiler, Profiler, ProgressBar, ResourceProfiler

    dsk, out = tree_reduction(args.leaves)
    n = count_tasks(dsk)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        expected = client.get(dsk, out)  # warm up both paths
        assert ld.get(dsk, out, client=client) == tuple(expected)
        bare, ours = [], []
        devnull = open(os.devnull, "w")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            client.get(dsk, out)
            bare.append(time.perf_counter() - t0)
            with Profiler(), ResourceProfiler(dt=0.25), CacheProfiler(), \
                    ProgressBar(out=devnull):
                t0 = time.perf_counter()
                ld.get(dsk, out, client=client)
                ours.append(time.perf_counter() - t0)
        b, o = min(bare), min(ours)
        print(f"{n} tasks, 2 worker processes, best of {args.repeat}")
        print(f"  bare client.get                  {b:7.3f} s  {b / n * 1e6:8.1f} us/task")
        print(f"  localsched.distributed.get + all {o:7.3f} s  {o / n * 1e6:8.1f} us/task")
        print(f"  ratio {o / b:.3f} (target <= 1.1: {'met' if o / b <= 1.1 else 'MISSED'})")
        print(f"  all runs: bare {[round(x, 3) for x in bare]}, ours {[round(x, 3) for x in ours]}")

        default_client_bar(client, args, devnull)

        with distributed.get_task_stream(client=client) as ts, Profiler() as prof:
            ld.get(dsk, out, client=client)
        theirs = {}
        for rec in ts.data:
            for ss in rec["startstops"]:
                if ss["action"] == "compute":
                    theirs[rec["key"]] = (ss["start"], ss["stop"])
        worst = 0.0
        for r in prof.results:
            s, e = theirs[r.key]
            worst = max(worst, abs(r.start_time - s), abs(r.end_time - e))
        print(f"Profiler vs task stream: {len(prof.results)} tasks, largest difference "
              f"{worst * 1e3:.3f} ms (target <= 1 ms: {'met' if worst <= 1e-3 else 'MISSED'})")


def default_client_bar(client, args, devnull) -> None:
    """Bar 2: x.compute() on the default Client, ProgressBar registered or not."""
    import dask
    import dask.array as da

    from localsched.diagnostics import ProgressBar

    x = da.ones((args.chunks * 10, args.chunks * 10), chunks=10).sum()
    with dask.config.set(scheduler="dask.distributed"), client.as_current():
        expected = x.compute()
        plain, barred = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            assert x.compute() == expected
            plain.append(time.perf_counter() - t0)
            bar = ProgressBar(out=devnull)
            bar.register()
            try:
                t0 = time.perf_counter()
                assert x.compute() == expected
                barred.append(time.perf_counter() - t0)
            finally:
                bar.unregister()
    p, b = min(plain), min(barred)
    n = len(x.__dask_graph__())
    print(f"default Client x.compute(), {n} tasks, best of {args.repeat}")
    print(f"  without callbacks                {p:7.3f} s")
    print(f"  with a registered ProgressBar    {b:7.3f} s")
    print(f"  ratio {b / p:.3f} (target <= 1.1: {'met' if b / p <= 1.1 else 'MISSED'})")
    print(f"  all runs: plain {[round(t, 3) for t in plain]}, bar {[round(t, 3) for t in barred]}")


if __name__ == "__main__":
    main()
