"""Graph preparation against a bare-loop floor: the 50k-task tree on sync.

Four things run alternately in one process, best of ``--repeat``:

- **floor**: a plain topological loop over the same dict: depth-first from
  the outputs, each task run once its arguments that are keys are done
  (no compiled graph, no order, no release, no callbacks);
- **localsched**: ``localsched.local.get_sync``, the whole call;
- **prep**: its preparation alone (``RunState(dsk, keys)``: compile, order,
  initial state), and each of the three parts on its own;
- **dask**: ``dask.local.get_sync`` (``--no-dask`` leaves it out).

Printed: µs per task of each, localsched's and the preparation's multiple
of the floor, dask / localsched, and the garbage collector's passes during
one localsched get (count per generation, µs per task).

Run:  python benchmarks/bench_prep.py [--repeat N] [--leaves N] [--clock cpu] [--no-dask]

``--clock cpu`` times with the calling thread's CPU clock instead of the
wall clock: on a loaded machine it is the steadier of the two (nothing here
waits for anything).
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
from localsched.plan.graph import compile_graph
from localsched.plan.order import order_and_consumers
from localsched.run.machine import RunState

try:  # run as a script (python benchmarks/bench_prep.py) or as a module
    from . import graphs
except ImportError:
    import graphs

TARGET = 15.0  # dask / localsched on the tree, sync (issue 38)


def floor_get(dsk: dict, keys: list) -> tuple:
    """The floor: ``keys`` of ``dsk`` by a plain depth-first loop, every
    argument that is a key replaced by its value (tasks one level deep)."""
    cache: dict = {}
    for root in keys:
        stack = [root]
        while stack:
            k = stack[-1]
            if k in cache:
                stack.pop()
                continue
            task = dsk[k]
            args = task[1:]
            todo = [a for a in args if a in dsk and a not in cache]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            cache[k] = task[0](*[cache[a] if a in dsk else a for a in args])
    return tuple(cache[k] for k in keys)


def best_of(runners: dict[str, Callable[[], object]], repeat: int, clock) -> dict[str, float]:
    """Best seconds of each runner, rotating who goes first each round."""
    names = list(runners)
    best = dict.fromkeys(names, float("inf"))
    for r in range(repeat):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            gc.collect()  # nobody pays for another's garbage
            t0 = clock()
            runners[name]()
            best[name] = min(best[name], clock() - t0)
    return best


def collections_in(fn: Callable[[], object], clock) -> dict[int, tuple[int, float]]:
    """The collector's passes while ``fn()`` runs: generation -> (count, seconds)."""
    seen: dict[int, tuple[int, float]] = {}
    start = [0.0]

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            start[0] = clock()
        else:
            n, s = seen.get(info["generation"], (0, 0.0))
            seen[info["generation"]] = (n + 1, s + clock() - start[0])

    gc.collect()
    gc.callbacks.append(note)
    try:
        fn()
    finally:
        gc.callbacks.remove(note)
    return seen


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, metavar="N")
    parser.add_argument("--leaves", type=int, default=25_000, metavar="N",
                        help="leaves of the tree (2N-1 tasks; default 25,000)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--no-dask", action="store_true")
    args = parser.parse_args(argv)
    clock = time.perf_counter if args.clock == "wall" else time.thread_time
    dsk, keys = graphs.tree_reduction(args.leaves)
    n = graphs.count_tasks(dsk)
    g = compile_graph(dsk)
    outputs = [g.index[k] for k in keys]

    def initial_state() -> None:  # the third part alone, on a state built already
        state.cache = {}
        state._initial_state(g.is_data, outputs)

    state = RunState(dsk, keys)
    expected = localsched.local.get_sync(dsk, keys)
    assert floor_get(dsk, keys) == expected
    runners: dict[str, Callable[[], object]] = {
        "floor": lambda: floor_get(dsk, keys),
        "localsched": lambda: localsched.local.get_sync(dsk, keys),
        "prep": lambda: RunState(dsk, keys),
        "compile": lambda: compile_graph(dsk),
        "order": lambda: order_and_consumers(g.deps, g.is_data, outputs, g.keys),
        "initial state": initial_state,
    }
    if not args.no_dask:
        import dask.local

        assert dask.local.get_sync(dsk, keys) == expected
        runners["dask"] = lambda: dask.local.get_sync(dsk, keys)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load:.1f}, "
          f"best of {args.repeat}, {args.clock} clock; tree of {n:,} tasks, sync")
    best = best_of(runners, args.repeat, clock)
    floor = best["floor"]
    print()
    print(f"{'':<24} {'µs/task':>8} {'x floor':>8}")
    for name in runners:
        part = name in ("compile", "order", "initial state")
        label = ("  " if part else "") + name
        print(f"{label:<24} {best[name] / n * 1e6:>8.2f} {best[name] / floor:>8.2f}")
    if "dask" in best:
        ratio = best["dask"] / best["localsched"]
        print(f"\ndask / localsched: {ratio:.1f}x (target >= {TARGET:g}x: "
              f"{'met' if ratio >= TARGET else 'NOT met'})")
    passes = collections_in(lambda: localsched.local.get_sync(dsk, keys), clock)
    told = ", ".join(f"gen {gen}: {count} ({s / n * 1e6:.2f} µs/task)"
                     for gen, (count, s) in sorted(passes.items()))
    print(f"collector passes in one localsched get: {told or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
