"""The cluster tier (localsched.distributed) on real dask.distributed
clusters: the shared LocalCluster of conftest (cluster_client) and real
``dask scheduler`` + ``dask worker`` subprocesses on 127.0.0.1 with
ephemeral ports, killed as process groups when a test ends.

The callback contract itself runs in tests/test_contract.py (parametrized
with "distributed" and "dask-worker").
"""

from __future__ import annotations

import signal
import threading
import time
from operator import add

import psutil
import pytest

distributed = pytest.importorskip("distributed")

import localsched  # noqa: E402
import localsched.distributed as ld  # noqa: E402
from localsched.callbacks import Callback  # noqa: E402
from localsched.diagnostics import CacheProfiler, Profiler, ProgressBar  # noqa: E402
from tests.support.platform_marks import needs_posix_signals  # noqa: E402


def inc(x):
    return x + 1


def slow_inc(x, seconds=0.1):
    time.sleep(seconds)
    return x + 1


def wait_for_event(name, timeout=30):
    return distributed.Event(name).wait(timeout)


# -- the shared LocalCluster ---------------------------------------------------

@pytest.mark.cluster
def test_profiler_times_are_the_task_streams(cluster_client):
    """The Profiler's start/end are dask.distributed's own startstops."""
    dsk = {("x", i): (inc, i) for i in range(200)}
    dsk["total"] = (sum, list(dsk))
    with distributed.get_task_stream(client=cluster_client) as ts, Profiler() as prof:
        assert ld.get(dsk, "total", client=cluster_client) == sum(range(1, 201))
    theirs = {}
    for rec in ts.data:
        for ss in rec["startstops"]:
            if ss["action"] == "compute":
                theirs[rec["key"]] = (ss["start"], ss["stop"])
    ours = {r.key: (r.start_time, r.end_time) for r in prof.results}
    assert set(ours) == set(dsk)
    for key, (start, end) in ours.items():
        assert abs(start - theirs[key][0]) <= 1e-3 and abs(end - theirs[key][1]) <= 1e-3
    workers = set(cluster_client.scheduler_info()["workers"])
    assert {r.worker_id.rsplit("#", 1)[0] for r in prof.results} <= workers


@pytest.mark.cluster
def test_hooks_fire_in_the_callers_thread_and_state_follows_the_cluster(cluster_client):
    threads = set()
    seen = {}

    class Watch(Callback):
        def _start(self, dsk):
            threads.add(threading.get_ident())

        def _pretask(self, key, dsk, state):
            threads.add(threading.get_ident())
            assert key in state["running"]

        def _posttask(self, key, result, dsk, state, worker_id):
            threads.add(threading.get_ident())
            seen[key] = (result, state.timing, state.task.nbytes, list(state.task.activities or ()))

        def _finish(self, dsk, state, errored):
            threads.add(threading.get_ident())
            seen["finished"] = (set(state.finished), state.ntasks, errored, state.incomplete)

    dsk = {"a": (slow_inc, 1, 0.05), "b": (inc, "a")}
    with Watch():
        assert ld.get(dsk, "b", client=cluster_client) == 3
    assert threads == {threading.get_ident()}
    result, (start, end), nbytes, activities = seen["b"]
    assert result is None  # results stay on the workers
    assert start <= end and nbytes > 0
    assert all(name != "compute" and a <= b for name, a, b in activities)
    assert seen["a"][1][1] - seen["a"][1][0] >= 0.04
    assert seen["finished"] == ({"a", "b"}, 2, False, False)


