"""Workloads that hold far more than a memory budget under dask's threaded
scheduler (test and benchmark helper, issue #34's bars).

Each builder takes the scale (bytes of data the workload makes) and returns
``(collection, check)``: ``check(result)`` asserts the answer is right
(known in closed form: no second run to compare with).  At their default
scale (``SCALE``, 640 MB; the shuffle 384 MB),
dask's threaded scheduler holds at least 3x ``BUDGET`` (200 MB) at its peak
(``benchmarks/bench_budget.py`` measures it).  The tests run them at half
that (``TEST_SCALES``, under ``TEST_BUDGET``, 100 MB): dask still holds
3.3-4.2x the budget (333-415 MB), in half the tasks' bytes and, for the
shuffle, a quarter of its tasks.
"""

from __future__ import annotations

import math

import numpy as np

MB = 10**6
BUDGET = 200 * MB
SCALE = 640 * MB
CHUNK = 8 * MB  # bytes per chunk / partition


def _ones_block(block_id, rows, cols, n_cols_blocks):
    """A deterministic block: row index + column index * 1e-6 (float64)."""
    r0 = block_id[0] * rows
    c0 = block_id[1] * cols
    r = np.arange(r0, r0 + rows, dtype="f8")[:, None]
    c = np.arange(c0, c0 + cols, dtype="f8")[None, :]
    return r + c * 1e-6


