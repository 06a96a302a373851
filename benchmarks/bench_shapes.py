"""Speed on the shapes people build: dask vs localsched vs no scheduler at all.

Shapes (``graphs.SHAPES``): a binary tree of 100k tasks, a chain of 5k,
5k independent tasks then one ``sum`` (fan-in), 5k independent outputs
(``dask.compute(*list)``), a bag-like 2000 partitions with an 8-ary
reduction, a 48 x 48 all-to-all shuffle of 3 stages, a 64 x 48 stencil
(3 inputs each).  Kinds of task (``graphs.KINDS``): tiny builtins
(``operator.neg``, ``max``), ~10 µs and ~1 ms of pure Python (smaller
graphs for 1 ms: about a second of work).

For every (kind, shape, scheduler) dask's and localsched's ``get`` run in
this process, alternating which goes first, ``--repeat`` times; each keeps
its best time (a graph that runs for less than ``--min-seconds`` is run
again within its turn until that long has passed, its best run counting).
Next to them: the **bare loop**, the same graph's tasks run in a
precomputed order (localsched's) with no scheduling at all: a list of
``(key, function, arguments)`` walked once, every result kept in a dict.
It is the floor: what the tasks themselves cost.  The table shows µs per
task, dask / localsched, and each scheduler's multiple of the bare loop.
localsched's threads / sync comes from runs alternated with each other (the
threads runs alternate with a sync run too), not from the two columns,
which were timed minutes apart on a machine whose load may have changed.

Targets (issue 17; reported, never asserted): tiny tasks, threads >= 5x and
processes >= 3x dask's same scheduler, threads <= 2x localsched's own sync;
~10 µs tasks, threads <= 1.5x sync and processes >= 3x dask; the tree and
the chain, threads >= 8x and processes >= 10x.

``--stats`` also prints how localsched handed tasks out on threads (batches,
tasks per batch), from one untimed run.

``--cpu`` times sync and threads by the process's CPU seconds instead of
wall seconds: on a shared machine, what other jobs take is then left out.

``--same-core`` runs every thread of this process on one CPU (processes
are left out).  Two threads on GIL-bound tasks cannot run at once anyway,
so threads / sync then measures the scheduling work alone: on two cores a
threads run also pays for moving its objects between the cores' caches
(the scheduler thread and a worker touch, and refcount, the same keys,
specs, indices and results), which sync, in one thread, never does.

Run:  python benchmarks/bench_shapes.py [--repeat 3] [--kinds tiny,10us,1ms]
          [--only SHAPE] [--schedulers sync,threads,processes] [--no-dask] [--stats]
          [--cpu] [--same-core] [--min-seconds 0.25]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Callable

import localsched.local
import localsched.multiprocessing
import localsched.threaded

try:  # run as a script (python benchmarks/bench_shapes.py) or as a module
    from . import graphs
    from .bench_overhead import best_of  # (one alternating timer for every benchmark)
except ImportError:
    import graphs
    from bench_overhead import best_of

NUM_WORKERS = 2


def schedulers(dask_too: bool) -> dict[str, tuple[Callable, Callable]]:
    """label -> (dask's get or None, localsched's get)."""
    w = NUM_WORKERS
    ls = {
        "sync": localsched.local.get_sync,
        "threads": lambda d, k: localsched.threaded.get(d, k, num_workers=w),
        "processes": lambda d, k: localsched.multiprocessing.get(d, k, num_workers=w),
    }
    if not dask_too:
        return {name: (None, get) for name, get in ls.items()}
    import dask.local
    import dask.multiprocessing
    import dask.threaded

    return {
        "sync": (dask.local.get_sync, ls["sync"]),
        "threads": (lambda d, k: dask.threaded.get(d, k, num_workers=w), ls["threads"]),
        # (optimize_graph=False: dask's default fuses linear chains, and
        # fusing the 5k chain overflows the stack; both run the same tasks.)
        "processes": (lambda d, k: dask.multiprocessing.get(d, k, num_workers=w,
                                                            optimize_graph=False),
                      ls["processes"]),
    }


# -- the floor -------------------------------------------------------------------


def bare_plan(dsk: dict, keys: list) -> list:
    """The graph's tasks in localsched's run order, each as
    ``(key, function, how, arguments)``: ``how`` 0, arguments are values;
    1, keys; 2, one list of keys (``sum([...])``)."""
    from localsched.plan.graph import compile_graph
    from localsched.plan.order import order

    g = compile_graph(dsk, None)
    plan = []
    for i in order(g.deps, g.is_data, [g.index[k] for k in keys], g.keys):
        key = g.keys[i]
        func, *args = dsk[key]
        if len(args) == 1 and type(args[0]) is list:
            plan.append((key, func, 2, args[0]))
        elif any(_is_key(a, dsk) for a in args):
            plan.append((key, func, 1, args))
        else:
            plan.append((key, func, 0, args))
    return plan


def _is_key(a, dsk) -> bool:
    try:
        return a in dsk
    except TypeError:
        return False


def bare_run(plan: list, keys: list):
    """Run ``plan``: no scheduler, no release, nothing but the calls."""
    cache: dict = {}
    get = cache.__getitem__
    for key, func, how, args in plan:
        if how == 1:
            cache[key] = func(*map(get, args))
        elif how == 0:
            cache[key] = func(*args)
        else:
            cache[key] = func(list(map(get, args)))
    return tuple(cache[k] for k in keys)


# -- timing ----------------------------------------------------------------------


# What a run is timed by: wall seconds, or with ``--cpu`` this process's CPU
# seconds (sync and threads only: a busy machine's other jobs then cost
# nothing, nor do the waits for a core to wake a thread on).
clock: Callable[[], float] = time.perf_counter


# A run shorter than this (wall seconds) is one sample of a noisy machine:
# it is run again, within the same turn, until this long has passed, and
# its best run counts (a 25 ms chain read threads / sync anywhere from 1.2
# to 2.6 on best-of-2 single runs; --min-seconds).
MIN_SECONDS = 0.25


def _best_run(run: Callable[[], object]) -> tuple[float, object]:
    """Best time of ``run()`` over runs repeated until MIN_SECONDS have
    passed (at least one), each after a full garbage collection."""
    best, spent, result = float("inf"), 0.0, None
    while best == float("inf") or spent < MIN_SECONDS:
        gc.collect()
        w0, t0 = time.perf_counter(), clock()
        result = run()
        best = min(best, clock() - t0)
        spent += time.perf_counter() - w0
    return best, result


def timed(get: Callable, dsk: dict, keys: list) -> tuple[float, object]:
    elapsed, result = _best_run(lambda: get(dsk, keys))
    return elapsed, tuple(result)


def batch_stats(dsk: dict, keys: list) -> str:
    """How localsched's threads(2) handed the graph out: one untimed run."""
    from localsched.run.batching import Planner

    sizes: list = []
    plan = Planner.next_batch

    def counting(self, *args):
        batch = plan(self, *args)
        sizes.append(len(batch))
        return batch

    Planner.next_batch = counting
    try:
        localsched.threaded.get(dsk, keys, num_workers=NUM_WORKERS)
    finally:
        Planner.next_batch = plan
    return f"{len(sizes):,} batches, {sum(sizes) / max(1, len(sizes)):.1f} tasks each"