@pytest.mark.cluster
def test_dask_users_compute_is_recorded_with_a_default_client(cluster_client):
    """dask sends x.compute() to the default Client; with localsched's
    diagnostics entered, the run goes through localsched.distributed.get."""
    import io

    import dask
    import dask.array as da

    x = da.ones((40, 40), chunks=10)
    out = io.StringIO()
    # What a Client made as the default sets (Client(set_as_default=True)).
    with dask.config.set(scheduler="dask.distributed"), cluster_client.as_current():
        with Profiler() as prof, CacheProfiler(metric="nbytes") as cprof, ProgressBar(out=out):
            assert x.sum().compute() == 1600
        # 16 chunks of ones, their sums and the aggregation (as optimized)
        assert len({r.key for r in prof.results}) >= 17
        assert all(r.metric > 0 for r in cprof.results)
        assert "100% Completed" in out.getvalue()
        # Outside the block, dask's own path is untouched.
        assert x.sum().compute() == 1600
    from dask.base import named_schedulers
    assert "dask.distributed" not in named_schedulers


@pytest.mark.cluster
def test_scheduler_name_and_dask_compute_with_our_get(cluster_client):
    import dask

    x = localsched.delayed(inc)(1)
    with cluster_client.as_current():
        assert localsched.compute(x, scheduler="distributed") == (2,)
    d = dask.delayed(add)(dask.delayed(inc)(1), 10)
    with Profiler() as prof:
        assert dask.compute(d, scheduler=lambda dsk, keys, **kw: ld.get(
            dsk, keys, client=cluster_client, **kw)) == (12,)
    assert len(prof.results) == 2


@pytest.mark.cluster
def test_a_failing_task_raises_its_exception_naming_the_task(cluster_client):
    from localsched.diagnostics import Profiler

    def fail(x):
        raise ZeroDivisionError(f"no {x}")

    dsk = {"a": 1, "bad": (fail, "a"), "c": (inc, "bad")}
    with Profiler() as prof:
        with pytest.raises(ZeroDivisionError, match="no 1") as info:
            ld.get(dsk, "c", client=cluster_client)
    assert "while computing task 'bad'" in info.value.__notes__
    assert [(r.key, r.exc_type) for r in prof.failed] == [("bad", "ZeroDivisionError")]
    assert ld.get({"a": 1, "b": (inc, "a")}, "b", client=cluster_client) == 2


@needs_posix_signals
@pytest.mark.cluster
def test_ctrl_c_returns_at_once_and_cancels_the_runs_futures(cluster_client):
    started = threading.Event()
    main = threading.get_ident()
    rec = []

    sent = []

    def interrupter():
        started.wait(30)
        sent.append(time.monotonic())
        signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=interrupter)
    t.start()
    cb = Callback(pretask=lambda key, dsk, state: started.set(),
                  finish=lambda dsk, state, errored: rec.append(
                      (errored, dict(state.running_since))))
    try:
        with pytest.raises(KeyboardInterrupt):
            ld.get({"long": (wait_for_event, "test-ctrl-c", 60)}, "long",
                   client=cluster_client, callbacks=[cb])
        stopped = time.monotonic()
    finally:
        t.join()
    # Control came back at Ctrl-C, not at the task's end 60 s later (how soon
    # after the signal is the machine's load: typically well under a second).
    assert stopped - sent[0] < 10
    assert rec and rec[0][0] is True and "long" in rec[0][1]
    left = cluster_client.run_on_scheduler(
        lambda dask_scheduler: [k for k in dask_scheduler.tasks if k == "long"])
    distributed.Event("test-ctrl-c", client=cluster_client).set()
    assert left == []  # the run's futures were cancelled on the cluster
    assert ld.get({"x": (inc, 1)}, "x", client=cluster_client) == 2


# -- real dask scheduler and workers -----------------------------------------------


def test_subprocess_cluster_by_address(subprocess_cluster_client):
    address = subprocess_cluster_client.scheduler.address
    try:
        with Profiler() as prof:
            assert ld.get({"a": 1, "b": (inc, "a")}, ["b"], address=address) == (2,)
        assert [r.key for r in prof.results] == ["b"]
    finally:
        ld.shutdown()