def array_fan_in(scale: int = SCALE):
    """A centred array's spread: every chunk is wanted by the column means
    (a fan-in over all of them) and again after it: held whole."""
    import dask.array as da

    cols = 1000
    rows_per_chunk = CHUNK // (8 * cols)
    nchunks = max(3, scale // CHUNK)
    rows = rows_per_chunk * nchunks
    x = da.map_blocks(_ones_block, rows=rows_per_chunk, cols=cols, n_cols_blocks=1,
                      dtype="f8", chunks=((rows_per_chunk,) * nchunks, (cols,)))
    y = abs(x - x.mean(axis=0)).sum(axis=0)

    def check(result):
        # column j: |r - mean(r)| summed over r = 0..rows-1
        expected = float(np.abs(np.arange(rows) - (rows - 1) / 2).sum())
        np.testing.assert_allclose(result, np.full(cols, expected), rtol=1e-6)

    return y, check


def late_reuse(scale: int = SCALE):
    """An intermediate made early and used again at the very end: ``b``
    needs ``a``'s total (every chunk of ``a`` first), and ``a`` is scaled by
    ``b``'s mean at the end, so ``a`` waits, whole, while ``b`` is made."""
    import dask.array as da

    n = max(4, scale // CHUNK)
    per = CHUNK // 8
    a = da.map_blocks(_vector_block, dtype="f8", chunks=((per,) * n,), base=0.0)
    a_total = a.sum()
    b = da.map_blocks(_vector_block, dtype="f8", chunks=((per,) * n,), base=1.0) + a_total * 0
    out = (a * b.mean()).sum() + a_total

    def check(result):
        total_a = per * n * (per * n - 1) / 2 * 1e-9
        mean_b = 1.0 + (per * n - 1) / 2 * 1e-9
        assert math.isclose(float(result), total_a * mean_b + total_a, rel_tol=1e-9)

    return out, check


def _vector_block(block_id=None, block_info=None, base=0.0):
    lo, hi = block_info[None]["array-location"][0]
    return base + np.arange(lo, hi, dtype="f8") * 1e-9


def dataframe_shuffle(scale: int = 384 * MB):
    """A shuffle by key, then a sum per key: every input partition is split
    for every output before any output can start (dask holds about twice
    the data at its peak: 384 MB are enough)."""
    import dask
    import dask.dataframe as dd
    import pandas as pd

    rows = CHUNK // 16  # two float64 columns
    nparts = max(4, scale // CHUNK)
    nkeys = 64

    def part(i):
        k = np.arange(i * rows, (i + 1) * rows) % nkeys
        return pd.DataFrame({"k": k, "x": np.ones(rows)})

    meta = pd.DataFrame({"k": np.array([], dtype="i8"), "x": np.array([], dtype="f8")})
    ddf = dd.from_delayed([dask.delayed(part)(i) for i in range(nparts)], meta=meta)
    shuffled = ddf.shuffle("k", shuffle_method="tasks", npartitions=nparts)
    out = shuffled.map_partitions(lambda df: df.groupby("k").x.sum()).sum()

    def check(result):
        assert float(result) == float(rows * nparts)

    return out, check


def bag_groupby(scale: int = SCALE):
    """A groupby over a bag of arrays (a shuffle by tasks): all partitions
    are split before any group is complete."""
    import dask.bag as db

    item = 256 * 1024  # bytes per element (an array)
    per_part = CHUNK // item
    nparts = max(4, scale // CHUNK)
    ngroups = 16

    def make(i):
        return [(j % ngroups, np.full(item // 8, 1.0)) for j in range(i * per_part,
                                                                       (i + 1) * per_part)]

    b = db.from_sequence(range(nparts), npartitions=nparts).map_partitions(
        lambda ps: [x for i in ps for x in make(i)])
    groups = b.groupby(lambda kv: kv[0], shuffle="tasks", npartitions=nparts)
    out = groups.map(lambda g: sum(float(v[1].sum()) for v in g[1])).sum()

    def check(result):
        assert float(result) == float(nparts * per_part * (item // 8))

    return out, check


#: The libraries each workload's tasks import where they run.
LIBRARIES = {
    "array_fan_in": ("numpy", "dask.array"),
    "late_reuse": ("numpy", "dask.array"),
    "dataframe_shuffle": ("numpy", "pandas", "dask.dataframe"),
    "bag_groupby": ("numpy", "dask.bag"),
}


def import_libraries(name: str) -> None:
    """A pool worker's initializer: import what workload ``name``'s tasks
    use, so that the baseline of a run on processes is taken with them
    loaded (the caller has them too; about 120 MB of RSS per process for
    ``dask.array``, 140 MB for ``dask.dataframe``: code, not data)."""
    import importlib

    for module in LIBRARIES[name]:
        importlib.import_module(module)


WORKLOADS = {
    "array_fan_in": array_fan_in,
    "late_reuse": late_reuse,
    "dataframe_shuffle": dataframe_shuffle,
    "bag_groupby": bag_groupby,
}

#: The tests' budget and each workload's scale under it: half the
#: benchmark's (chunks keep their size: fewer of them).
TEST_BUDGET = BUDGET // 2
TEST_SCALES = {"array_fan_in": SCALE // 2, "late_reuse": SCALE // 2,
               "dataframe_shuffle": 192 * MB, "bag_groupby": SCALE // 2}


def run_measured(name: str, mode: str, budget: int | None = BUDGET,
                 scale: int | None = None) -> tuple[int, float, str]:
    """Run workload ``name`` in a fresh process on ``mode`` ("sync",
    "threads", "processes" -- localsched with ``memory_limit=budget`` and
    spilling on; or "dask": dask's threaded scheduler), its memory sampled
    from outside (``memory_sampler``): ``(peak bytes above the baseline,
    seconds, the child's error output)``; the child checks the result and
    fails (non-zero exit) if it is wrong."""
    import os
    import subprocess
    import sys

    from tests.support.memory_sampler import MemorySampler

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(here)), here,
                                         env.get("PYTHONPATH", "")])
    p = subprocess.Popen([sys.executable, "-c", _CHILD, name, mode, str(budget or 0),
                          str(scale or 0)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None and p.stdin is not None
        line = p.stdout.readline()
        if line.strip() != "go":
            p.kill()
            _, err = p.communicate()
            raise AssertionError(f"workload {name} on {mode} did not start: {line}{err}")
        with MemorySampler(p.pid) as s:
            p.stdin.write("\n")
            p.stdin.flush()
            out, err = p.communicate()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode:
        raise AssertionError(f"workload {name} on {mode} failed:\n{err}")
    return s.peak_above_baseline, float(out.split()[-1]), err


_CHILD = r"""
import sys, time
import dask
from budget_workloads import WORKLOADS
name, mode, budget, scale = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
coll, check = WORKLOADS[name](scale) if scale else WORKLOADS[name]()
pool = {}
if mode == "processes":  # (the pool's workers start before the baseline, with the
    import localsched.multiprocessing  # workload's libraries imported, as this process has)
    from budget_workloads import import_libraries
    pool = {"initializer": import_libraries, "initargs": (name,)}
    localsched.multiprocessing.get({"a": (abs, -1)}, "a", num_workers=2, **pool)
sys.stdout.write("go\n"); sys.stdout.flush(); sys.stdin.readline()
t0 = time.time()
if mode == "dask":
    r = coll.compute(scheduler="threads", num_workers=2)
else:
    import localsched.local, localsched.multiprocessing, localsched.threaded
    get = {"threads": localsched.threaded.get, "sync": localsched.local.get_sync,
           "processes": localsched.multiprocessing.get}[mode]
    with dask.config.set({"localsched.memory.spill": True}):
        r = coll.compute(scheduler=get, memory_limit=budget or None, num_workers=2, **pool)
seconds = time.time() - t0
check(r)
print(seconds, flush=True)
"""
