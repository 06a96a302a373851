"""Real work: dask and localsched side by side on workloads after dask's own benchmarks.

The shapes (``bench_shapes.py``) time the scheduler on tiny tasks; here the
tasks are real: NumPy, pandas, Python objects, files.  The workloads follow
dask's asv benchmark suite (dask-benchmarks: array reductions, matmul,
overlap, rechunk, slicing; dataframe groupby, shuffle, set_index, rolling,
csv) and the examples of dask's documentation for bags (``from_sequence``,
map / filter / foldby, JSON lines) and delayed (a pandas pipeline, a sum of
1,600 chunks), plus xarray when it is installed (a benchmark-only
dependency: its rows are skipped otherwise).

Each run builds the collection (untimed: the same for both, and for some,
e.g. ``delayed(sum)`` of 1,600 chunks, dask's own graph building takes
longer than the computation) and times its ``compute()``: dask's
optimisation and graph conversion, the scheduler, the tasks.  Both under
``dask.config.set(scheduler=...)``, so that what dask computes eagerly while
building (``set_index``'s divisions) runs on the scheduler being timed.
For every workload and scheduler (sync, threads, processes; two workers)
dask's and localsched's runs
alternate, who goes first rotating, ``--repeat`` rounds; each keeps its
best time.  The table prints the seconds and dask / localsched (above 1:
localsched is faster).  Both results are checked to agree once.

Run:  python benchmarks/bench_real.py [--quick] [--repeat 5] [--only NAME]
          [--schedulers sync,threads,processes] [--profile NAME:SCHEDULER] [--cpu]
          [--floor]

``--quick`` runs smaller inputs, best of 2 (about a minute); ``--profile``
prints where localsched's calls of one workload go (cProfile, the caller's
thread: on threads and processes, the graph's preparation and the loop,
not the tasks).  ``--cpu`` times each call by the process's CPU seconds
instead of wall seconds: on a machine loaded well past its cores the wall
clock measures the OS's scheduling more than either library.  ``--floor``
adds, on sync, the tasks alone (``BareLoop``: dask's work on the
collection, then the graph's tasks in a loop, no scheduler): what a call
takes beyond it is the scheduler's own cost, and ``dask / floor`` is the
most any scheduler could gain on that workload.
"""

from __future__ import annotations

import argparse
import gc
import json
import operator
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import dask
import numpy as np

import localsched.local
import localsched.multiprocessing
import localsched.threaded

NUM_WORKERS = 2
# What a call is timed by: wall seconds, or with ``--cpu`` this process's
# CPU seconds (all its threads; a worker process's are not counted).
CLOCK = time.perf_counter


@dataclass(frozen=True)
class Workload:
    """``build(scale)``: the collection to compute, or ``(collection,
    finish)``, ``finish`` applied to the result, untimed (sorting it)."""

    name: str
    group: str
    build: Callable[[float], object]


def _sort_index(result):
    return result.sort_index()


def _values(result):
    return result.values


WORKLOADS: dict[str, Workload] = {}


def workload(group: str, name: str):
    def register(fn):
        WORKLOADS[name] = Workload(name, group, fn)
        return fn

    return register


def _n(base: int, scale: float, least: int = 1) -> int:
    return max(least, int(base * scale))


# -- arrays (dask-benchmarks: benchmarks/array_*.py) ------------------------------------


def _array(scale: float, chunk: int = 500):
    import dask.array as da

    n = _n(4000, scale ** 0.5, 2 * chunk)
    return da.random.default_rng(0).random((n, n), chunks=chunk)


@workload("array", "array sum")
def array_sum(scale):
    return _array(scale).sum()


@workload("array", "array mean axis 0")
def array_mean(scale):
    return _array(scale).mean(axis=0)


@workload("array", "array std")
def array_std(scale):
    return _array(scale).std()


@workload("array", "array elementwise")
def array_elementwise(scale):
    import dask.array as da

    x = _array(scale)
    return (da.sin(x) + x ** 2 - da.exp(-x)).sum()


@workload("array", "array matmul")
def array_matmul(scale):
    x = _array(scale * 0.25)
    return (x @ x.T).sum()


@workload("array", "array x + x.T")
def array_transpose(scale):
    x = _array(scale)
    return (x + x.T).mean(axis=0)