# -- targets ---------------------------------------------------------------------


def missed_targets(kind: str, shape: str, row: dict) -> list[str]:
    """The issue's targets this row misses (empty: all met or none apply)."""
    out = []
    ratio = row.get("ratio", {})
    if kind == "tiny":
        strict = shape.startswith(("tree", "chain"))
        want = {"threads": 8.0 if strict else 5.0, "processes": 10.0 if strict else 3.0}
        for s, target in want.items():
            if s in ratio and ratio[s] < target:
                out.append(f"{s} {ratio[s]:.1f}x dask < {target:g}x")
        if row.get("threads/sync", 0) > 2:
            out.append(f"threads {row['threads/sync']:.2f}x sync > 2x")
    elif kind == "10us":
        if row.get("threads/sync", 0) > 1.5:
            out.append(f"threads {row['threads/sync']:.2f}x sync > 1.5x")
        if "processes" in ratio and ratio["processes"] < 3.0:
            out.append(f"processes {ratio['processes']:.1f}x dask < 3x")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, metavar="N")
    p.add_argument("--kinds", default="tiny,10us,1ms")
    p.add_argument("--only", action="append", default=[], metavar="SHAPE",
                   help="shapes whose name contains this (repeatable)")
    p.add_argument("--schedulers", default="sync,threads,processes")
    p.add_argument("--no-dask", dest="dask", action="store_false",
                   help="localsched and the bare loop only")
    p.add_argument("--stats", action="store_true", help="batches per run on threads")
    p.add_argument("--cpu", action="store_true",
                   help="time by this process's CPU seconds (sync and threads only)")
    p.add_argument("--min-seconds", type=float, default=0.25, metavar="S",
                   help="run a shorter graph again within its turn until S seconds passed")
    p.add_argument("--same-core", action="store_true",
                   help="every thread on one CPU: scheduling work without cross-core traffic "
                        "(sync and threads only)")
    args = p.parse_args(argv)
    if args.same_core:
        if not hasattr(os, "sched_setaffinity"):
            p.error("--same-core needs os.sched_setaffinity (Linux)")
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # (threads started later follow)
    global MIN_SECONDS  # noqa: PLW0603 -- the timers read it
    MIN_SECONDS = args.min_seconds
    chosen = args.schedulers.split(",")
    if args.cpu or args.same_core:
        chosen = [s for s in chosen if s != "processes"]
    if args.cpu:
        global clock
        clock = time.process_time
    scheds = {s: g for s, g in schedulers(args.dask).items() if s in chosen}
    load = os.getloadavg()
    timing = (", CPU seconds" if args.cpu else "") + (", one CPU" if args.same_core else "")
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {NUM_WORKERS} workers, "
          f"best of {args.repeat}{timing}, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}",
          flush=True)
    # Warm the pools that persist across calls (neither side pays for starting them).
    for dget, lget in scheds.values():
        for get in (dget, lget):
            if get is not None:
                get({"w": (abs, -1)}, ["w"])
    rows = []
    try:
        for kname in args.kinds.split(","):
            kind = graphs.KINDS[kname]
            for shape, (build, full, small) in graphs.SHAPES.items():
                if args.only and not any(o in shape for o in args.only):
                    continue
                dsk, keys = build(kind, *(small if kname == "1ms" else full))
                n = graphs.count_tasks(dsk)
                plan = bare_plan(dsk, keys)
                bare = best_of({"bare": lambda p=plan, k=keys: _bare_timed(p, k)},
                               args.repeat)["bare"]
                row = {"kind": kname, "shape": shape, "n": n, "bare": bare / n * 1e6,
                       "dask": {}, "ls": {}, "ratio": {}}
                for s, (dget, lget) in scheds.items():
                    runners = {"localsched": lambda g=lget, d=dsk, k=keys: timed(g, d, k)}
                    if dget is not None:
                        runners["dask"] = lambda g=dget, d=dsk, k=keys: timed(g, d, k)
                    if s == "threads" and "sync" in scheds:
                        # (threads / sync from runs alternated with each other)
                        sync_get = scheds["sync"][1]
                        runners["sync"] = lambda g=sync_get, d=dsk, k=keys: timed(g, d, k)
                    best = best_of(runners, args.repeat)
                    row["ls"][s] = best["localsched"] / n * 1e6
                    if "sync" in best:
                        row["threads/sync"] = best["localsched"] / best["sync"]
                    if "dask" in best:
                        row["dask"][s] = best["dask"] / n * 1e6
                        row["ratio"][s] = row["dask"][s] / row["ls"][s]
                row["missed"] = missed_targets(kname, shape, row)
                if args.stats:
                    row["stats"] = batch_stats(dsk, keys)
                rows.append(row)
                _print_row(row, scheds)
    finally:
        localsched.multiprocessing.shutdown()
        localsched.threaded.shutdown()
    print()
    _print_table(rows, scheds)
    missed = [(r["kind"], r["shape"], m) for r in rows for m in r["missed"]]
    print()
    if missed:
        print("targets missed (reported, not asserted):")
        for kname, shape, m in missed:
            print(f"  {kname:5s} {shape}: {m}")
    else:
        print("all targets met.")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


