"""localsched.distributed against a bare ``client.get`` on a LocalCluster.

Two bars (issue #9), on a LocalCluster of 2 worker processes (one thread
each, 127.0.0.1, no dashboard):

1. **Overhead.**  ``tree_reduction(2500)`` (4,999 trivial tasks) through
   ``localsched.distributed.get`` with every diagnostic on (Profiler,
   ResourceProfiler(dt=0.25), CacheProfiler, ProgressBar to /dev/null)
   against the same graph through ``client.get``: alternating, same process,
   best of ``--repeat``; target ratio <= 1.1.
2. **Timing fidelity.**  The Profiler's start/end per task against
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

from benchmarks.graphs import count_tasks, tree_reduction  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--leaves", type=int, default=2500)
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


if __name__ == "__main__":
    main()
