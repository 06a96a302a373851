"""The findings on real work, on a quiet machine and beside CPU hogs.

Every workload of ``bench_real.py`` (dask's asv-like arrays and dataframes,
bags, delayed, xarray) runs ``--runs`` times inside
``performance_report(samples=True)`` on localsched's threads (or the
scheduler given), first on the machine as it is, then beside ``--hogs``
programs that spin on the cores (started by this script, killed at its
end).  For each workload and load it prints how many runs said each kind
of finding, and each finding's text once, so that a reader can check it
against the workload: issue #36's bar is that well-shaped work gets no
``overhead``, ``gil``, ``straggler`` or ``transfer`` finding, loaded or
not, and that a loaded run says ``busy``.  Nothing is asserted: the tests
(``tests/diagnostics/analysis``) assert on workloads of each cause; this
looks at many more, held out from them.

Run:  python benchmarks/bench_findings.py [--runs 3] [--hogs 3] [--quick]
          [--only NAME] [--scheduler threads|sync|processes] [--loads quiet,hogs]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import time

import dask

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_real  # noqa: E402

import localsched  # noqa: E402
import localsched.multiprocessing  # noqa: E402
import localsched.threaded  # noqa: E402
from localsched import performance_report  # noqa: E402

#: Findings that are false on well-shaped work (issue #36's bar).
FALSE_ON_WELL_SHAPED = ("overhead", "gil", "straggler", "transfer")

HOG = ("import os, sys; sys.stdout.write('running\\n'); sys.stdout.flush()\n"
       "os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\nwhile True: pass\n")


def start_hogs(n: int) -> list:
    """``n`` programs that spin, each running when returned.  Each is started
    by a shell that exits at once, so that it is no child of this process:
    the load meter counts a run's own child processes as its workers, and
    these are other programs on the machine."""
    import psutil

    hogs = []
    try:
        for _ in range(n):
            shell = subprocess.Popen(["sh", "-c", f"'{sys.executable}' -c \"$0\" & echo $!", HOG],
                                     stdout=subprocess.PIPE, text=True)
            assert shell.stdout is not None
            hogs.append(psutil.Process(int(shell.stdout.readline())))
            assert shell.stdout.readline() == "running\n"  # (it runs)
            shell.stdout.close()
            shell.wait(timeout=30)
    except BaseException:
        stop_hogs(hogs)
        raise
    return hogs


def stop_hogs(hogs: list) -> None:
    import psutil

    for proc in hogs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(hogs, timeout=30)


def watched(w: bench_real.Workload, get, scale: float) -> tuple[float, list]:
    """One run of ``w`` inside a report: its wall seconds and findings (as a
    user reads them: the ones a busy machine makes untrustworthy held back)."""
    with dask.config.set(scheduler=get, num_workers=bench_real.NUM_WORKERS):
        built = w.build(scale)
        collection = built[0] if isinstance(built, tuple) else built
        with performance_report(None, samples=True) as report:
            t0 = time.perf_counter()
            collection.compute()  # type: ignore[attr-defined]
            elapsed = time.perf_counter() - t0
    return elapsed, report.data.findings()


def survey(chosen: list, get, scale: float, runs: int) -> dict:
    """name -> (best wall, Counter of kinds, {kind: a text})."""
    out = {}
    for w in chosen:
        kinds: collections.Counter = collections.Counter()
        texts: dict = {}
        best = float("inf")
        for _ in range(runs):
            elapsed, found = watched(w, get, scale)
            best = min(best, elapsed)
            for f in found:
                kinds[f.kind] += 1
                texts.setdefault(f.kind, f"{f.seconds:.3f} s: {f}")
        out[w.name] = (best, kinds, texts)
        said = ", ".join(f"{k} {n}/{runs}" for k, n in sorted(kinds.items())) or "nothing"
        print(f"  {w.name:32s} {best:6.3f} s  {said}", flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--hogs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="smaller inputs")
    p.add_argument("--only", action="append", default=[], metavar="NAME")
    p.add_argument("--scheduler", default="threads", choices=["sync", "threads", "processes"])
    p.add_argument("--loads", default="quiet,hogs")
    args = p.parse_args(argv)
    get = bench_real.schedulers()[args.scheduler][1]
    scale = 0.1 if args.quick else 1.0
    chosen = [w for w in bench_real.WORKLOADS.values()
              if (not args.only or any(o in w.name for o in args.only))
              and bench_real.available(w) is None]
    results = {}
    try:
        for load in args.loads.split(","):
            print(f"{load} (load average {os.getloadavg()[0]:.1f}), {args.scheduler}, "
                  f"{args.runs} runs each:", flush=True)
            hogs = start_hogs(args.hogs) if load == "hogs" else []
            try:
                results[load] = survey(chosen, get, scale, args.runs)
            finally:
                stop_hogs(hogs)
    finally:
        localsched.multiprocessing.shutdown()
        localsched.threaded.shutdown()
        for d in bench_real._csv_dir:
            shutil.rmtree(d, ignore_errors=True)
    print()
    print("| workload | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for w in chosen:
        cells = []
        for load in results:
            _, kinds, _ = results[load][w.name]
            cells.append(", ".join(f"{k} {n}/{args.runs}" for k, n in sorted(kinds.items()))
                         or "nothing")
        print(f"| {w.name} | " + " | ".join(cells) + " |")
    print()
    for load, by_name in results.items():
        for name, (_, _, texts) in by_name.items():
            for _kind, text in sorted(texts.items()):
                print(f"[{load}] {name}: {text[:600]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
