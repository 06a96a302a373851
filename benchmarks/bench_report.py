"""The performance report of a 100,000-task run: how long it takes to write, how big it is.

A real run -- a tree reduction of ``--leaves`` leaves (about twice as many
tasks) on the threads scheduler -- inside ``localsched.performance_report``
with every diagnostic on (Profiler, ResourceProfiler, CacheProfiler in
bytes, and FineMetrics / SampleProfiler when this localsched has them).
Printed: the tasks, the compute time, the time from the end of the ``with``
block to the page on disk (gathering the records, the JSON, the plots, the
HTML), the page's size, and the same for ``save_json`` and
``to_chrome_trace``.  Targets (issue 8): the page in at most 10 s and at most
25 MB.  Nothing is asserted; best of ``--repeat`` runs.

    python benchmarks/bench_report.py                 # ~100k tasks
    python benchmarks/bench_report.py --leaves 5000 --repeat 1   # smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import localsched  # noqa: E402
from benchmarks.graphs import count_tasks, tree_reduction  # noqa: E402
from localsched import diagnostics  # noqa: E402
from localsched.threaded import get  # noqa: E402

TIME_TARGET = 10.0
SIZE_TARGET = 25e6


def one_run(leaves: int, directory: str) -> dict:
    dsk, keys = tree_reduction(leaves)
    page = os.path.join(directory, "report.html")
    report = localsched.performance_report(page, dt=0.1)
    with report:
        t0 = time.perf_counter()
        get(dsk, keys, num_workers=2)
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    data = report.data
    t3 = time.perf_counter()
    data.save_json(os.path.join(directory, "run.json"))
    t4 = time.perf_counter()
    data.to_chrome_trace(os.path.join(directory, "trace.json"))
    t5 = time.perf_counter()
    return {
        "tasks": count_tasks(dsk), "recorded": len(data.tasks), "compute": t1 - t0,
        "page_s": t2 - t1, "page_mb": os.path.getsize(page) / 1e6,
        "json_s": t4 - t3, "json_mb": os.path.getsize(os.path.join(directory, "run.json")) / 1e6,
        "trace_s": t5 - t4,
        "trace_mb": os.path.getsize(os.path.join(directory, "trace.json")) / 1e6,
        "activities": len(data.activities), "samples": len(data.samples),
        "metrics": len(data.metrics),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=50_000,
                        help="leaves of the tree reduction (tasks: about twice as many)")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    args = parser.parse_args(argv)
    collectors = [name for name in ("FineMetrics", "SampleProfiler")
                  if hasattr(diagnostics, name)]
    print(f"collectors beyond Profiler/ResourceProfiler/CacheProfiler: "
          f"{', '.join(collectors) or 'none (not in this localsched yet)'}")
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-report-") as directory:
            r = one_run(args.leaves, directory)
        runs.append(r)
        print(f"run {i + 1}: {r['tasks']:,} tasks ({r['recorded']:,} recorded, "
              f"{r['activities']:,} activities, {r['samples']:,} samples, "
              f"{r['metrics']} metric entries), compute {r['compute']:.2f} s; "
              f"page {r['page_s']:.2f} s, {r['page_mb']:.1f} MB; "
              f"json {r['json_s']:.2f} s, {r['json_mb']:.1f} MB; "
              f"trace {r['trace_s']:.2f} s, {r['trace_mb']:.1f} MB", flush=True)
    best = min(runs, key=lambda r: r["page_s"])
    ok_time = best["page_s"] <= TIME_TARGET
    ok_size = best["page_mb"] * 1e6 <= SIZE_TARGET
    print(f"best: report written in {best['page_s']:.2f} s (target <= {TIME_TARGET:.0f} s: "
          f"{'met' if ok_time else 'MISSED'}), {best['page_mb']:.1f} MB (target <= "
          f"{SIZE_TARGET / 1e6:.0f} MB: {'met' if ok_size else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
