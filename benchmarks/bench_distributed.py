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

Every failure is loud: output is line-buffered (a run killed part-way
keeps what it printed, also when redirected to a file), each phase says
when it starts, an error prints its traceback and "bench_distributed
FAILED" and exits 1, and a SIGTERM/SIGHUP/SIGINT (a closed terminal, a
killed background job) says so on stderr and exits 128 + the signal.  (A
background run at 02:26 exited within a minute with an empty output file:
block-buffered output lost to a signal leaves exactly that.)
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.graphs import count_tasks, tree_reduction


def say(message: str) -> None:
    """A phase starts (stderr, at once)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _loud_signal(signum, frame) -> None:
    name = signal.Signals(signum).name
    print(f"bench_distributed FAILED: stopped by {name} (nothing more measured)",
          file=sys.stderr, flush=True)
    sys.exit(128 + signum)


def run(argv=None) -> int:
    """main() with every failure loud (see the module docstring)."""
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    faulthandler.enable()  # (a crash of the interpreter prints its stacks)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _loud_signal)
    try:
        main(argv)
    except SystemExit:
        raise
    except BaseException:  # noqa: B036 -- reported, then the exit status says it
        traceback.print_exc()
        print("bench_distributed FAILED (see the traceback above)", file=sys.stderr,
              flush=True)
        return 1
    return 0


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
    say("starting a LocalCluster of 2 worker processes")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=120)
        say(f"cluster up: {client.dashboard_link}; bar 1, {n} tasks, {args.repeat} rounds")
        expected = client.get(dsk, out)  # warm up both paths
        got = ld.get(dsk, out, client=client)
        if got != tuple(expected):
            raise AssertionError(f"localsched.distributed.get gave {got!r}, "
                                 f"client.get {expected!r}")
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

        say("bar 2: default Client x.compute()")
        default_client_bar(client, args, devnull)

        say("bar 3: Profiler against the task stream")
        with distributed.get_task_stream(client=client) as ts, Profiler() as prof:
            ld.get(dsk, out, client=client)
        theirs = {}
        for rec in ts.data:
            for ss in rec["startstops"]:
                if ss["action"] == "compute":
                    theirs[rec["key"]] = (ss["start"], ss["stop"])
        worst = 0.0
        missing = {r.key for r in prof.results} - set(theirs)
        if missing:
            raise AssertionError(f"{len(missing)} tasks missing from the task stream, "
                                 f"e.g. {sorted(map(str, missing))[:3]}")
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
            got = x.compute()
            plain.append(time.perf_counter() - t0)
            if got != expected:
                raise AssertionError(f"x.compute() gave {got!r}, first {expected!r}")
            bar = ProgressBar(out=devnull)
            bar.register()
            try:
                t0 = time.perf_counter()
                got = x.compute()
                barred.append(time.perf_counter() - t0)
                if got != expected:
                    raise AssertionError(f"x.compute() with a bar gave {got!r}, "
                                         f"without {expected!r}")
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
    sys.exit(run())