def _bare_timed(plan, keys):
    return _best_run(lambda: bare_run(plan, keys))


def _print_row(row: dict, scheds: dict) -> None:
    parts = [f"{row['kind']:5s} {row['shape']:22s} {row['n']:>7,} tasks  bare {row['bare']:6.2f}"]
    for s in scheds:
        ls = row["ls"][s]
        if s in row["dask"]:
            parts.append(f"{s} dask {row['dask'][s]:7.2f} / ls {ls:6.2f} = {row['ratio'][s]:5.1f}x")
        else:
            parts.append(f"{s} ls {ls:6.2f} ({ls / row['bare']:.1f}x bare)")
    if "threads/sync" in row:
        parts.append(f"threads/sync {row['threads/sync']:.2f}")
    if "stats" in row:
        parts.append(row["stats"])
    print("  ".join(parts), flush=True)


def _print_table(rows: list, scheds: dict) -> None:
    """The matrix as a markdown table: µs per task (multiple of the bare loop)."""
    head = ["kind", "shape", "tasks", "bare µs"]
    for s in scheds:
        head += [f"{s}: dask", f"{s}: localsched", f"{s}: ratio"]
    head.append("threads / sync (localsched, alternated)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [r["kind"], r["shape"], f"{r['n']:,}", f"{r['bare']:.2f}"]
        for s in scheds:
            b = r["bare"]
            d = r["dask"].get(s)
            cells.append("–" if d is None else f"{d:.1f} ({d / b:.0f}x)")
            cells.append(f"{r['ls'][s]:.2f} ({r['ls'][s] / b:.1f}x)")
            cells.append("–" if d is None else f"**{r['ratio'][s]:.1f}x**")
        if "threads/sync" in r:
            cells.append(f"{r['threads/sync']:.2f}")
        else:
            cells.append("–")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":  # the process pools start workers with "spawn"
    sys.exit(main())
