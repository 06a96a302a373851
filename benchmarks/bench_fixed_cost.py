"""The ``overhead`` finding's fixed cost per call, applied as written.

A delayed pandas pipeline (load, clean, summarize; then one combine) over
400,000 rows in 200 frames on 2 threads, recorded with the sampler: the
finding's claim (wall seconds, over the workers) and fix ("the 200 pieces
of 'pipeline_load' as about N"), then the same pipeline in N frames: the
tasks' CPU seconds and the computation's wall, before and after, beside
nothing or three CPU hogs (other programs, detached).

    python benchmarks/bench_fixed_cost.py [--rounds 3] [--loads quiet,hogs]
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from localsched.diagnostics.analysis.rules import findings  # noqa: E402
from tests.diagnostics.analysis import test_findings_loaded as t  # noqa: E402


def cpu(run) -> float:
    return sum(v for k, v in run.metrics.items() if k[2] == "thread-cpu")


def wall(run) -> float:
    return sum(b - a for a, b in run.walls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loads", default="quiet,hogs")
    args = ap.parse_args()
    for load in args.loads.split(","):
        procs = t.started(load)
        try:
            for _ in range(args.rounds):
                run = t.pandas_pipeline()
                said = {f.kind: f for f in findings(run, hold_back=False)}
                found = said.get("overhead")
                pieces = re.search(r"as about (\d+)", found.fix) if found else None
                if found is None or pieces is None or "fixed cost" not in found.title:
                    print(f"{load}: no fixed-cost finding: {[str(f)[:120] for f in said.values()]}")
                    continue
                n = int(pieces.group(1))
                fixed = t.pandas_pipeline(n, 400_000 // n)
                print(f"{load:5} claimed {found.seconds:.3f} s, fix: {n} pieces | tasks' CPU "
                      f"{cpu(run):.3f} -> {cpu(fixed):.3f} s | wall {wall(run):.3f} -> "
                      f"{wall(fixed):.3f} s | load average {os.getloadavg()[0]:.1f}",
                      flush=True)
        finally:
            t.stop(procs)


if __name__ == "__main__":
    main()
