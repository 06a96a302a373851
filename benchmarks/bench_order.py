"""Peak live results under localsched's static order vs dask's order.

For each graph in ``graphs.ORDER_GRAPHS``, both orders are put on the same
integer-indexed graph (``localsched.plan.graph.compile_graph``) and replayed as a
sequential run, one task at a time in priority order; the figure is
``localsched.plan.order.peak_live`` of that run: the most results held at once,
a result being held from when its task runs until its last dependent has
run (outputs to the end).  Both orders are counted the same way:

* the tasks are the same: those localsched's ``order`` keeps (it culls
  tasks no output needs and leaves out plain data, which is in memory from
  the start and counted for neither);
* dask's ``dask.order.order(dsk)`` gives a priority to every key; its run is
  those same tasks sorted by dask's priority, checked to be topological.

Also shown: the wall time of each ordering (best of a few), since the order
is computed on every ``get``.

Run:  python benchmarks/bench_order.py [--repeat N] [--only NAME]
"""

from __future__ import annotations

import argparse
import sys
import time

import dask.order

from localsched.plan.graph import compile_graph
from localsched.plan.order import order as ls_order
from localsched.plan.order import peak_live

try:  # run as a script (python benchmarks/bench_order.py) or as a module
    from . import graphs
except ImportError:
    import graphs


def best_time(fn, repeat: int) -> tuple[float, object]:
    """Best wall time of ``repeat`` calls of ``fn()``, and the last result."""
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def check_topological(run: list, deps: list, is_data: list, what: str) -> None:
    """Raise if a task in ``run`` comes before one of its non-data dependencies."""
    pos = {i: p for p, i in enumerate(run)}
    for p, i in enumerate(run):
        for d in deps[i]:
            if not is_data[d] and pos.get(d, len(run)) >= p:
                raise AssertionError(f"{what}: task {i} runs before its dependency {d}")


def compare(dsk: dict, outputs: list, repeat: int) -> dict:
    """Peak live results and ordering times for one graph."""
    g = compile_graph(dsk)
    out_idx = [g.index[k] for k in outputs]
    t_ls, ours = best_time(lambda: ls_order(g.deps, g.is_data, out_idx, g.keys), repeat)
    # localsched's real cost per get includes compile_graph, but dask's order
    # builds its own dependency maps from the raw graph too, so compare both
    # from the raw dict.
    t_ls_total, _ = best_time(
        lambda: ls_order(compile_graph(dsk).deps, g.is_data, out_idx), repeat
    )
    t_dask, prio = best_time(lambda: dask.order.order(dsk), repeat)
    theirs = sorted(ours, key=lambda i: prio[g.keys[i]])
    check_topological(ours, g.deps, g.is_data, "localsched order")
    check_topological(theirs, g.deps, g.is_data, "dask order")
    return {
        "tasks": len(ours),
        "ls_peak": peak_live(ours, g.deps),
        "dask_peak": peak_live(theirs, g.deps),
        "ls_ms": t_ls * 1e3,
        "ls_total_ms": t_ls_total * 1e3,
        "dask_ms": t_dask * 1e3,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timing runs per order (best kept)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="graphs whose name contains NAME (repeatable)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    names = [n for n in graphs.ORDER_GRAPHS
             if not args.only or any(s.lower() in n.lower() for s in args.only)]
    if not names:
        parser.error(f"no graph matches {args.only}; graphs: {list(graphs.ORDER_GRAPHS)}")

    head = (f"{'graph':<40} {'tasks':>7} {'peak ls':>8} {'peak dask':>9} "
            f"{'no worse than dask':>18} {'order ms ls':>11} {'+compile':>9} {'dask':>8}")
    print(head)
    print("-" * len(head))
    worse = []
    for name in names:
        try:
            dsk, outputs = graphs.ORDER_GRAPHS[name]()
        except ImportError as exc:  # dask.array needs numpy
            print(f"{name:<40} skipped: {exc}")
            continue
        r = compare(dsk, outputs, args.repeat)
        ok = r["ls_peak"] <= r["dask_peak"]
        if not ok:
            worse.append(name)
        verdict = "yes" if ok else f"NO (+{r['ls_peak'] - r['dask_peak']})"
        print(f"{name:<40} {r['tasks']:>7,} {r['ls_peak']:>8,} {r['dask_peak']:>9,} "
              f"{verdict:>18} {r['ls_ms']:>11.1f} {r['ls_total_ms']:>9.1f} {r['dask_ms']:>8.1f}",
              flush=True)
    print()
    print("peak = most results held at once in a sequential run in priority order;")
    print("order ms ls = localsched.plan.order.order alone; +compile = with compile_graph.")
    if worse:
        print(f"localsched holds more than dask on: {', '.join(worse)}")
    else:
        print("localsched's order is no worse than dask's on every graph.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