@workload("array", "array map_overlap")
def array_overlap(scale):
    x = _array(scale)
    return x.map_overlap(lambda b: b * 2 - 1, depth=2, boundary="reflect").sum()


@workload("array", "array rechunk")
def array_rechunk(scale):
    x = _array(scale)
    return x.rechunk((x.shape[0] // 40, x.shape[1])).sum(axis=1)


@workload("array", "array slicing")
def array_slicing(scale):
    x = _array(scale)
    return x[::2, 1::3].sum()


@workload("array", "array 1,600 small chunks sum")
def array_small_chunks(scale):
    import dask.array as da

    n = _n(40, scale ** 0.5, 4)
    return da.ones((n * 50, n * 50), chunks=50).sum()


# -- dataframes (dask-benchmarks: benchmarks/dataframe*.py) -------------------------------


def _frame(scale: float, partitions: int = 20):
    import dask.dataframe as dd
    import pandas as pd

    n = _n(1_000_000, scale, 1000)
    rng = np.random.default_rng(0)
    pdf = pd.DataFrame({"a": rng.integers(0, 1000, n), "b": rng.random(n),
                        "c": rng.integers(0, 10, n)})
    return dd.from_pandas(pdf, npartitions=partitions)


@workload("dataframe", "df groupby sum")
def df_groupby_sum(scale):
    return _frame(scale).groupby("a").b.sum(), _sort_index


@workload("dataframe", "df groupby agg")
def df_groupby_agg(scale):
    return _frame(scale).groupby("c").agg({"b": ["mean", "std"], "a": "max"}), _sort_index


@workload("dataframe", "df shuffle")
def df_shuffle(scale):
    return _frame(scale).shuffle("a").b.sum()


@workload("dataframe", "df set_index")
def df_set_index(scale):
    return _frame(scale).set_index("a").b.sum()


@workload("dataframe", "df rolling")
def df_rolling(scale):
    return _frame(scale).b.rolling(100).mean().sum()


@workload("dataframe", "df arithmetic + reductions")
def df_arithmetic(scale):
    df = _frame(scale)
    return ((df.a * 2 + df.b) / (df.c + 1)).describe()


_csv_dir: list = []


def _csv_files(scale: float) -> str:
    """CSV files written once per scale (removed at exit)."""
    import pandas as pd

    if not _csv_dir:
        _csv_dir.append(tempfile.mkdtemp(prefix="bench-real-"))
    path = os.path.join(_csv_dir[0], f"csv-{scale}")
    if not os.path.isdir(path):
        os.mkdir(path)
        rng = np.random.default_rng(1)
        rows = _n(50_000, scale, 100)
        for i in range(20):
            pd.DataFrame({"a": rng.integers(0, 100, rows), "b": rng.random(rows)}).to_csv(
                os.path.join(path, f"part-{i:02d}.csv"), index=False)
    return os.path.join(path, "*.csv")


@workload("dataframe", "df read_csv groupby")
def df_read_csv(scale):
    import dask.dataframe as dd

    return dd.read_csv(_csv_files(scale)).groupby("a").b.mean(), _sort_index


# -- bags (dask's documentation) -----------------------------------------------------


def _even(x: int) -> bool:
    return x % 2 == 0


def _inc(x: int) -> int:
    return x + 1


@workload("bag", "bag map filter sum")
def bag_map_filter(scale):
    import dask.bag as db

    b = db.from_sequence(range(_n(200_000, scale, 1000)), npartitions=100)
    return b.map(_inc).filter(_even).sum()


@workload("bag", "bag foldby")
def bag_foldby(scale):
    import dask.bag as db

    b = db.from_sequence(range(_n(200_000, scale, 1000)), npartitions=100)
    return b.foldby(lambda x: x % 10, operator.add, 0, operator.add, 0), sorted


def _json_files(scale: float) -> str:
    if not _csv_dir:
        _csv_dir.append(tempfile.mkdtemp(prefix="bench-real-"))
    path = os.path.join(_csv_dir[0], f"json-{scale}")
    if not os.path.isdir(path):
        os.mkdir(path)
        rows = _n(10_000, scale, 100)
        for i in range(20):
            with open(os.path.join(path, f"part-{i:02d}.jsonl"), "w") as f:
                for r in range(rows):
                    f.write(json.dumps({"name": f"user{r % 97}", "amount": r % 13,
                                        "tags": ["a", "b"][: r % 3]}) + "\n")
    return os.path.join(path, "*.jsonl")


@workload("bag", "bag JSON lines")
def bag_json(scale):
    import dask.bag as db

    b = db.read_text(_json_files(scale)).map(json.loads)
    return b.filter(lambda r: r["amount"] > 3).pluck("name").frequencies(), sorted


@workload("bag", "bag groupby-free distinct")
def bag_distinct(scale):
    import dask.bag as db

    b = db.from_sequence(range(_n(200_000, scale, 1000)), npartitions=100)
    return b.map(lambda x: x % 1000).distinct(), sorted


# -- delayed (dask's documentation) ---------------------------------------------------


def _load(i: int):
    import pandas as pd

    rng = np.random.default_rng(i)
    return pd.DataFrame({"k": rng.integers(0, 20, 2000), "v": rng.random(2000)})


def _clean(df):
    return df[df.v > 0.1].assign(w=lambda d: d.v * 2)


def _summarize(df):
    return df.groupby("k").w.sum()


def _combine(parts):
    import pandas as pd

    return pd.concat(parts, axis=1).sum(axis=1)


@workload("delayed", "delayed pandas pipeline")
def delayed_pandas(scale):
    from dask import delayed

    parts = [delayed(_summarize)(delayed(_clean)(delayed(_load)(i)))
             for i in range(_n(200, scale, 10))]
    return delayed(_combine)(parts)


@workload("delayed", "delayed 1,600-chunk sum")
def delayed_sum(scale):
    from dask import delayed

    chunks = [delayed(_inc)(i) for i in range(_n(1600, scale, 50))]
    return delayed(sum)(chunks)


@workload("delayed", "delayed tree of adds")
def delayed_tree(scale):
    from dask import delayed

    leaves = 1 << max(4, (_n(1024, scale, 16)).bit_length() - 1)  # (a power of two)
    level = [delayed(_inc)(i) for i in range(leaves)]
    while len(level) > 1:
        level = [delayed(operator.add)(a, b) for a, b in zip(level[::2], level[1::2], strict=True)]
    return level[0]


# -- xarray (benchmark-only dependency) ------------------------------------------------


def _dataset(scale: float):
    import pandas as pd
    import xarray as xr

    days = _n(365, scale ** 0.5, 60)
    import dask.array as da

    data = da.random.default_rng(2).random((days, 100, 100), chunks=(30, 100, 100))
    time_index = pd.date_range("2000-01-01", periods=days)
    return xr.Dataset({"t": (("time", "y", "x"), data)}, coords={"time": time_index})


@workload("xarray", "xarray monthly climatology")
def xarray_climatology(scale):
    ds = _dataset(scale)
    return ds.t.groupby("time.month").mean(), _values


@workload("xarray", "xarray anomaly")
def xarray_anomaly(scale):
    ds = _dataset(scale)
    return (ds.t - ds.t.mean("time")).std("time"), _values


# -- timing ------------------------------------------------------------------------


def schedulers() -> dict[str, tuple[object, object]]:
    """name -> (dask's scheduler, localsched's get)."""
    return {
        "sync": ("sync", localsched.local.get_sync),
        "threads": ("threads", localsched.threaded.get),
        "processes": ("processes", localsched.multiprocessing.get),
    }


class BareLoop:
    """The floor of a ``compute()``: dask's own work on the collection, then
    the tasks of the graph it hands the scheduler, one after another in an
    order worked out beforehand, each result dropped after its last
    consumer -- no scheduler.  The
    graph handling a scheduler's call does (the expression's low-level
    optimisation, converting legacy tuples to dask's ``Task`` objects,
    working out the order) is timed apart, in ``planning``, and left out of
    the call's time, so that what a scheduler's call takes beyond this floor
    is that scheduler's own cost, graph handling included.  ``dask / floor``
    bounds the ratio any scheduler could reach on that workload."""

    def __init__(self) -> None:
        self.planning = 0.0

    def __call__(self, dsk, keys, **kwargs):
        from dask._task_spec import GraphNode, convert_legacy_graph
        from dask.core import flatten

        from localsched.plan.graph import as_mapping

        t0 = CLOCK()
        dsk = as_mapping(dsk)
        if not all(isinstance(v, GraphNode) for v in dsk.values()):
            dsk = convert_legacy_graph(dsk)
        order: list = []
        seen: set = set()
        for root in flatten(keys):
            stack = [(root, False)]
            while stack:
                key, expanded = stack.pop()
                if expanded:
                    order.append(key)
                elif key not in seen:
                    seen.add(key)
                    stack.append((key, True))
                    stack.extend((d, False) for d in dsk[key].dependencies if d not in seen)
        # each result dropped after its last consumer ran (as a scheduler
        # would: results kept alive slow the collector's passes)
        last: dict = {}
        for i, key in enumerate(order):
            for d in dsk[key].dependencies:
                last[d] = i
        for key in flatten(keys):
            last[key] = len(order)
        drops: list = [[] for _ in order]
        for key, i in last.items():
            if i < len(order):
                drops[i].append(key)
        plan = [(k, dsk[k], drop) for k, drop in zip(order, drops, strict=True)]
        self.planning += CLOCK() - t0
        cache: dict = {}
        for key, task, drop in plan:
            cache[key] = task(cache)
            for d in drop:
                del cache[d]
        return _pack(keys, cache)


def _pack(keys, cache):
    """``keys`` (nested lists of keys, as dask hands a scheduler) with each
    key replaced by its result."""
    if isinstance(keys, list):
        return [_pack(k, cache) for k in keys]
    return cache[keys]


def call(w: Workload, scheduler, scale: float) -> tuple[float, object]:
    """Build the workload's collection (untimed: the same for both
    libraries, and for some dask's own graph building is most of a call),
    then time its ``compute()`` on ``scheduler`` (a ``BareLoop``'s planning
    left out)."""
    with dask.config.set(scheduler=scheduler, num_workers=NUM_WORKERS):
        built = w.build(scale)  # (``set_index`` computes its divisions here)
        collection, finish = built if isinstance(built, tuple) else (built, None)
        gc.collect()  # (neither library pays for the other's garbage)
        planned = scheduler.planning if isinstance(scheduler, BareLoop) else 0.0
        t0 = CLOCK()
        result = collection.compute()  # type: ignore[attr-defined]
        elapsed = CLOCK() - t0
        if isinstance(scheduler, BareLoop):
            elapsed -= scheduler.planning - planned
    return elapsed, (finish(result) if finish is not None else result)


def same(a, b) -> bool:
    """Whether two results agree (arrays and frames to rounding)."""
    import pandas as pd

    if isinstance(a, (pd.DataFrame, pd.Series)):
        try:
            pd.testing.assert_frame_equal(pd.DataFrame(a), pd.DataFrame(b), check_exact=False)
        except AssertionError:
            return False
        return True
    if isinstance(a, (np.ndarray, np.generic, float)):
        return bool(np.allclose(a, b, equal_nan=True))
    return a == b


def available(w: Workload) -> str | None:
    """Why a workload cannot run here (None: it can)."""
    if w.group == "xarray":
        try:
            import xarray  # noqa: F401
        except ImportError:
            return "xarray is not installed"
    return None


def measure(w: Workload, name: str, pair: tuple, scale: float, repeat: int,
            floor: bool = False) -> dict:
    dask_s, ls_get = pair
    runners = {"dask": dask_s, "localsched": ls_get}
    if floor:
        runners["floor"] = BareLoop()
    best = dict.fromkeys(runners, float("inf"))
    results: dict = {}
    order = list(runners)
    for r in range(repeat):
        for who in order[r % len(order):] + order[:r % len(order)]:
            elapsed, result = call(w, runners[who], scale)
            best[who] = min(best[who], elapsed)
            results.setdefault(who, result)
    for who in results:
        if who != "dask" and not same(results["dask"], results[who]):
            raise AssertionError(f"{w.name} on {name}: {who}'s result differs from dask's")
    return best


def warm_up(scheds: dict) -> None:
    """Start the pools that persist across calls (neither side pays for it)."""
    from dask import delayed

    for dask_s, ls_get in scheds.values():
        for s in (dask_s, ls_get):
            with dask.config.set(scheduler=s, num_workers=NUM_WORKERS):
                delayed(_inc)(1).compute()


def profile(w: Workload, scheduler: str, scale: float) -> None:
    import cProfile
    import pstats

    get = schedulers()[scheduler][1]
    call(w, get, scale)
    prof = cProfile.Profile()
    with dask.config.set(scheduler=get, num_workers=NUM_WORKERS):
        built = w.build(scale)
        collection = built[0] if isinstance(built, tuple) else built
        prof.enable()
        collection.compute()  # type: ignore[attr-defined]
        prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5, metavar="N")
    p.add_argument("--quick", action="store_true", help="smaller inputs, best of 2")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="workloads whose name contains this (repeatable)")
    p.add_argument("--schedulers", default="sync,threads,processes")
    p.add_argument("--profile", metavar="NAME:SCHEDULER",
                   help="cProfile localsched's run of one workload instead")
    p.add_argument("--floor", action="store_true",
                   help="on sync, also time the tasks alone in a bare loop (the floor): "
                        "dask / floor is the most any scheduler could gain")
    p.add_argument("--cpu", action="store_true",
                   help="time calls by this process's CPU seconds, not wall (a loaded "
                        "machine; sync and threads only: worker processes are not counted)")
    args = p.parse_args(argv)
    if args.cpu:
        global CLOCK
        CLOCK = time.process_time
    scale = 0.1 if args.quick else 1.0
    repeat = 2 if args.quick and args.repeat == 5 else args.repeat
    try:
        if args.profile:
            name, _, sched = args.profile.rpartition(":")
            matches = [w for w in WORKLOADS.values() if name in w.name]
            if not matches:
                p.error(f"no workload matches {name!r}")
            profile(matches[0], sched, scale)
            return 0
        return _run(args, scale, repeat)
    finally:
        localsched.multiprocessing.shutdown()
        localsched.threaded.shutdown()
        for d in _csv_dir:
            shutil.rmtree(d, ignore_errors=True)


