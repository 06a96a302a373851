"""Scheduling overhead per task: dask's local schedulers vs localsched's.

Each case runs one graph of trivial tasks (``operator`` functions on small
ints, see ``graphs.py``) on dask's scheduler and on localsched's, in the
same process, alternating which goes first, ``--repeat`` times each; the
best (lowest) wall time of each is kept, since on a shared machine noise
only ever adds time.  The figure is that time divided by the number of
tasks: the whole ``get`` call, so graph compilation, ordering, the run loop
and the hand-offs to workers are all in it.

Cases (``--only`` matches a name exactly, else as a substring):

==========================  =================================================
tree-sync                   tree reduction, ``local.get_sync``
tree-threads                tree reduction, ``threaded.get(num_workers=2)``
tree-processes              tree reduction, ``multiprocessing.get(num_workers=2)``
chain-sync                  linear chain, ``local.get_sync``
chain-threads               linear chain, ``threaded.get(num_workers=2)``
tree-threads-diagnostics    tree-threads with Profiler, ResourceProfiler(dt=1),
                            CacheProfiler and ProgressBar active, vs without;
                            and with those plus FineMetrics and
                            SampleProfiler(interval=0.01) ("all six")
==========================  =================================================

Pools are warmed up before timing: localsched reuses its process pool across
calls by design, while ``dask.multiprocessing.get`` starts and stops a pool
of its own on every call (part of its cost, as for any dask user; it is a
fraction of a second against tens of seconds here).  For the diagnostics the
profilers are entered outside the timed region, so a ``with`` block's fixed
cost (starting ResourceProfiler's sampler) is left out and what is measured
is what the callbacks add to the computation itself.

What "added" is measured against.  A run no callback takes part in takes
localsched's plain paths (threads that schedule themselves, a sync loop
with no bookkeeping), which a run with any callback cannot take: it runs
batches planned in the caller's thread, where hooks fire.  So the
diagnostics' added cost is their run minus a *watched* run of the same
graph: one callback that has only a ``finish`` hook doing nothing and needs
nothing (``watched_baseline``), i.e. the path every diagnostic's run takes,
with nothing of the diagnostics' own in it.  The plain run's time is
printed beside it; the difference between the two is what a watched run's
path costs, not what a diagnostic adds.

Run:  python benchmarks/bench_overhead.py [--repeat N] [--quick] [--only NAME]
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import platform
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

import dask
import dask.local
import dask.multiprocessing
import dask.threaded

import localsched.local
import localsched.multiprocessing
import localsched.threaded

try:  # run as a script (python benchmarks/bench_overhead.py) or as a module
    from . import graphs
except ImportError:
    import graphs

NUM_WORKERS = 2

# scheduler label -> (dask's get, localsched's get), each called as get(dsk, keys).
SCHEDULERS: dict[str, tuple[Callable, Callable]] = {
    "sync": (dask.local.get_sync, localsched.local.get_sync),
    "threads(2)": (
        lambda dsk, keys: dask.threaded.get(dsk, keys, num_workers=NUM_WORKERS),
        lambda dsk, keys: localsched.threaded.get(dsk, keys, num_workers=NUM_WORKERS),
    ),
    "processes(2)": (
        lambda dsk, keys: dask.multiprocessing.get(dsk, keys, num_workers=NUM_WORKERS),
        lambda dsk, keys: localsched.multiprocessing.get(dsk, keys, num_workers=NUM_WORKERS),
    ),
}

# Graph builders: (full size, --quick size).
GRAPHS: dict[str, tuple[Callable, Callable]] = {
    "tree": (lambda: graphs.tree_reduction(57_000), lambda: graphs.tree_reduction(2_000)),
    "chain": (lambda: graphs.chain(10_000), lambda: graphs.chain(1_000)),
}

DIAGNOSTICS_TARGET_US = 3.0  # what the diagnostics may add, µs per task
ALL_DIAGNOSTICS_TARGET_US = 3.0  # ... with FineMetrics and SampleProfiler(0.01) too (issue 20)


@dataclass(frozen=True)
class Case:
    name: str
    graph: str
    scheduler: str
    target: float | None  # wanted dask/localsched ratio, None: no target


CASES = [
    Case("tree-sync", "tree", "sync", 10.0),
    Case("tree-threads", "tree", "threads(2)", 5.0),
    Case("tree-processes", "tree", "processes(2)", 3.0),
    Case("chain-sync", "chain", "sync", None),
    Case("chain-threads", "chain", "threads(2)", 3.0),
]
DIAGNOSTICS_CASE = "tree-threads-diagnostics"


def timed(get: Callable, dsk: dict, keys: list, enter: Callable[[], list] = list):
    """Wall time of ``get(dsk, keys)`` and its result.

    ``enter()`` returns context managers to hold open around the call;
    entering and leaving them is not timed.
    """
    gc.collect()  # do not bill one scheduler for the other's garbage
    with ExitStack() as stack:
        for cm in enter():
            stack.enter_context(cm)
        t0 = time.perf_counter()
        result = get(dsk, keys)
        elapsed = time.perf_counter() - t0
    return elapsed, result


def best_of(runners: dict[str, Callable], repeat: int) -> dict[str, float]:
    """Best time of each runner over ``repeat`` rounds, rotating who goes first.

    Every runner returns ``(seconds, result)``; all results must agree.
    """
    names = list(runners)
    best = dict.fromkeys(names, float("inf"))
    expected = None
    for r in range(repeat):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            elapsed, result = runners[name]()
            if expected is None:
                expected = (name, result)
            elif result != expected[1]:
                raise AssertionError(
                    f"{name} returned {result!r} but {expected[0]} returned {expected[1]!r}"
                )
            best[name] = min(best[name], elapsed)
    return best


def warm_up() -> None:
    """Start the pools that persist across calls, so no timed run pays for them."""
    dsk = {"w": (abs, -1)}
    for dask_get, ls_get in SCHEDULERS.values():
        dask_get(dsk, ["w"])
        ls_get(dsk, ["w"])


def run_case(case: Case, dsk: dict, keys: list, repeat: int) -> dict:
    dask_get, ls_get = SCHEDULERS[case.scheduler]
    best = best_of(
        {
            "dask": lambda: timed(dask_get, dsk, keys),
            "localsched": lambda: timed(ls_get, dsk, keys),
        },
        repeat,
    )
    n = graphs.count_tasks(dsk)
    return {"tasks": n, "dask_us": best["dask"] / n * 1e6, "ls_us": best["localsched"] / n * 1e6}


def localsched_diagnostics() -> tuple[Callable[[], list] | None, str]:
    """A maker of localsched's four diagnostics, or None and why not."""
    try:
        from localsched.diagnostics import (
            CacheProfiler,
            Profiler,
            ProgressBar,
            ResourceProfiler,
        )
    except ImportError as exc:
        return None, str(exc)
    return (
        lambda: [Profiler(), ResourceProfiler(dt=1), CacheProfiler(),
                 ProgressBar(out=io.StringIO())],
        "",
    )


