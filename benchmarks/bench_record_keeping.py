"""What keeping each task's record costs, for an instruction counter.

Runs ``get_sync`` on a tree of trivial tasks once warm, then once inside
the profilers that read the run's records (``prof``: Profiler and
CacheProfiler(metric="nbytes"); ``fine``: FineMetrics; ``plain``: none).
Wall times on a shared machine are too noisy for a difference of a tenth
of a microsecond; instructions are not.  Count at two sizes and take the
slope (the start-up cancels)::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/bench_record_keeping.py 1000 prof
    valgrind ... python benchmarks/bench_record_keeping.py 6000 prof

(``tree_reduction(1000)`` has 1,999 tasks, ``(6000)`` 11,999: instructions
per task = the difference of the two counts / 10,000.)

Run:  python benchmarks/bench_record_keeping.py LEAVES {plain,prof,fine}
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from graphs import tree_reduction  # noqa: E402

from localsched.diagnostics import CacheProfiler, FineMetrics, Profiler  # noqa: E402
from localsched.local import get_sync  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("leaves", type=int)
    parser.add_argument("mode", choices=["plain", "prof", "fine"])
    args = parser.parse_args()
    dsk, out = tree_reduction(args.leaves)
    get_sync(dsk, out)  # (warm)
    if args.mode == "plain":
        get_sync(dsk, out)
    elif args.mode == "prof":
        with Profiler(), CacheProfiler(metric="nbytes"):
            get_sync(dsk, out)
    else:
        with FineMetrics():
            get_sync(dsk, out)


if __name__ == "__main__":
    main()
