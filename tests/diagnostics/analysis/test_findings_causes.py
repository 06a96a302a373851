"""Findings from causes, not symptoms (issue #36), on records made by hand:
each rule's cause and the fix it writes, for runs whose cause is known.

The real workloads -- sleeping I/O, a cold pool, stragglers first and
last, beside CPU hogs -- are in ``test_findings_applied.py``, which applies
each fix and measures the gain."""

from __future__ import annotations

import pytest

from localsched.diagnostics.analysis import replay, rules
from localsched.diagnostics.analysis.facts import Facts
from localsched.diagnostics.collectors.records import CacheData, GraphData, SampleData, TaskData
from localsched.diagnostics.runs.rundata import RunData


def kinds(run) -> dict:
    return {f.kind: f for f in run.findings()}


def independent(tasks, workers=2, **meta):
    keys = [t.key for t in tasks]
    lo = min(t.start_time for t in tasks)
    hi = max(t.end_time for t in tasks)
    graph = GraphData(keys, [()] * len(keys), list(range(len(keys))), lo, hi, workers)
    return RunData(tasks=tasks, graphs=[graph], walls=[(lo, hi)], meta=dict(meta))


def on_two_workers(durations, group="part"):
    """Tasks run in the given order on 2 workers, each taking the next one
    when free (as localsched does)."""
    free = [0.0, 0.0]
    tasks = []
    for i, d in enumerate(durations):
        w = min(range(2), key=free.__getitem__)
        tasks.append(TaskData((group, i), None, free[w], free[w] + d, w))
        free[w] += d
    return independent(tasks)


# -- straggler: the seconds the run would have saved ---------------------------------

def test_a_straggler_that_ran_first_while_the_rest_filled_the_other_worker_is_no_finding():
    # 0.6 s of one task first, 20 x 0.03 s beside it: an even split gains nothing
    run = on_two_workers([0.6] + [0.03] * 20)
    assert "straggler" not in kinds(run)


def test_a_straggler_that_ran_last_is_what_an_even_split_would_save():
    run = on_two_workers([0.03] * 20 + [0.6])
    found = kinds(run)["straggler"]
    # recorded 0.3 + 0.6 = 0.9 s; 1.2 s of work evenly on 2 workers: 0.6 s
    assert found.seconds == pytest.approx(0.3, abs=0.02)
    assert "('part', 20)" in found.title


# -- the machine was busy ------------------------------------------------------------

def load(others, own=1.0, cores=2, seconds=1.0, native=0.0):
    """The ``load`` a recording measured: CPU seconds of the machine, of
    this process (and its workers), of its threads Python did not start
    (BLAS's), over ``seconds``."""
    return {"cores": cores, "seconds": seconds, "machine_cpu": others + own, "own_cpu": own,
            "native_cpu": native}


