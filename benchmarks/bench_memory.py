"""Peak live results during real runs: dask vs localsched, threads and processes.

The static order (``bench_order.py``) says what a one-task-at-a-time run
would hold; this benchmark counts what an actual run holds, batching,
records in flight and worker pools included.  Every task returns a
``Tracked`` object; a counter shared by all processes (a file-backed
``mmap``, updated under ``flock``) goes up when a Tracked object comes to
life -- made by a task, or unpickled in another process -- and down when
one is freed.  The peak of that counter over a run is the figure: live
result objects, across the scheduler and its workers.

Graphs (the shapes of the drop-in issue): a 4096-leaf binary tree; 256
chains of 16 reduced by a pairwise tree; a 64-wide, 32-step stencil lattice
summed at the end; two reductions (sum and max) over the same 2048 leaves.
And (issue 17) a fan-in of 2000 tasks into one, a bag (512 partitions,
a map each, an 8-ary reduction), and results of real size,
NumPy arrays: 64 arrays of 1 MB into one task (every order holds them all),
200 arrays of 8 MB each reduced to its mean and the means summed (depth
first, a run holds about one array per worker), and a 32 x 16 stencil of
64 KB arrays (the smallest that cross processes in shared memory).  The
peak counts results, as for the others: an array result is one.

The planner does not count results that put no memory at stake (numbers,
short strings: ``metrics.is_tiny``); a ``Tracked`` object is not one of
those (its size is unknown to the planner), so every row here judges the
depth-first rule itself.  (A stencil of ints holds up to a batch of ints
more than this: a few KB; see the planner tests.)

Noise.  On processes the peak depends on timing (how far a worker has got
when the scheduler reads its records, how many lists of records wait in
the scheduler's queue), so one run says little: each (graph, scheduler)
pair runs ``--runs`` times (default 5), dask and localsched alternating,
and the row shows each library's median and max.

Bar: localsched's median peak <= dask's median peak x 1.05 + 2, on threads
and on processes (judged on the medians; the maxima are shown, not judged).

Run:  python benchmarks/bench_memory.py [--runs 5] [--workers 2] [--only NAME]
          [--schedulers threads,processes]
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import mmap
import os
import statistics
import struct
import sys
import tempfile

try:  # run as a script (python benchmarks/bench_memory.py) or as a module
    from . import graphs
except ImportError:
    import graphs

_ENV = "LOCALSCHED_BENCH_COUNTER"
_state: dict = {}


def _counter():
    c = _state.get("mm")
    if c is None:
        fd = os.open(os.environ[_ENV], os.O_RDWR)
        _state["fd"] = fd
        c = _state["mm"] = mmap.mmap(fd, 16)
    return _state["fd"], c


# Threads share one process: a plain counter under a lock is exact and
# cheap there (``_local``); processes need the shared file (set up in main).
_local = {"on": False, "live": 0, "peak": 0}
_local_lock = __import__("threading").Lock()


def _bump(delta: int) -> None:
    if _local["on"]:
        with _local_lock:
            live = _local["live"] = _local["live"] + delta
            if live > _local["peak"]:
                _local["peak"] = live
        return
    fd, mm = _counter()
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        live, peak = struct.unpack_from("qq", mm)
        live += delta
        struct.pack_into("qq", mm, 0, live, max(peak, live))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def read_counter() -> tuple[int, int]:
    if _local["on"]:
        return _local["live"], _local["peak"]
    return struct.unpack_from("qq", _counter()[1])


def reset_counter() -> None:
    if _local["on"]:
        with _local_lock:
            _local["peak"] = _local["live"]
        return
    fd, mm = _counter()
    fcntl.flock(fd, fcntl.LOCK_EX)
    live, _ = struct.unpack_from("qq", mm)
    struct.pack_into("qq", mm, 0, live, live)
    fcntl.flock(fd, fcntl.LOCK_UN)


def _revive(v):
    return Tracked(v)


class Tracked:
    """A result that counts itself, in whichever process holds it."""

    __slots__ = ("v", "__weakref__")

    def __init__(self, v):
        self.v = v
        _bump(1)

    def __del__(self):
        _bump(-1)

    def __reduce__(self):  # a copy unpickled elsewhere is one more live result
        return _revive, (self.v,)


def leaf(i):
    return Tracked(i)


def combine(*xs):
    return Tracked(sum(x.v for x in xs))


def step(x):
    return Tracked(x.v + 1)


def biggest(*xs):
    return Tracked(max(x.v for x in xs))


# -- graphs --------------------------------------------------------------------


def _pairwise(dsk, keys, name, op=None):
    return graphs._reduce_pairwise(dsk, list(keys), name, op or combine)


def binary_tree(n=4096):
    dsk = {("leaf", i): (leaf, i) for i in range(n)}
    return dsk, [_pairwise(dsk, [("leaf", i) for i in range(n)], "t")]


def chains_tree(n=256, length=16):
    dsk = {}
    ends = []
    for c in range(n):
        dsk[("c", c, 0)] = (leaf, c)
        for t in range(1, length):
            dsk[("c", c, t)] = (step, ("c", c, t - 1))
        ends.append(("c", c, length - 1))
    return dsk, [_pairwise(dsk, ends, "r")]


def stencil(width=64, steps=32):
    dsk = {("s", 0, i): (leaf, i) for i in range(width)}
    for t in range(1, steps):
        for i in range(width):
            lo, hi = max(0, i - 1), min(width - 1, i + 1)
            dsk[("s", t, i)] = (biggest, *[("s", t - 1, j) for j in range(lo, hi + 1)])
    return dsk, [_pairwise(dsk, [("s", steps - 1, i) for i in range(width)], "r")]


def shared_two_reductions(n=2048):
    dsk = {("leaf", i): (leaf, i) for i in range(n)}
    leaves = [("leaf", i) for i in range(n)]
    a = _pairwise(dsk, leaves, "sum")
    b = _pairwise(dsk, leaves, "max", biggest)  # a max-tree over the same leaves
    return dsk, [a, b]


def fan_in(n=2000):
    """``[delayed(f)(x) for x in items]``, then one task using them all."""
    dsk = {("x", i): (leaf, i) for i in range(n)}
    dsk["total"] = (combine, *[("x", i) for i in range(n)])
    return dsk, ["total"]


def bag(partitions=512, arity=8):
    """A bag's ``map(...).sum()``: partition, map, then an 8-ary tree."""
    dsk = {}
    level = []
    for i in range(partitions):
        dsk[("part", i)] = (leaf, i)
        dsk[("map", i)] = (step, ("part", i))
        level.append(("map", i))
    depth = 0
    while len(level) > 1:
        depth += 1
        level, prev = [], level
        for j in range(0, len(prev), arity):
            dsk[("agg", depth, j // arity)] = (combine, *prev[j:j + arity])
            level.append(("agg", depth, j // arity))
    return dsk, level


# -- results of real size: NumPy arrays ----------------------------------------------


def block(i, nbytes):
    import numpy as np

    return Tracked(np.full(nbytes // 8, float(i)))


def block_max(*xs):
    import numpy as np

    return Tracked(np.maximum.reduce([x.v for x in xs]))


def block_mean(x):
    return float(x.v.mean())  # (a plain float: the peak counts the arrays)


def block_total(*xs):
    return Tracked(sum(float(getattr(x, "v", x).sum()) if hasattr(getattr(x, "v", x), "sum")
                       else float(x) for x in xs))


def arrays_fan_in(n=64, nbytes=1 << 20):
    """n arrays (1 MB), then one task using them all: every order holds all n."""
    dsk = {("a", i): (block, i, nbytes) for i in range(n)}
    dsk["total"] = (block_total, *[("a", i) for i in range(n)])
    return dsk, ["total"]


def arrays_fan_in_mapped(n=200, nbytes=8 << 20):
    """n arrays (8 MB), each reduced to its mean, then one sum of the means:
    depth-first, a run holds about one array per worker."""
    dsk = {}
    for i in range(n):
        dsk[("a", i)] = (block, i, nbytes)
        dsk[("m", i)] = (block_mean, ("a", i))
    dsk["total"] = (block_total, *[("m", i) for i in range(n)])
    return dsk, ["total"]


def arrays_stencil(width=32, steps=16, nbytes=64 << 10):
    """The stencil lattice on arrays (64 KB, the smallest that cross
    processes through shared memory), its last row reduced pairwise."""
    dsk = {("s", 0, i): (block, i, nbytes) for i in range(width)}
    for t in range(1, steps):
        for i in range(width):
            lo, hi = max(0, i - 1), min(width - 1, i + 1)
            dsk[("s", t, i)] = (block_max, *[("s", t - 1, j) for j in range(lo, hi + 1)])
    return dsk, [_pairwise(dsk, [("s", steps - 1, i) for i in range(width)], "r", block_max)]


GRAPHS = {
    "binary tree (4096 leaves)": binary_tree,
    "256 chains of 16 + tree": chains_tree,
    "stencil 64x32": stencil,
    "two reductions, shared leaves": shared_two_reductions,
    "fan-in 2000 + one task": fan_in,
    "bag 512 parts, 8-ary": bag,
    "arrays: fan-in 64 x 1 MB": arrays_fan_in,
    "arrays: 200 x (8 MB -> mean) + sum": arrays_fan_in_mapped,
    "arrays: stencil 32x16 of 64 KB": arrays_stencil,
}


def peak_of(get, dsk, keys, **kw) -> int:
    gc.collect()
    reset_counter()
    base = read_counter()[0]
    result = get(dsk, keys, **kw)
    peak = read_counter()[1] - base
    del result
    gc.collect()
    return peak


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--runs", type=int, default=5,
                   help="runs per (graph, scheduler) and library; the bar is judged on medians")
    p.add_argument("--only", default=None, help="run graphs whose name contains this")
    p.add_argument("--schedulers", default="threads,processes")
    p.add_argument("--chunksize", type=int, default=None,
                   help="pass chunksize= to localsched (to see what batching costs)")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")

    fd, path = tempfile.mkstemp(prefix="localsched-bench-counter-")
    os.write(fd, b"\0" * 16)
    os.close(fd)
    os.environ[_ENV] = path
    # Workers must import this module by name: make it importable.
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import bench_memory as me  # the same module under its importable name
    import dask.multiprocessing
    import dask.threaded

    import localsched.multiprocessing
    import localsched.threaded

    pairs = {
        "threads": (dask.threaded.get, localsched.threaded.get),
        "processes": (dask.multiprocessing.get, localsched.multiprocessing.get),
    }
    rows = []
    ok = True
    try:
        for sched in args.schedulers.split(","):
            dget, lget = pairs[sched]
            me._local["on"] = sched == "threads"
            for name, build in me.GRAPHS.items():
                if args.only and args.only not in name:
                    continue
                dsk, keys = build()
                d, ls = [], []
                for r in range(args.runs):  # alternating, each first in turn
                    runs = [(d, dget, {}), (ls, lget, {"chunksize": args.chunksize})]
                    for peaks, get, kw in runs[::-1] if r % 2 else runs:
                        peaks.append(me.peak_of(get, dsk, keys, num_workers=args.workers, **kw))
                dmed, lmed = statistics.median(d), statistics.median(ls)
                bar = dmed * 1.05 + 2
                good = lmed <= bar
                ok &= good
                rows.append((name, sched, d, ls, bar, good))
                print(f"{name:32s} {sched:9s} dask {_fmt(d)}  localsched {_fmt(ls)}  "
                      f"{'ok' if good else 'OVER'} (bar {bar:.1f} on the medians)  "
                      f"[dask {sorted(d)}, localsched {sorted(ls)}]", flush=True)
    finally:
        localsched.multiprocessing.shutdown()
        os.unlink(path)
    print(f"\n{args.runs} runs each: median (max)\n")
    print("| graph | scheduler | dask peak | localsched peak | bar (dask median x 1.05 + 2) |")
    print("|---|---|--:|--:|---|")
    for name, sched, d, ls, bar, good in rows:
        print(f"| {name} | {sched} ({args.workers}) | {_fmt(d)} | {_fmt(ls)} | "
              f"{bar:.1f}: {'met' if good else 'MISSED'} |")
    return 0 if ok else 1


def _fmt(peaks: list) -> str:
    """``median (max)`` of a list of peaks."""
    return f"{statistics.median(peaks):g} ({max(peaks)})"


if __name__ == "__main__":
    sys.exit(main())