def _run(args, scale: float, repeat: int) -> int:
    chosen = args.schedulers.split(",")
    scheds = {s: pair for s, pair in schedulers().items() if s in chosen}
    load = os.getloadavg()
    print(f"python {platform.python_version()}, dask {dask.__version__}, {os.cpu_count()} CPUs, "
          f"{NUM_WORKERS} workers, best of {repeat}{', quick' if args.quick else ''}"
          f"{', process CPU seconds' if CLOCK is time.process_time else ''}, "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)
    warm_up(scheds)
    rows = []
    for w in WORKLOADS.values():
        if args.only and not any(o in w.name for o in args.only):
            continue
        why = available(w)
        if why is not None:
            print(f"{w.name}: skipped ({why})", flush=True)
            continue
        row = {"name": w.name, "group": w.group}
        for s, pair in scheds.items():
            best = measure(w, s, pair, scale, repeat, floor=args.floor and s == "sync")
            row[s] = (best["dask"], best["localsched"])
            if "floor" in best:
                row["floor"] = best["floor"]
        rows.append(row)
        print(f"{w.name:32s} " + "  ".join(
            f"{s} {d:.3f}/{ls:.3f} s = {d / ls:4.2f}" for s, (d, ls) in
            ((s, row[s]) for s in scheds))
            + (f"  floor {row['floor']:.3f} s" if "floor" in row else ""), flush=True)
    print()
    _table(rows, scheds)
    below = [(r["name"], s, r[s][0] / r[s][1]) for r in rows for s in scheds
             if r[s][0] / r[s][1] < 1.0]
    print()
    if below:
        print("below 1.0 (dask faster):")
        for name, s, ratio in below:
            print(f"  {name} on {s}: {ratio:.2f}")
    else:
        print("localsched at least as fast as dask on every workload and scheduler.")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


def _table(rows: list, scheds: dict) -> None:
    floor = any("floor" in r for r in rows)
    head = ["group", "workload"] + [f"{s}: dask / localsched s (ratio)" for s in scheds]
    if floor:
        head.append("sync floor s (dask / floor: the most a scheduler could gain)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [r["group"], r["name"]]
        for s in scheds:
            d, ls = r[s]
            cells.append(f"{d:.3f} / {ls:.3f} (**{d / ls:.2f}**)")
        if floor:
            cells.append(f"{r['floor']:.3f} ({r['sync'][0] / r['floor']:.2f})")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":  # (the process pools start workers with "spawn")
    sys.exit(main())

