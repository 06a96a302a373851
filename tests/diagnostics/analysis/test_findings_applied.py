"""Findings on real workloads of each cause (issue #36), and their fixes
applied as written: the gain measured is at least half the one claimed.

Tasks sleep where a gain is measured: sleeping tasks leave the cores to
each other, so what is compared is the work's shape, which the load of
this shared machine does not change (the hogs' test is about that load).
Each hog and pool a test starts it stops (``finally``)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import localsched
import localsched.multiprocessing as lmp
from localsched.diagnostics.report import performance_report
from localsched.utils import key_split
from tests.support.platform_marks import needs_schedstat

HELD_BACK = {"gil", "straggler", "overhead"}


def nap(x, seconds):
    time.sleep(seconds)
    return x


def recorded(get, dsk, keys, samples=False, **kwargs):
    with performance_report(None, samples=samples) as report:
        get(dsk, keys, **kwargs)
    return report.data


def wall(run) -> float:
    return sum(b - a for a, b in run.walls)


def verdicts(run) -> dict:
    """The rules' verdicts whatever the machine's load (see test_findings)."""
    run.meta.pop("load", None)
    return {f.kind: f for f in run.findings()}


def parts(durations):
    """Independent sleeping tasks, run in the order given (keys in that order)."""
    return {("part", i): (nap, i, d) for i, d in enumerate(durations)}


def test_a_straggler_last_claims_what_an_even_split_saves_and_splitting_gains_it():
    dsk = parts([0.03] * 20 + [0.6])
    run = recorded(localsched.get, dsk, list(dsk), num_workers=2)
    found = verdicts(run)
    assert "straggler" in found, [str(f) for f in run.findings()]
    claimed = found["straggler"].seconds
    assert claimed > 0.15
    even = parts([0.03] * 40)  # (the slow one's 0.6 s split into 20 usual pieces)
    after = recorded(localsched.get, even, list(even), num_workers=2)
    assert wall(run) - wall(after) >= 0.5 * claimed


def test_a_straggler_first_while_the_rest_fill_the_other_worker_is_no_finding():
    dsk = parts([0.6] + [0.03] * 20)
    run = recorded(localsched.get, dsk, list(dsk), num_workers=2)
    assert "straggler" not in verdicts(run), [str(f) for f in run.findings()]


def test_sleeping_io_on_two_threads_names_the_threads_and_they_gain_it():
    dsk = {("fetch", i): (nap, i, 0.05) for i in range(48)}
    run = recorded(localsched.get, dsk, list(dsk), num_workers=2)
    found = verdicts(run)
    assert "idle" in found, [str(f) for f in run.findings()]
    f = found["idle"]
    n = int(f.fix.split("num_workers=")[1].split(")")[0])
    assert n >= 8 and "straggler" not in found and "overhead" not in found
    after = recorded(localsched.get, dsk, list(dsk), num_workers=n)
    assert wall(run) - wall(after) >= 0.5 * f.seconds


def matmul_block(seed):
    a = np.random.default_rng(seed).random((300, 300))
    return float((a @ a).sum())


def other_programs_spinning(n: int) -> list:
    """n processes spinning on the CPU as other programs would: not this
    process's descendants (the load meter counts those as its own
    workers), each started by a shell that exits at once."""
    import psutil

    procs = []
    for _ in range(n):
        out = subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'while 1: pass' "
                              ">/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout
        procs.append(psutil.Process(int(out.split()[0])))
    return procs


def test_beside_cpu_hogs_the_machine_was_busy_and_nothing_false_is_said():
    import psutil

    hogs = other_programs_spinning(3)
    try:
        dsk = {("block", i): (matmul_block, i) for i in range(16)}
        run = recorded(localsched.get, dsk, list(dsk), samples=True, num_workers=2)
    finally:
        for h in hogs:
            try:
                h.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(hogs, timeout=30)
    found = {f.kind: f for f in run.findings()}
    assert "busy" in found, [str(f) for f in run.findings()]
    assert not ({"transfer"} | HELD_BACK) & set(found), [str(f) for f in run.findings()]


COLD_MODULE = """
import pandas, pandas.core.frame  # (a heavy import: what a cold worker pays)