#: A test run that starts a cluster of real dask processes, says their pids
#: and waits to be killed.
CLUSTER_OWNER = """
import pathlib, sys, time
from tests.support.cluster_procs import SubprocessCluster
cluster = SubprocessCluster(pathlib.Path(sys.argv[1]))
print(" ".join(str(p) for p in sorted(cluster.pids())), flush=True)
time.sleep(600)
"""


@needs_posix_signals
def test_a_killed_test_run_leaves_no_dask_process_behind(tmp_path):
    # (a CI job's timeout or a SIGKILL of pytest runs no finalizer: the
    # cluster's processes, in sessions of their own, outlived it before
    # their lifelines)
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    owner = subprocess.Popen([sys.executable, "-c", CLUSTER_OWNER, str(tmp_path)],
                             stdout=subprocess.PIPE, text=True, cwd=root,
                             env=dict(os.environ, PYTHONPATH=root))
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()  # (the event: the cluster is up)
        pids = [int(x) for x in line.split()]
        assert len(pids) >= 6, line  # (3 lifelines, a scheduler, 2 workers)
        procs = [psutil.Process(pid) for pid in pids]
        owner.kill()
        owner.wait(30)
        _, alive = psutil.wait_procs(procs, timeout=60)
        assert alive == [], alive
    finally:
        owner.kill()
        owner.wait(30)
        if owner.stdout is not None:
            owner.stdout.close()
        for pid in pids if "pids" in locals() else []:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def test_a_killed_worker_gives_retried_tasks_and_a_correct_result(subprocess_cluster_client):
    client = subprocess_cluster_client
    cluster = client.cluster_procs
    pids = cluster.worker_pids()
    done = []
    killed = []

    def posttask(key, result, dsk, state, worker_id):
        done.append((key, state.worker))
        # Kill the worker that just ran a leaf, once a few leaves are done:
        # the leaves it holds are lost and must run again.
        if len(done) == 6 and not killed:
            killed.append(state.worker)
            psutil.Process(pids[state.worker]).kill()  # (SIGKILL; TerminateProcess on Windows)

    dsk = {("leaf", i): (slow_inc, i, 0.05) for i in range(24)}
    dsk["total"] = (sum, list(dsk))
    try:
        with Profiler() as prof:
            assert ld.get(dsk, "total", client=client,
                          callbacks=[Callback(posttask=posttask), prof]) == sum(range(1, 25))
    finally:
        cluster.restore_workers()  # (the shared cluster, for the next tests)
    keys = [r.key for r in prof.results]
    retried = {k for k in keys if keys.count(k) > 1}
    lost_on_killed = {k for k, w in done[:6] if w == killed[0]}
    assert retried >= lost_on_killed and retried
    # The attempts cut short by the kill (if the worker was running one)
    # show as interrupted on the killed worker, and ran again elsewhere.
    for r in prof.interrupted:
        assert r.worker_id == f"{killed[0]}#?" and r.stop_time >= r.start_time
        assert r.key in {t.key for t in prof.results}
    # both attempts, on different workers
    for k in retried:
        workers = {r.worker_id.rsplit("#", 1)[0] for r in prof.results if r.key == k}
        assert len(workers) == 2


def spin(x, seconds=0.3):
    """Busy until this thread has used ``seconds`` of CPU (however loaded
    the machine: a wall-clock loop got 0.02 s of CPU at load 8)."""
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass
    return x


def make_bytes(i, n=200_000):
    return bytes(n)


def total_len(*parts):
    return sum(len(p) for p in parts)


