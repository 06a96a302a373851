"""Re-run the worked examples of the "Reading a profile" guide
(docs/guides/findings.md): each workload recorded with performance_report,
its finding printed (the rules' verdict: the machine's load left out, as
the guide shows them), then its fix applied as written and both wall times
measured.  The workloads are the findings tests' own
(tests/diagnostics/analysis/test_findings_applied.py).

    .venv/bin/python docs/_static/gallery/findings_examples.py [name ...]
"""

from __future__ import annotations

import os
import sys
import time

import localsched
import localsched.multiprocessing as lmp
from localsched.diagnostics.report import performance_report

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path[:0] = [ROOT]

from tests.diagnostics.analysis import test_findings_applied as t  # noqa: E402


def recorded(get, dsk, keys, samples=False, **kwargs):
    with performance_report(None, samples=samples) as report:
        get(dsk, keys, **kwargs)
    return report.data


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def show(name: str, run, kind: str, before: float | None = None, after: float | None = None):
    found = t.verdicts(run)
    print(f"== {name}")
    for f in found.values():
        print(f"  [{f.kind}] {f.title}\n    fix: {f.fix}\n    claimed: {f.seconds:.3f} s")
    if kind not in found:
        print(f"  (no {kind} finding)")
    if before is not None and after is not None:
        print(f"  applied: {before:.3f} s -> {after:.3f} s, gained {before - after:.3f} s")


def overhead():
    dsk = {("inc", i): (t.inc, i) for i in range(20_000)}
    run = recorded(localsched.get, dsk, list(dsk), num_workers=2)
    bigger = {("inc", j): (t.inc_range, j * 10_000, (j + 1) * 10_000) for j in range(2)}
    after = recorded(localsched.get, bigger, list(bigger), num_workers=2)
    show("overhead: 20,000 tiny tasks", run, "overhead", t.wall(run), t.wall(after))


def gil():
    dsk = {("py", i): (t.py_loop, 300_000) for i in range(40)}
    lmp.get({"warm": (t.py_loop, 10)}, "warm", num_workers=2)
    run = recorded(localsched.get, dsk, list(dsk), samples=True, num_workers=2)
    after = recorded(lmp.get, dsk, list(dsk), num_workers=2)
    show("gil: Python loops on threads, then on localsched's processes", run, "gil",
         t.wall(run), t.wall(after))


def bag():
    import dask.bag as db

    dsk = {("records", p): [{"id": i, "name": f"user{i}", "tags": ["a", "b", "c"],
                             "score": i + 0.5} for i in range(p * 5000, (p + 1) * 5000)]
           for p in range(32)}
    total = db.Bag(dsk, "records", 32).map(t.rescore).pluck("score").sum()
    with performance_report(None, samples=True) as report:
        total.compute(scheduler=localsched.get, num_workers=2)
    lmp.get({"warm": (t.py_loop, 10)}, "warm", num_workers=2)
    threads = timed(lambda: total.compute(scheduler=localsched.get, num_workers=2))
    processes = timed(lambda: total.compute(scheduler=lmp.get, num_workers=2))
    show("gil: a bag of 160,000 dicts (threads, then processes against the advice)",
         report.data, "gil", threads, processes)


def dataframe():
    run = t.grouped_apply(24)
    before = t.wall(run)
    after = t.wall(t.grouped_apply(4))
    show("overhead: a dataframe groupby-apply of 24 partitions, then 4", run, "overhead",
         before, after)


def xarray():
    import dask.array as da
    import pandas as pd
    import xarray as xr

    time_ = pd.date_range("2000-01-01", periods=730, freq="D")
    data = da.random.RandomState(0).random_sample((730, 60, 60), chunks=(183, 60, 60))
    x = xr.DataArray(data, dims=("time", "lat", "lon"), coords={"time": time_})
    with performance_report(None) as report:
        x.rolling(time=7).mean().groupby("time.month").mean().compute(
            scheduler=localsched.get)
    show("no finding: xarray rolling and groupby of 4 chunks of 5 MB", report.data,
         "overhead")


def straggler():
    dsk = t.parts([0.03] * 20 + [0.6])
    run = recorded(localsched.get, dsk, list(dsk), num_workers=2)
    even = t.parts([0.03] * 40)
    after = recorded(localsched.get, even, list(even), num_workers=2)
    show("straggler: the slow task last, then split", run, "straggler", t.wall(run),
         t.wall(after))


def threads():
    dsk = {("fetch", i): (t.nap, i, 0.05) for i in range(48)}
    run = recorded(localsched.get, dsk, list(dsk), num_workers=2)
    found = t.verdicts(run)
    n = int(found["idle"].fix.split("num_workers=")[1].split(")")[0]) if "idle" in found else 8
    after = recorded(localsched.get, dsk, list(dsk), num_workers=n)
    show(f"idle: sleeping I/O on 2 threads, then {n}", run, "idle", t.wall(run),
         t.wall(after))


def start_up():
    import tempfile
    import textwrap

    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "cold_udfs.py"), "w") as f:
        f.write(textwrap.dedent(t.COLD_MODULE))
    sys.path.insert(0, folder)
    import cold_udfs

    pool = lmp.ProcessPool(2)
    try:
        dsk = {("score", i): (cold_udfs.score, i) for i in range(8)}
        run = recorded(lmp.get, dsk, list(dsk), num_workers=2, pool=pool)
        # (the fix: the pool, started once, reused by the script's next computation)
        after = recorded(lmp.get, dsk, list(dsk), num_workers=2, pool=pool)
    finally:
        pool.shutdown()
    show("start-up: a cold pool importing pandas, then the same pool again", run,
         "start-up", t.wall(run), t.wall(after))


EXAMPLES = {"overhead": overhead, "gil": gil, "bag": bag, "dataframe": dataframe,
            "xarray": xarray, "straggler": straggler, "threads": threads,
            "start-up": start_up}


if __name__ == "__main__":
    for name in sys.argv[1:] or list(EXAMPLES):
        EXAMPLES[name]()