def straggling_gil_run(**meta):
    # 4 tasks of Python code, 2 at a time; then 20 parts, the last one slow
    tasks = [TaskData(("py", i), None, i // 2, i // 2 + 1.0, i % 2) for i in range(4)]
    tasks += [TaskData(("part", i), None, 2.0 + 0.1 * (i // 2), 2.1 + 0.1 * (i // 2), i % 2)
              for i in range(19)]
    tasks.append(TaskData(("part", 19), None, 3.0, 3.9, 1))
    samples = [SampleData(i * 0.02, i % 2, "py", (("f.py", 1, "loop"),), 0.03)
               for i in range(100)]
    run = independent(tasks, workers=2, sample_interval=0.01, **meta)
    run.samples = samples
    return run


def test_a_busy_machine_is_a_finding_and_holds_back_what_load_falsifies():
    quiet = kinds(straggling_gil_run(load=load(others=0.1)))
    assert {"gil", "straggler"} <= set(quiet) and "busy" not in quiet
    busy = kinds(straggling_gil_run(load=load(others=1.5)))
    assert "busy" in busy and not {"gil", "straggler", "overhead"} & set(busy)
    f = busy["busy"]
    assert "other processes" in f.title and "75%" in f.title
    assert "gil" in f.fix and "straggler" in f.fix  # (the user is told what was held back)


def test_a_run_saved_without_the_load_is_judged_as_before():
    assert "busy" not in kinds(straggling_gil_run())


def cold_pool_run(others, cpu_wait, steal=None):
    """A cold process pool's first run as a quiet 2-core machine measured it
    (issue #36): its parent and 2 workers starting (importing NumPy) waited
    408 ms for a CPU, 22 % of the workers' time, for each other."""
    tasks = [TaskData(("use", i), None, 0.5 + 0.05 * i, 0.54 + 0.05 * i, 100 + i % 2)
             for i in range(6)]
    meta = load(others=others, own=1.3, seconds=0.93)
    meta["cpu_wait"] = cpu_wait
    if steal is not None:
        meta["steal"] = steal
        meta["machine_cpu"] += steal
    return independent(tasks, scheduler="processes", load=meta)


def test_a_runs_own_processes_waiting_for_each_other_are_no_busy_machine():
    # (other processes took 0.1 CPU-second: at each moment they held k cores,
    # they kept at most k more of the run's threads waiting, so at most 0.1 s
    # of the 408 ms was theirs -- the rest the run's own processes contending)
    assert "busy" not in kinds(cold_pool_run(others=0.1, cpu_wait=0.408))
    # (other processes that took enough to make those waits: busy, in bursts)
    found = kinds(cold_pool_run(others=0.42, cpu_wait=0.408))
    assert "busy" in found and "other processes" in found["busy"].title


def test_the_hypervisors_steal_is_no_other_process():
    # (a VM's first touch of fresh memory -- a cold pool's shared memory --
    # is the host's work on this machine's behalf, counted as steal: other
    # processes took nothing)
    run = cold_pool_run(others=0.02, cpu_wait=0.0, steal=0.6)
    assert "busy" not in kinds(run)
    assert "busy" in kinds(cold_pool_run(others=0.62, cpu_wait=0.0))


# -- GIL: localsched's own processes, with their cost --------------------------------

def gil_run(sizes_mb=None):
    run = straggling_gil_run(load=load(others=0.0))
    if sizes_mb is not None:
        run.cache = [CacheData(("py", i), None, sizes_mb * 1e6, 1.0, 2.0) for i in range(4)]
        run.cache_metric = "bytes"
    return run


def test_the_gil_fix_names_localscheds_process_scheduler_never_dasks():
    f = kinds(gil_run())["gil"]
    assert "scheduler=localsched.multiprocessing.get" in f.fix
    assert "'processes'" not in f.fix


def test_the_gil_fix_weighs_the_bytes_that_would_cross():
    light = kinds(gil_run(sizes_mb=0.01))["gil"]
    assert "localsched.multiprocessing.get" in light.fix
    heavy = kinds(gil_run(sizes_mb=400))["gil"]
    assert "1,600 MB" in heavy.fix and "localsched.multiprocessing.get" not in heavy.fix


def test_findings_name_the_users_function_and_line_from_the_stacks():
    run = gil_run()
    lib = "/usr/lib/python3.11/site-packages/pandas/core/frame.py"
    run.samples = [SampleData(i * 0.02, i % 2, "py",
                              (("/home/me/my_script.py", 12, "udf_score"), (lib, 40, "apply")),
                              0.03) for i in range(100)]
    f = kinds(run)["gil"]
    assert "udf_score (my_script.py:12)" in f.title


# -- ranking: wall seconds the run would save ----------------------------------------

def test_findings_are_ranked_by_wall_seconds_saved():
    f = kinds(gil_run())["gil"]
    # 4 tasks of 1 s, 2 at a time on 2 workers, no fine metrics: the time
    # beyond one task at a time is 2 worker-seconds, 1 s of wall
    assert f.seconds == pytest.approx(1.0)


# -- overhead: a chunk fix never exceeds the array -----------------------------------

def test_the_chunk_fix_never_exceeds_the_array_and_says_both_sizes():
    tasks, t = [], 0.0
    for i in range(50):
        tasks.append(TaskData(("mean_chunk", i), None, t, t + 0.001, 1))
        t += 0.003
    run = independent(tasks, workers=1)
    run.cache = [CacheData(("mean_chunk", i), None, 1e6, 0.0, 1.0) for i in range(50)]
    run.cache_metric = "bytes"
    f = kinds(run)["overhead"]
    assert "50 MB" in f.fix and "1.0 MB" in f.fix  # (the array: 50 chunks of 1 MB)
    assert "100 MB" not in f.fix


def chunked_pipeline(chunks, chunk_seconds, pieces=60, piece=50e-6, gap=500e-6):
    """An array pipeline on 2 workers as xarray's groupby makes one: each of
    ``chunks`` source chunks (a task of ``chunk_seconds``), then ``pieces``
    tiny tasks that split and reorder it (a shuffle, getitems), each after
    a hand-off of ``gap`` -- as measured on a loaded machine (gaps of
    0.1-6 ms between 45 us tasks)."""
    tasks, deps = [], []
    free = [0.0, 0.0]
    for c in range(chunks):
        w = c % 2
        t = free[w]
        tasks.append(TaskData(("random_sample", c), None, t, t + chunk_seconds, w))
        root = len(deps)
        deps.append(())
        t += chunk_seconds
        for j in range(pieces):
            t += gap
            tasks.append(TaskData(("shuffle-split", c, j), None, t, t + piece, w))
            deps.append((root,))
            t += piece
        free[w] = t + gap
    keys = [r.key for r in tasks]
    hi = max(free)
    graph = GraphData(keys, deps, list(range(len(keys))), 0.0, hi, 2)
    run = RunData(tasks=tasks, graphs=[graph], walls=[(0.0, hi)])
    run.cache = [CacheData(k, None, 96e3 if k[0] == "shuffle-split" else 5.3e6, 0.0, hi)
                 for k in keys]
    run.cache_metric = "bytes"
    return run


def test_tiny_tasks_split_from_two_chunks_a_worker_are_no_overhead_finding():
    # (a whole-suite run found "852 tasks, median 68.9 us in 'shuffle-split'"
    # on xarray's groupby of 4 chunks of 5 MB on 2 workers, and said "chunks
    # of about 23 MB (the whole: 23 MB)": the one fix that serialises the run)
    run = chunked_pipeline(chunks=4, chunk_seconds=0.020)
    assert "overhead" not in kinds(run), [str(f) for f in run.findings()]


def test_tiny_tasks_from_many_tiny_chunks_are_an_overhead_finding_that_keeps_chunks():
    run = chunked_pipeline(chunks=200, chunk_seconds=0.0005, pieces=2)
    f = kinds(run)["overhead"]
    # (200 chunks on 2 workers: bigger chunks, but at least 2 a worker)
    assert "about 50x more work" in f.fix, f.fix
    # (what 50x fewer hand-offs save, over the 2 workers: not all of them)
    gaps = sum(handoffs for handoffs, _, _ in Facts(run).overheads)
    assert f.seconds <= gaps * (1 - 1 / 50) / 2 + 1e-9


# -- idle: the caller's graph building, and sleeping I/O -----------------------------

def caller_run(computations, stacks=None):
    tasks, graphs, walls = [], [], []
    t = 0.5
    for j in range(computations):
        tasks.append(TaskData(("a", j), None, t, t + 0.2, 1))
        graphs.append(GraphData([("a", j)], [()], [0], t, t + 0.2, 1, None, None,
                                None if stacks is None else stacks[j]))
        walls.append((t, t + 0.2))
        t += 0.7
    return RunData(tasks=tasks, graphs=graphs, walls=walls,
                   meta={"started": 0.0, "finished": t})


def test_one_computation_is_never_told_to_compute_once():
    f = kinds(caller_run(1)).get("idle")
    assert f is None or "compute it once" not in f.fix
    several = kinds(caller_run(3))["idle"]
    assert "dask.compute(a, b" in several.fix and "script's own" in several.fix


USER = ("/home/me/job.py", 12, "main")
ENTRY = ("/venv/lib/python3.11/site-packages/dask/base.py", 392, "compute")
SCHEDULE = ("/venv/lib/python3.11/site-packages/dask/base.py", 769, "compute")
#: dask's set_index lowering its expression inside the user's compute():
#: a computation of the divisions, started from deep inside the call
DIVISIONS = (USER, ENTRY, ("/venv/lib/python3.11/site-packages/dask/base.py", 766, "compute"),
             ("/venv/lib/python3.11/site-packages/dask/_expr.py", 440, "optimize"),
             ("/venv/lib/python3.11/site-packages/dask/dataframe/dask_expr/_shuffle.py", 1357,
              "_calculate_divisions"), SCHEDULE)


def test_a_computation_dask_started_inside_the_users_one_call_is_not_the_users_to_merge():
    # (one compute() of a set_index: dask computes the divisions first, then
    # the frame; the caller's time between them is dask building the graph)
    one_call = caller_run(2, stacks=[DIVISIONS, (USER, ENTRY, SCHEDULE)])
    assert Facts(one_call).asked == 1
    f = kinds(one_call).get("idle")
    assert f is None or "dask.compute(a, b" not in f.fix, f.fix
    # (the same line in a loop, computing twice at the same depth: two asked)
    loop = caller_run(2, stacks=[(USER, ENTRY, SCHEDULE)] * 2)
    assert Facts(loop).asked == 2 and "dask.compute(a, b" in kinds(loop)["idle"].fix
    # (two lines, each a set_index: two asked, their divisions not counted)
    other = (("/home/me/job.py", 13, "main"), *DIVISIONS[1:])
    two_lines = caller_run(4, stacks=[DIVISIONS, (USER, ENTRY, SCHEDULE), other,
                                      (other[0], ENTRY, SCHEDULE)])
    assert Facts(two_lines).asked == 2 and "idle" in kinds(two_lines)
    # (different entries on one line -- a method and dask.compute -- are both the user's)
    mixed = caller_run(2, stacks=[(USER, ENTRY, SCHEDULE), (USER, SCHEDULE)])
    assert Facts(mixed).asked == 2
    # (runs saved before stacks were kept: every computation the user's, as before)
    assert Facts(caller_run(2)).asked == 2


def io_run(workers=2, tasks=32, seconds=0.05):
    run = on_two_workers([seconds] * tasks, group="fetch")
    run.metrics = {("execute", "fetch", "thread-cpu", "seconds"): 0.01 * tasks * seconds,
                   ("execute", "fetch", "thread-noncpu", "seconds"): 0.99 * tasks * seconds}
    run.meta["load"] = load(others=0.0, own=0.02)
    return run


def test_sleeping_io_on_two_threads_says_how_many_threads():
    run = io_run()
    f = kinds(run)["idle"]
    assert "num_workers=" in f.fix
    n = int(f.fix.split("num_workers=")[1].split(")")[0].split(",")[0])
    assert n >= 8
    recorded = 16 * 0.05
    assert f.seconds == pytest.approx(recorded - replay.simulate(run, n), rel=0.05)


def test_cpu_bound_work_is_not_told_to_add_threads():
    run = io_run()
    run.metrics = {("execute", "fetch", "thread-cpu", "seconds"): 1.5,
                   ("execute", "fetch", "thread-noncpu", "seconds"): 0.1}
    f = kinds(run).get("idle")
    assert f is None or "num_workers" not in f.fix


# -- BLAS oversubscription -----------------------------------------------------------

def blas_run(blas_threads, workers=2, cores=2):
    tasks = [TaskData(("matmul", i), None, 0.0, 1.0, i % workers) for i in range(8)]
    run = independent(tasks, workers=workers)
    run.metrics = {("execute", "matmul", "thread-cpu", "seconds"): 2.0,
                   ("execute", "matmul", "thread-noncpu", "seconds"): 6.0}
    run.meta["blas"] = {"threads": blas_threads, "source": "threadpoolctl",
                        "libraries": ["openblas"]}
    # (the process's CPU: the tasks' threads' 2 s and BLAS's own threads' 4 s)
    run.meta["load"] = load(others=0.0, own=6.0, cores=cores, seconds=4.0, native=4.0)
    return run


def test_blas_threads_times_workers_beyond_the_cores_is_a_finding_with_its_fix():
    f = kinds(blas_run(blas_threads=2))["blas"]
    assert "openblas" in f.title and "2 threads" in f.title
    assert "threadpool_limits(1)" in f.fix and "before NumPy is imported" in f.fix
    assert f.groups == ["matmul"]
    assert "blas" not in kinds(blas_run(blas_threads=1))
    assert "blas" not in kinds(blas_run(blas_threads=2, workers=1))


def test_tasks_waiting_off_their_cpu_for_another_reason_are_no_blas_finding():
    # (BLAS's threads spent no CPU: the tasks waited for something else)
    run = blas_run(blas_threads=2)
    run.meta["load"] = load(others=0.0, own=2.0, cores=2, seconds=4.0)
    assert "blas" not in kinds(run)
    run.meta["load"] = load(others=6.0, own=2.0, cores=2, seconds=4.0)  # (busy)
    found = kinds(run)
    assert "blas" not in found and "busy" in found


def blas_process_run(environment, cores=2, own=6.0):
    """Process workers with the BLAS variables the user set (``environment``)."""
    tasks = [TaskData(("matmul", i), None, 0.0, 1.0, 100 + i % 2) for i in range(8)]
    run = independent(tasks, scheduler="processes")
    run.metrics = {("execute", "matmul", "thread-cpu", "seconds"): 2.0,
                   ("execute", "matmul", "thread-noncpu", "seconds"): 6.0}
    run.meta["blas"] = {"threads": 2, "source": "threadpoolctl", "libraries": ["openblas"],
                        "environment": environment}
    # (the process tree's CPU: the tasks' threads' 2 s and, in the workers,
    # BLAS's own threads' 4 s; none of this process's threads but Python's)
    run.meta["load"] = load(others=0.0, own=own, cores=cores, seconds=4.0, native=0.0)
    return run


def test_blas_threads_the_user_set_for_process_workers_beyond_the_cores_is_a_finding():
    # (localsched's process workers run BLAS on their share of the cores
    # unless the environment says how many: system.blas)
    f = kinds(blas_process_run({"OPENBLAS_NUM_THREADS": "2"}))["blas"]
    assert "OPENBLAS_NUM_THREADS=2" in f.title and "2 worker processes" in f.title
    assert "unset OPENBLAS_NUM_THREADS" in f.fix and "threadpool_limits" not in f.fix
    assert f.groups == ["matmul"] and f.seconds == pytest.approx(6.0 / 2 / 2)
    assert "blas" not in kinds(blas_process_run({}))  # (localsched's share: 1 thread each)
    assert "blas" not in kinds(blas_process_run({"OPENBLAS_NUM_THREADS": "1"}))
    assert "blas" not in kinds(blas_process_run({"OPENBLAS_NUM_THREADS": "2"}, cores=4))
    # (the workers spent no CPU outside their tasks' threads: no BLAS helpers worked)
    assert "blas" not in kinds(blas_process_run({"OPENBLAS_NUM_THREADS": "2"}, own=2.0))
    old = blas_process_run({"OPENBLAS_NUM_THREADS": "2"})
    del old.meta["blas"]["environment"]  # (a run saved before it was recorded)
    assert "blas" not in kinds(old)


# -- processes: start-up and imports are not transfer --------------------------------

def test_a_cold_pool_importing_is_start_up_never_transfer():
    tasks = [TaskData(("up", i), None, 1.0 + 0.01 * i, 1.01 + 0.01 * i, 100 + i % 2)
             for i in range(8)]
    run = independent(tasks, scheduler="processes")
    run.metrics = {(None, None, "start-up", "seconds"): 5.0,
                   ("execute", "up", "deserialize", "seconds"): 0.001,
                   ("execute", "up", "thread-cpu", "seconds"): 0.08}
    found = kinds(run)
    assert "transfer" not in found and "overhead" not in found
    f = found["start-up"]
    assert "import" in f.title and "pool" in f.fix


def test_the_rules_module_lists_its_kinds():
    assert {"busy", "blas", "start-up"} <= set(rules.KINDS)


def test_waiting_tasks_on_a_busy_machine_are_not_told_to_add_threads():
    # (where the waits for a CPU were not measured: they look like I/O)
    run = io_run()
    run.meta["load"] = load(others=1.5, own=0.02)
    found = kinds(run)
    assert "busy" in found and "idle" not in found


def test_sleeping_tasks_on_a_busy_machine_are_told_to_add_threads_where_waits_are_measured():
    # (the system says the run's threads waited 0.05 s for a CPU: the rest of
    # their 1.6 s off the CPU they slept -- more threads help, busy or not)
    run = io_run()
    run.meta["load"] = dict(load(others=1.5, own=0.02), cpu_wait=0.05)
    found = kinds(run)
    assert "busy" in found and "idle" in found and "num_workers=" in found["idle"].fix


@pytest.mark.parametrize("others", [0.0, 1.5])
def test_sleeping_tasks_beside_a_spinning_blas_pool_are_told_threads_not_blas(others):
    # (CI, after a test that ran NumPy: a BLAS pool's threads spent 0.06 s
    # of CPU while 1.6 s of sleeping tasks waited -- for nothing they did)
    run = io_run()
    run.meta["blas"] = {"threads": 2, "source": "threadpoolctl", "libraries": ["openblas"]}
    run.meta["load"] = dict(load(others=others, own=0.1, native=0.06), cpu_wait=0.05)
    found = kinds(run)
    assert "blas" not in found and "idle" in found, [str(f) for f in found.values()]


def test_tasks_waiting_for_a_busy_machines_cpus_are_not_told_to_add_threads():
    # (off the CPU 80 % of their time, all of it measured as waits for a CPU)
    run = io_run()
    run.metrics = {("execute", "fetch", "thread-cpu", "seconds"): 0.32,
                   ("execute", "fetch", "thread-noncpu", "seconds"): 1.28}
    run.meta["load"] = dict(load(others=1.5, own=0.34), cpu_wait=1.28)
    found = kinds(run)
    assert "busy" in found and "idle" not in found


def test_more_workers_than_cores_keeping_them_all_busy_is_a_busy_machine():
    run = straggling_gil_run(load=load(others=0.0, own=1.9, cores=2))
    assert "busy" not in kinds(run)  # (2 workers on 2 cores, busy: well shaped)
    run.graphs = [g._replace(workers=4) for g in run.graphs]
    found = kinds(run)
    assert "busy" in found and "4 workers" in found["busy"].title
    assert not {"gil", "straggler"} & set(found)


def test_a_comprehension_is_named_by_the_function_around_it():
    run = gil_run()
    run.samples = [SampleData(i * 0.02, i % 2, "py", (("/home/me/bag.py", 5, "parse"),
                                                      ("/home/me/bag.py", 6, "<listcomp>")),
                              0.03) for i in range(100)]
    assert "parse (bag.py:5)" in kinds(run)["gil"].title


def test_the_gil_claim_never_exceeds_what_processes_could_save_of_the_tasks_cpu():
    # 0.5 s of CPU in all the tasks, 3.5 s off it (a loaded machine the load
    # meter missed): processes could at best run that CPU 2 at a time
    run = gil_run()
    run.metrics = {("execute", "py", "thread-cpu", "seconds"): 0.5,
                   ("execute", "py", "thread-noncpu", "seconds"): 3.5}
    f = kinds(run)["gil"]
    assert f.seconds == pytest.approx(0.25)



# -- what a process pool would pickle: the graph's literal inputs --------------------

def test_a_graphs_literal_inputs_are_sized_deep_and_kept_in_the_saved_run(tmp_path):
    import localsched
    from localsched.diagnostics import load_json
    from localsched.diagnostics.report import performance_report

    dicts = [{"id": i, "tags": ["a", "b"]} for i in range(4000)]
    dsk = {"records": dicts, ("count", 0): (len, "records"), ("count", 1): (len, dicts)}
    with performance_report(None, samples=False) as report:
        localsched.get(dsk, [("count", 0), ("count", 1)])
    objects, size = report.data.graphs[0].inputs["count"]
    # (4,000 dicts of 2 keys and a list of 2: some 28,000 objects a task, read
    # as a data key or carried in its arguments; not the list's 32 kB shell)
    assert 20_000 <= objects <= 40_000 and size > 100_000
    report.data.save_json(tmp_path / "run.json")
    assert load_json(tmp_path / "run.json").graphs[0].inputs == {"count": [objects, size]}


@pytest.mark.parametrize("inputs", ["many", {"g": [1]}, {"g": [-1, 5]}, {"g": ["1", 5]}])
def test_a_saved_runs_malformed_graph_inputs_are_one_clear_error(tmp_path, inputs):
    import json

    from localsched.diagnostics import load_json

    run = independent([TaskData(("part", 0), None, 0.0, 1.0, 1)])
    run.save_json(tmp_path / "run.json")
    data = json.loads((tmp_path / "run.json").read_text())
    data["graphs"][0]["inputs"] = inputs
    (tmp_path / "run.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="inputs"):
        load_json(tmp_path / "run.json")