@pytest.mark.cluster
def test_worker_tier_detail_metrics_samples_transfers(cluster_client):
    from localsched.distributed import WorkerTier

    workers = sorted(cluster_client.scheduler_info()["workers"])
    # inputs pinned to both workers, so the last task must fetch one from a peer
    dsk = {("blob", 0): (make_bytes, 0), ("blob", 1): (make_bytes, 1),
           "spun": (spin, 1, 1.2), "joined": (total_len, ("blob", 0), ("blob", 1))}
    with WorkerTier() as tier:
        ld.get({k: v for k, v in dsk.items() if k[0] == "blob"}, [("blob", 0)],
               client=cluster_client, workers=[workers[0]])
        assert ld.get(dsk, ["spun", "joined"], client=cluster_client) == (1, 400_000)
    assert not tier.errors
    acts = {a.activity for a in tier.activities}
    assert "compute" in acts
    groups = {g for (_, g, a, u) in tier.metrics}
    assert "spun" in groups  # (groups are key prefixes, as dask names them)
    wall = sum(v for (_, g, a, u), v in tier.metrics.items()
               if g == "spun" and a in ("thread-cpu", "thread-noncpu") and u == "seconds")
    cpu = sum(v for (_, g, a, u), v in tier.metrics.items()
              if g == "spun" and a == "thread-cpu" and u == "seconds")
    assert 1.1 < cpu < 1.5 and wall >= cpu  # 1.2 s of CPU, as the worker measured it
    assert any(s.group == "spun" and any(f[2] == "spin" for f in s.stack) for s in tier.samples)
    # every worker's CPU and memory (its own monitor samples every 0.5 s)
    assert {w for _, w, _, _ in tier.worker_resources} <= set(workers)
    assert tier.worker_resources and all(m > 10 for _, _, m, _ in tier.worker_resources)
    assert tier.resources and tier.resources[0].mem > 10
    if "transfer" in acts:  # the scheduler placed the join away from one blob
        assert sum(tier.transfers.values()) >= 200_000


@pytest.mark.cluster
def test_fine_metrics_samples_and_the_performance_report_from_a_cluster_run(
        cluster_client, tmp_path):
    from localsched.diagnostics import FineMetrics, SampleProfiler

    dsk = {("spun", i): (spin, i, 0.3) for i in range(2)}
    dsk["both"] = (add, ("spun", 0), ("spun", 1))
    with FineMetrics() as fm, SampleProfiler() as sp:
        assert ld.get(dsk, "both", client=cluster_client) == 1
    m = fm.metrics
    cpu = m.get(((), "spun", "thread-cpu", "seconds"), 0)
    wall = cpu + m.get(((), "spun", "thread-noncpu", "seconds"), 0)
    # two busy loops of 0.3 s of CPU each, as the workers measured them
    assert 0.55 < cpu < 0.8 and wall >= cpu
    assert any(s.group == "spun" and any(f[2] == "spin" for f in s.stack)
               for s in sp.results), sp.results[:5]

    out = tmp_path / "report.html"
    with localsched.performance_report(str(out)) as report:
        assert ld.get(dsk, "both", client=cluster_client) == 1
    data = report.data
    assert {t.key for t in data.tasks} == set(dsk)
    assert any(g == "spun" and a == "thread-cpu" for (_, g, a, _u) in data.metrics)
    assert out.stat().st_size > 10_000


def test_resource_profiler_reports_every_worker(cluster_client):
    from localsched.diagnostics import ResourceProfiler, WorkerResourceData

    workers = set(cluster_client.scheduler_info()["workers"])
    with ResourceProfiler(dt=0.1) as rprof:
        assert ld.get({("s", i): (spin, i, 0.6) for i in range(2)}, [("s", 0), ("s", 1)],
                      client=cluster_client) == (0, 1)
    rows = rprof.per_worker
    assert rows and all(type(r) is WorkerResourceData for r in rows)
    assert {r.worker_id for r in rows} == workers  # each worker's own monitor
    assert all(r.mem > 10 and r.cpu >= 0 for r in rows)
    # A LocalCluster's workers run on this machine, as this process's
    # children (or threads): the summed samples are the process tree's own.
    times = [r.time for r in rprof.results]
    assert len(times) >= 2 and times == sorted(times)