def localsched_all_diagnostics() -> Callable[[], list] | None:
    """The four, plus FineMetrics and SampleProfiler(interval=0.01), or None."""
    four, _ = localsched_diagnostics()
    try:
        from localsched.diagnostics import FineMetrics, SampleProfiler
    except ImportError:
        return None
    return lambda: four() + [FineMetrics(), SampleProfiler(interval=0.01)]


def watched_baseline() -> list:
    """The baseline of "added": one callback with a ``finish`` hook that
    does nothing and needs nothing (no results, records, sizes or
    measurement), so localsched's run takes the watched path and no more."""
    from localsched.callbacks import Callback, Needs

    cb = Callback(finish=lambda dsk, state, errored: None)
    cb.needs = Needs(results=False, exact_start=False)
    return [cb]


def dask_diagnostics() -> list:
    from dask.diagnostics import CacheProfiler, Profiler, ProgressBar, ResourceProfiler

    return [Profiler(), ResourceProfiler(dt=1), CacheProfiler(), ProgressBar(out=io.StringIO())]


def dask_progressbar() -> list:
    from dask.diagnostics import ProgressBar

    return [ProgressBar(out=io.StringIO())]


DASK_PROGRESSBAR_TARGET = 0.10  # what dask's ProgressBar may add to a localsched run


def run_diagnostics(dsk: dict, keys: list, repeat: int) -> dict:
    """µs/task of the threaded tree with and without diagnostics, both libraries."""
    dask_get, ls_get = SCHEDULERS["threads(2)"]
    ls_diag, why = localsched_diagnostics()
    runners = {
        "dask": lambda: timed(dask_get, dsk, keys),
        "dask+diag": lambda: timed(dask_get, dsk, keys, dask_diagnostics),
        "localsched": lambda: timed(ls_get, dsk, keys, watched_baseline),
        "localsched plain": lambda: timed(ls_get, dsk, keys),
    }
    if ls_diag is not None:
        runners["localsched+diag"] = lambda: timed(ls_get, dsk, keys, ls_diag)
    ls_all = localsched_all_diagnostics()
    if ls_all is not None:
        runners["localsched+all"] = lambda: timed(ls_get, dsk, keys, ls_all)
    # dask's own ProgressBar around a localsched run: it reads the state's
    # ready/waiting/running ten times a second (the drop-in issue: < 10 %).
    runners["localsched+daskbar"] = lambda: timed(ls_get, dsk, keys, dask_progressbar)
    best = best_of(runners, repeat)
    n = graphs.count_tasks(dsk)
    out = {"tasks": n, "why": why}
    for name, seconds in best.items():
        out[name] = seconds / n * 1e6
    return out