def score(i):
    return i + 1
"""


def test_a_cold_pool_importing_the_tasks_module_is_start_up_never_transfer(tmp_path,
                                                                          monkeypatch):
    (tmp_path / "cold_udfs.py").write_text(textwrap.dedent(COLD_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import cold_udfs

    pool = lmp.ProcessPool(2)
    try:
        dsk = {("score", i): (cold_udfs.score, i) for i in range(8)}
        run = recorded(lmp.get, dsk, list(dsk), num_workers=2, pool=pool)
    finally:
        pool.shutdown()
        sys.modules.pop("cold_udfs", None)
    found = verdicts(run)
    assert "transfer" not in found, [str(f) for f in run.findings()]
    assert "start-up" in found, [str(f) for f in run.findings()]


@pytest.mark.parametrize("threads", [1])
def test_the_load_and_blas_threads_are_recorded(threads):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads):
        run = recorded(localsched.get, {"a": (nap, 1, 0.01)}, "a")
    assert run.meta["blas"]["threads"] == threads
    load = run.meta["load"]
    assert load["cores"] >= 1 and load["seconds"] > 0 and load["machine_cpu"] >= 0
    assert load["native_cpu"] >= 0 and load["caller_cpu"] >= 0


def test_the_demo_runs_one_blas_thread_per_task(tmp_path):
    # (the variables used to be set after the report had imported NumPy:
    # BLAS had read them already, and ran a thread per core in each task)
    pytest.importorskip("threadpoolctl")
    import json
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-m", "localsched.command.cli", "demo", "--blocks", "2",
         "--block-size", "60", "--no-progress", "--no-samples", "-o", "demo.html",
         "--json", "demo.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "demo.json").read_text())["meta"]
    assert meta["blas"]["threads"] == 1


def blas_blocks(i):
    a = np.random.default_rng(i).random((700, 700))
    for _ in range(6):
        a = a @ a.T / 700.0
    return float(a[0, 0])


def test_blas_threads_the_user_set_for_process_workers_are_named_and_unsetting_them_gains(
        monkeypatch):
    # (issue #36: the blas finding judged threads only.  localsched's process
    # workers run BLAS on their share of the cores unless the environment
    # says how many: a user's OPENBLAS_NUM_THREADS of one per core, in each
    # of 2 workers, has twice the cores' threads fight for them)
    pytest.importorskip("threadpoolctl")
    import os

    from localsched.system.blas import VARIABLES

    for var in VARIABLES:
        monkeypatch.delenv(var, raising=False)
    threads = max(2, os.cpu_count() or 1)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", str(threads))
    dsk = {("blocks", i): (blas_blocks, i) for i in range(16)}
    # (both workers started and NumPy imported before the recording)
    warm = {("warm", i): (blas_blocks, i) for i in range(4)}
    try:
        lmp.shutdown()
        lmp.get(warm, list(warm), num_workers=2)
        run = recorded(lmp.get, dsk, list(dsk), num_workers=2)
        assert run.meta["blas"]["environment"] == {"OPENBLAS_NUM_THREADS": str(threads)}
        shown = {f.kind: f for f in run.findings()}
        if "busy" in shown:  # (others took the cores too: that cause is held back)
            assert "blas" not in shown, [str(f) for f in run.findings()]
            return
        assert "blas" in shown, [str(f) for f in run.findings()]
        f = shown["blas"]
        assert f"OPENBLAS_NUM_THREADS={threads}" in f.title and "unset" in f.fix
        monkeypatch.delenv("OPENBLAS_NUM_THREADS")  # (the fix as written)
        lmp.shutdown()
        lmp.get(warm, list(warm), num_workers=2)
        after = recorded(lmp.get, dsk, list(dsk), num_workers=2)
        assert "blas" not in {g.kind for g in after.findings()}
        assert wall(run) - wall(after) >= 0.5 * f.seconds, (wall(run), wall(after), f.seconds)
    finally:
        lmp.shutdown()


def parse_records(lines):
    import json

    out = []
    for line in lines:
        record = json.loads(line)
        out.append(sum(len(str(v)) for v in record.values()))
    return sum(out)


@needs_schedstat
def test_a_bag_of_json_on_threads_names_the_users_function_and_localscheds_processes():
    import json

    lines = [json.dumps({"id": i, "name": f"user{i}", "tags": ["a", "b"], "score": i + 0.5})
             for i in range(8_000)]
    dsk = {("parse", i): (parse_records, lines) for i in range(40)}
    run = recorded(localsched.get, dsk, list(dsk), samples=True, num_workers=2)
    found = verdicts(run)
    assert "gil" in found, [str(f) for f in run.findings()]
    f = found["gil"]
    assert "parse_records (test_findings_applied.py:" in f.title
    assert "scheduler=localsched.multiprocessing.get" in f.fix and "'processes'" not in f.fix


def test_xarray_rolling_and_groupby_raise_no_false_alarm():
    # (well-shaped chunks: no overhead, gil, straggler, transfer or blas,
    # loaded or not -- on a busy machine the busy finding holds back the first three)
    xr = pytest.importorskip("xarray")
    import dask.array as da
    import pandas as pd

    time_ = pd.date_range("2000-01-01", periods=730, freq="D")
    data = da.random.RandomState(0).random_sample((730, 60, 60), chunks=(183, 60, 60))
    x = xr.DataArray(data, dims=("time", "lat", "lon"), coords={"time": time_})
    with performance_report(None) as report:
        x.rolling(time=7).mean().groupby("time.month").mean().compute(
            scheduler=localsched.get)
    found = {f.kind: f for f in report.data.findings()}
    assert not ({"transfer", "blas"} | HELD_BACK) & set(found), \
        [str(f) for f in report.data.findings()]
    # (and the overhead rule itself, busy machine or not: 4 chunks on 2
    # workers; its tiny tasks are the groupby's shuffle, not the chunks)
    assert "overhead" not in verdicts(report.data), [str(f) for f in report.data.findings()]


def inc(x):
    return x + 1


def inc_range(lo, hi):
    return [x + 1 for x in range(lo, hi)]


def test_tiny_tasks_made_bigger_as_the_overhead_finding_says_gain_what_it_claims():
    dsk = {("inc", i): (inc, i) for i in range(20_000)}
    with performance_report(None, samples=False) as report:
        localsched.get(dsk, list(dsk), num_workers=2)
    run = report.data
    found = verdicts(run)
    assert "overhead" in found, [str(f) for f in run.findings()]
    claimed = found["overhead"].seconds
    # (the computation from its graph's submission: its preparation is saved too)
    before = max(g.finished for g in run.graphs) - min(g.submitted for g in run.graphs)
    assert claimed <= before
    bigger = {("inc", j): (inc_range, j * 10_000, (j + 1) * 10_000) for j in range(2)}
    with performance_report(None, samples=False) as report:
        localsched.get(bigger, list(bigger), num_workers=2)
    after = max(g.finished for g in report.data.graphs) - min(
        g.submitted for g in report.data.graphs)
    assert before - after >= 0.5 * claimed


def py_loop(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


@needs_schedstat
def test_python_loops_moved_to_processes_as_the_gil_finding_says_gain_what_it_claims():
    # (the fix as written: localsched's processes, its pool started once
    # per script -- warmed here, as a script's later computations find it.
    # Each way's best, alternating, up to 6 rounds until the gain shows:
    # the other programs on this machine come and go, and a moment they
    # take the cores takes processes' gain (beside steady CPU hogs,
    # processes still get twice the threads' share of the cores).  Half a
    # second of gain: a burst of load of a few tenths of a second took all
    # of a 0.16 s gain, about 1 run in 10 beside another test run.)
    dsk = {("py", i): (py_loop, 500_000) for i in range(40)}
    lmp.get({"warm": (py_loop, 10)}, "warm", num_workers=2)
    run = recorded(localsched.get, dsk, list(dsk), samples=True, num_workers=2)
    found = verdicts(run)
    assert "gil" in found, [str(f) for f in run.findings()]
    f = found["gil"]
    assert "compute(..., scheduler=localsched.multiprocessing.get)" in f.fix
    threads, processes = [wall(run)], []
    for _ in range(6):
        processes.append(wall(recorded(lmp.get, dsk, list(dsk), num_workers=2)))
        if min(threads) - min(processes) >= 0.5 * f.seconds:
            break
        threads.append(wall(recorded(localsched.get, dsk, list(dsk), num_workers=2)))
    assert min(threads) - min(processes) >= 0.5 * f.seconds, (threads, processes, f.seconds)


def rescore(d):
    weight = sum(ord(c) for c in d["name"]) % 7
    return {"id": d["id"], "score": d["score"] * weight + len(d["tags"]),
            "name": d["name"].upper()}


@needs_schedstat
def test_a_bag_of_dicts_held_by_the_gil_is_not_sent_to_processes_that_pickle_it():
    # (Python code over 480,000 dicts, a few microseconds each: on threads the
    # GIL holds it to one at a time, but on processes each partition's dicts
    # are pickled over and back -- 200,000 dicts took 2.2-2.8 s on threads,
    # 3.0-4.8 s on localsched's processes with a warm pool, here.  The
    # finding weighs the dicts that would cross: no processes; and waits
    # for the GIL are no I/O: no more threads.  Enough dicts for the
    # sampler's 20 looks a verdict needs: 160,000 took 0.3 s of task time,
    # 13 looks, and the verdict rested on a few ms of hand-off gaps either
    # way -- found in 1 run of 3; 480,000: 44-78 looks, 77-90 % of them
    # waiting for the GIL.)
    db = pytest.importorskip("dask.bag")
    # (the partitions are the graph's literal data, as from_sequence makes
    # them, without its hashing of every dict: seconds on this machine)
    dsk = {("records", p): [{"id": i, "name": f"user{i}", "tags": ["a", "b", "c"],
                             "score": i + 0.5} for i in range(p * 15_000, (p + 1) * 15_000)]
           for p in range(32)}
    bag = db.Bag(dsk, "records", 32).map(rescore).pluck("score")
    with performance_report(None, samples=True) as report:
        bag.sum().compute(scheduler=localsched.get, num_workers=2)
    run = report.data
    found = verdicts(run)
    assert "gil" in found, [str(f) for f in run.findings()]
    assert "multiprocessing" not in found["gil"].fix, found["gil"].fix
    assert "pickling" in found["gil"].fix
    assert "idle" not in found, [str(f) for f in run.findings()]


def group_stats(g):
    import pandas as pd

    return pd.Series({"mean": g["x"].mean(), "spread": g["y"].max() - g["y"].min()})


def grouped_apply(partitions: int):
    """A dataframe groupby-apply (real pandas via dask.dataframe, the tasks
    shuffle), 24,000 rows in ``partitions``, recorded on 2 threads."""
    import dask
    import pandas as pd

    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(0)
    n = 24_000
    frame = pd.DataFrame({"key": rng.integers(0, 50, n), "x": rng.random(n),
                          "y": rng.random(n)})
    df = dd.from_pandas(frame, npartitions=partitions)
    with dask.config.set({"dataframe.shuffle.method": "tasks"}), \
            performance_report(None, samples=True) as report:
        df.groupby("key").apply(group_stats, meta={"mean": "f8", "spread": "f8"}).compute(
            scheduler=localsched.get, num_workers=2)
    return report.data


def test_a_dataframe_groupby_apply_of_well_shaped_partitions_raises_no_false_alarm():
    run = grouped_apply(4)
    found = {f.kind: f for f in run.findings()}
    assert not ({"transfer", "blas"} | HELD_BACK) & set(found), [str(f) for f in run.findings()]
    assert "overhead" not in verdicts(run), [str(f) for f in run.findings()]


def test_a_dataframe_groupby_apply_of_tiny_partitions_is_told_to_use_fewer():
    # (24 partitions of 1,000 rows: the shuffle's ~500 tasks of microseconds,
    # each a hand-off; the fix names the partitions, keeping 2 a worker)
    run = grouped_apply(24)
    found = verdicts(run)
    assert "overhead" in found, [str(f) for f in run.findings()]
    # (from its cause, pandas' fixed cost per call, or from the hand-offs' gaps)
    assert re.search(r"the 24 (chunks or partitions|pieces) of 'frompandas' as about 4",
                     found["overhead"].fix), found["overhead"].fix
    # the fix as written gains at least half what it claims (each way's
    # best, alternating, up to 3 rounds: other programs come and go)
    claimed = found["overhead"].seconds
    tiny, fixed = [wall(run)], []
    for _ in range(3):
        fixed.append(wall(grouped_apply(4)))
        if min(tiny) - min(fixed) >= 0.5 * claimed:
            break
        tiny.append(wall(grouped_apply(24)))
    assert min(tiny) - min(fixed) >= 0.5 * claimed, (tiny, fixed, claimed)


def test_a_set_index_computed_once_is_one_computation_the_user_asked_for(tmp_path):
    # (dask computes set_index's divisions in a computation of its own while
    # compute() lowers the expression: the caller's time between the two is
    # dask building the graph the user asked for once -- never "compute them
    # together"; a loop computing twice on one line is two)
    import dask
    import pandas as pd

    from localsched.diagnostics.analysis.facts import Facts
    from localsched.diagnostics.runs.rundata import RunData

    dd = pytest.importorskip("dask.dataframe")
    frame = pd.DataFrame({"a": np.arange(40_000) % 997, "b": np.ones(40_000)})
    df = dd.from_pandas(frame, npartitions=8)
    # (as a config: dask computes the divisions on the configured scheduler,
    # not on the one handed to compute())
    with dask.config.set(scheduler=localsched.get, num_workers=2), \
            performance_report(None) as report:
        df.set_index("a").b.sum().compute()
    run = report.data
    assert len(run.walls) == 2, run.walls  # (the divisions, then the sum)
    assert Facts(run).asked == 1, [g.stack for g in run.graphs]
    assert run.graphs[-1].stack[-3][0] == __file__  # (the user's line, then dask's two computes)
    run.save_json(tmp_path / "run.json")
    assert Facts(RunData.load_json(tmp_path / "run.json")).asked == 1
    with performance_report(None) as report:
        for part in (df.a.sum(), df.b.sum()):
            part.compute(scheduler=localsched.get, num_workers=2)
    assert Facts(report.data).asked == 2


def test_a_gil_fix_names_the_users_code_only_where_the_tasks_run_it():
    # (dask's sum of many small chunks: 'sum-partial' is NumPy composed with
    # dask's own functions -- a GIL finding there cannot ask the user to move
    # "the Python loop" into NumPy; a bag mapping the user's lambda can)
    import dask.array as da
    import dask.bag as db

    from localsched.diagnostics.analysis.facts import Facts
    from localsched.diagnostics.analysis.percall import library_only, loopless_user_code
    from localsched.diagnostics.analysis.usercode import has_loop, task_codes

    with performance_report(None) as report:
        da.ones((1000, 1000), chunks=50).sum().compute(scheduler=localsched.get)
    assert library_only(Facts(report.data), "sum-partial") == "dask"
    with performance_report(None) as report:
        db.from_sequence(range(1000), npartitions=8).map(lambda x: x % 7).sum().compute(
            scheduler=localsched.get)
    run = report.data
    mapped = {key_split(r.key) for r in run.tasks if "lambda" in key_split(r.key)}
    assert mapped and all(library_only(Facts(run), g) is None for g in mapped), mapped
    # (and the bag's map hands the lambda to a loop over the items: that loop
    # is the one to move, whatever the lambda holds)
    assert all(loopless_user_code(Facts(run), g) is None for g in mapped), mapped
    # (map_overlap's blocks: the user's lambda found inside dask's fused task
    # objects, with no loop -- a GIL fix says more data a task, not a rewrite)
    with performance_report(None) as report:
        x = da.ones((400, 400), chunks=100)
        x.map_overlap(lambda b: b * 2 - 1, depth=1, boundary="reflect").sum().compute(
            scheduler=localsched.get)
    codes = [c for r in report.data.tasks if key_split(r.key) == "getitem-overlap-sum"
             for c in task_codes(r.task) or () if c.co_name == "<lambda>"]
    assert codes and codes[0].co_filename == __file__ and not has_loop(codes[0])