def test_resource_profiler_sums_a_remote_clusters_workers():
    """Workers on other hosts (none can run here): their samples, as a
    cluster run's state hands them over, join ``results`` summed per 0.5 s
    step, since this process tree's samples do not count them."""
    from localsched.diagnostics import ResourceProfiler

    rprof = ResourceProfiler(dt=10)
    t0 = 1000.0
    rows = [(t0 + 1.0, "tcp://10.0.0.5:1", 200.0, 50.0),
            (t0 + 1.5, "tcp://10.0.0.5:1", 210.0, 100.0),
            (t0 + 1.0, "tcp://10.0.0.6:1", 100.0, 25.0)]
    rprof.add_worker_samples(rows, remote=True)
    assert len(rprof.per_worker) == 3
    summed = [(r.time, round(r.mem), r.cpu) for r in rprof.results]
    assert summed == [(t0 + 1.0, 300, 75.0), (t0 + 1.5, 210, 100.0)]
    local = ResourceProfiler(dt=10)
    local.add_worker_samples(rows, remote=False)  # (counted by the process tree already)
    assert len(local.per_worker) == 3 and local.results == []


def spin_wall(x, seconds=1.0):
    """Busy for ``seconds`` of wall time (what a sample stands for)."""
    t = time.time()
    while time.time() - t < seconds:
        pass
    return x


def test_cluster_worker_seconds_are_booked_once(cluster_client):
    """Issue 20 item 1 on a cluster: dask.distributed's execute metrics plus
    the worker threads' idle time sum to wall x worker threads (2 %), the
    wall being the window the run declares, inside its start and finish."""
    from localsched.diagnostics import FineMetrics

    hooks = {}
    watch = Callback(start=lambda dsk: hooks.setdefault("start", time.time()),
                     finish=lambda dsk, state, errored: hooks.update(
                         finish=time.time(), extra=dict(state.outcome.extra)))
    # three CPU loops on two threads, then a join: a thread idles in the tail
    dsk = {("spun", i): (spin, i, 0.3) for i in range(3)}
    dsk["both"] = (sum, list(dsk))
    # A computation just before, unobserved: its metrics may still sit in the
    # workers, unreported to the scheduler; they are not this run's.
    earlier = {("earlier", i): (spin, i, 0.3) for i in range(2)}
    assert list(cluster_client.get(earlier, list(earlier))) == [0, 1]
    with FineMetrics() as fm:
        assert ld.get(dsk, "both", client=cluster_client, callbacks=[watch, fm]) == 3
    t0, t1 = hooks["extra"]["window"]
    threads = hooks["extra"]["workers"]
    assert threads == 2
    assert hooks["start"] <= t0 < t1 <= hooks["finish"]
    by_activity = fm.by("activity")
    wall = (t1 - t0) * threads
    assert abs(sum(by_activity.values()) - wall) <= 0.02 * wall, (by_activity, wall)
    assert by_activity["idle"] > 0
    cpu = fm.by("group", "activity")[("spun", "thread-cpu")]
    assert 0.8 < cpu < 1.2  # the three loops' CPU, as the workers measured it
    # the workers' event loops' transfers run beside the threads: their own unit
    assert all(not a.startswith("gather-dep") for a in by_activity)


def test_cluster_samples_stand_for_the_time_they_cover(cluster_client):
    """Issue 20 item 2 on a cluster: a 1.0 s spin reads 1.0 s (10 %) in
    seconds, however often distributed's sampler got the GIL."""
    from localsched.diagnostics import SampleProfiler

    with SampleProfiler() as sp:
        assert ld.get({"walled": (spin_wall, 1, 1.0)}, "walled", client=cluster_client) == 1
    seconds = sp.totals(by="group", unit="seconds")
    assert abs(seconds["walled"] - 1.0) <= 0.1, seconds
    spun = [s for s in sp.results if s.group == "walled"]
    assert any(f[2] == "spin_wall" for s in spun for f in s.stack), \
        (len(spun), {tuple(f[2] for f in s.stack[-3:]) for s in spun})