def select(only: list[str]) -> list[str]:
    names = [c.name for c in CASES] + [DIAGNOSTICS_CASE]
    if not only:
        return names
    chosen = []
    for pattern in only:
        hits = [pattern] if pattern in names else [n for n in names if pattern in n]
        if not hits:
            raise SystemExit(f"--only {pattern!r} matches no case; cases: {', '.join(names)}")
        chosen += [h for h in hits if h not in chosen]
    return [n for n in names if n in chosen]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, metavar="N",
                        help="timed runs per scheduler; the best is kept (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="small graphs (3,999-task tree, 1,000-task chain): a smoke run")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this case (exact name, else substring; repeatable)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    selected = select(args.only)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()}, dask {dask.__version__}, "
          f"{os.cpu_count()} CPUs, load average {load:.1f}, best of {args.repeat}"
          f"{', quick graphs' if args.quick else ''}", flush=True)
    built: dict[str, tuple[dict, list]] = {}

    def graph(name: str) -> tuple[dict, list]:
        if name not in built:
            built[name] = GRAPHS[name][1 if args.quick else 0]()
        return built[name]

    try:
        warm_up()
        head = (f"{'graph':<6} {'scheduler':<13} {'tasks':>8} {'dask µs/task':>13} "
                f"{'localsched µs/task':>19} {'dask/localsched':>16} {'target':>7} {'met':>4}")
        print()
        print(head)
        print("-" * len(head))
        missed = []
        for case in CASES:
            if case.name not in selected:
                continue
            r = run_case(case, *graph(case.graph), args.repeat)
            ratio = r["dask_us"] / r["ls_us"]
            if case.target is None:
                target, met = "-", "-"
            else:
                target = f">={case.target:g}x"
                met = "yes" if ratio >= case.target else "NO"
                if met == "NO":
                    missed.append(case.name)
            print(f"{case.graph:<6} {case.scheduler:<13} {r['tasks']:>8,} {r['dask_us']:>13.2f} "
                  f"{r['ls_us']:>19.2f} {ratio:>15.1f}x {target:>7} {met:>4}", flush=True)

        if DIAGNOSTICS_CASE in selected:
            r = run_diagnostics(*graph("tree"), args.repeat)
            print()
            print(f"diagnostics on the tree, threads(2), {r['tasks']:,} tasks "
                  f"(Profiler, ResourceProfiler(dt=1), CacheProfiler, ProgressBar);\n"
                  f"localsched's 'without' is a watched run (a no-op finish hook: "
                  f"see the module docstring), its plain run "
                  f"{r['localsched plain']:.2f} µs/task:")
            head = (f"{'library':<11} {'without µs/task':>16} {'with µs/task':>13} "
                    f"{'added µs/task':>14} {'target':>7} {'met':>4}")
            print(head)
            print("-" * len(head))
            for lib, key in (("dask", "dask"), ("localsched", "localsched")):
                if key + "+diag" not in r:
                    print(f"{lib:<11} diagnostics not available ({r['why']})")
                    continue
                added = r[key + "+diag"] - r[key]
                if lib == "localsched":
                    target = f"<={DIAGNOSTICS_TARGET_US:g}"
                    met = "yes" if added <= DIAGNOSTICS_TARGET_US else "NO"
                    if met == "NO":
                        missed.append(DIAGNOSTICS_CASE)
                else:
                    target, met = "-", "-"
                print(f"{lib:<11} {r[key]:>16.2f} {r[key + '+diag']:>13.2f} {added:>14.2f} "
                      f"{target:>7} {met:>4}", flush=True)
            if "localsched+all" in r:
                added = r["localsched+all"] - r["localsched"]
                met = "yes" if added <= ALL_DIAGNOSTICS_TARGET_US else "NO"
                if met == "NO":
                    missed.append(DIAGNOSTICS_CASE + " (all six)")
                print(f"{'all six':<11} {r['localsched']:>16.2f} {r['localsched+all']:>13.2f} "
                      f"{added:>14.2f} {'<=' + format(ALL_DIAGNOSTICS_TARGET_US, 'g'):>7} "
                      f"{met:>4}   (+ FineMetrics, SampleProfiler(interval=0.01))", flush=True)
            if "localsched+daskbar" in r:
                added = r["localsched+daskbar"] / r["localsched"] - 1
                met = "yes" if added <= DASK_PROGRESSBAR_TARGET else "NO"
                if met == "NO":
                    missed.append("dask-progressbar-on-localsched")
                print(f"dask's own ProgressBar around localsched: {r['localsched+daskbar']:.2f} "
                      f"µs/task, {added:+.1%} (target <= +{DASK_PROGRESSBAR_TARGET:.0%}) {met}")
        print()
        if missed:
            print(f"targets missed: {', '.join(missed)} (targets are reported, not asserted)")
        else:
            print("all targets met.")
    finally:
        localsched.multiprocessing.shutdown()
        localsched.threaded.shutdown()
    return 0


if __name__ == "__main__":  # the process pools start workers with "spawn"
    sys.exit(main())
