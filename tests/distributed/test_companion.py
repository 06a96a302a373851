"""Companion mode observes dask.distributed and never changes what it does
(issue 18): the same results and dask.distributed's own errors with
localsched's callbacks registered or entered; one clock; rerun with
gathered inputs; the embedded cluster in a script without a guard."""

from __future__ import annotations

import contextlib
import glob
import io
import os
import signal
import subprocess
import sys
import threading
import time
from operator import add

import psutil
import pytest

distributed = pytest.importorskip("distributed")

import dask
import dask.array as da

import localsched.distributed as ld
from conftest import SCHEDULER_CLOCK_SHIFT
from localsched.callbacks import Callback
from localsched.diagnostics import Profiler, ProgressBar
from tests.support.platform_marks import needs_posix_signals

pytestmark = pytest.mark.cluster


def inc(x):
    return x + 1


def slow_inc(x, seconds=0.2):
    time.sleep(seconds)
    return x + 1


def wait_for_event(name, timeout=30):
    return distributed.Event(name).wait(timeout)


@pytest.fixture
def as_default(cluster_client):
    """The shared cluster's Client as a default Client sets itself."""
    with dask.config.set(scheduler="dask.distributed"), cluster_client.as_current():
        yield cluster_client


def _workloads(client):
    """What users do under a default Client, with its results."""
    z = client.persist(da.ones((100, 100), chunks=50))
    f = client.submit(inc, 1)
    d = dask.delayed(add)(f, 10)
    out = {
        "persisted": z.sum().compute(),
        "future input": d.compute(),
        "no optimize": dask.compute(z.sum(), d, optimize_graph=False),
        "client.compute": client.compute(z.sum()).result(),
        "submit/map/gather": client.gather(client.map(inc, range(5))),
        "annotations": None,
        "persist": float(dask.persist(z.sum())[0].compute()),
    }
    with dask.annotate(retries=2, priority=5):
        out["annotations"] = dask.delayed(inc)(41).compute()
    return out


def test_default_client_work_is_identical_under_a_profiler_and_a_registered_bar(as_default):
    expected = _workloads(as_default)
    # (both ways in at once: a callback entered, and one registered)
    with open(os.devnull, "w", encoding="utf-8") as devnull, Profiler() as prof:
        bar = ProgressBar(out=devnull)
        bar.register()
        try:
            assert _workloads(as_default) == expected
        finally:
            bar.unregister()
    # the callbacks saw the computations (the sums of the persisted chunks)
    assert any("sum" in str(r.key) for r in prof.results)
    from dask.base import named_schedulers
    assert "dask.distributed" not in named_schedulers


def _wait_until_forgotten(client, keys, timeout=30):
    def held(keys, dask_scheduler=None):
        return [k for k in keys if k in dask_scheduler.tasks]

    deadline = time.monotonic() + timeout
    while client.run_on_scheduler(held, list(keys)):
        assert time.monotonic() < deadline, "the cluster kept the outputs"
        time.sleep(0.01)


def test_p2p_shuffle_under_a_registered_bar_and_a_profiler(as_default):
    """A P2P shuffle (issue 18): the same frame with localsched listening."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")  # (P2P's wire format; in the test extras)
    dd = pytest.importorskip("dask.dataframe")
    df = dd.from_pandas(pd.DataFrame({"k": [i % 7 for i in range(200)], "v": range(200)}),
                        npartitions=4)
    with dask.config.set({"dataframe.shuffle.method": "p2p"}):
        shuffled = df.shuffle("k")
        expected = shuffled.compute().sort_values("v")
        # (dask.distributed's own Client.get releases its outputs two IO-loop
        # hops late: a next graph sent at once may find them still in memory
        # and run nothing, with or without localsched.  Wait for the release.)
        _wait_until_forgotten(as_default, shuffled.__dask_keys__())
        out = io.StringIO()
        bar = ProgressBar(out=out)
        bar.register()
        try:
            with Profiler() as prof:
                got = shuffled.compute().sort_values("v")
        finally:
            bar.unregister()
    pd.testing.assert_frame_equal(got, expected)
    # each output partition holds whole keys (the shuffle happened)
    parts = [set(p.k) for p in dask.compute(*shuffled.to_delayed())]
    assert sum(len(p) for p in parts) == 7
    keys = {str(r.key) for r in prof.results}
    assert any("shuffle" in k or "p2p" in k for k in keys), sorted(keys)[:10]
    assert "100% Completed" in out.getvalue()


def test_explicit_get_takes_futures_and_keys_held_on_the_cluster(cluster_client):
    f = cluster_client.submit(inc, 1)
    f.result()  # (in cluster memory: it does not run again)
    with Profiler() as prof:
        assert ld.get({"b": (add, f, 1)}, "b", client=cluster_client) == 3
        assert ld.get({"c": (add, f.key, 10)}, ["c"], client=cluster_client) == (12,)
    assert {r.key for r in prof.results} == {"b", "c"}
    with pytest.raises(KeyError, match="'nowhere'"):
        ld.get({"a": 1}, "nowhere", client=cluster_client)


def test_callbacks_py_imports_nothing_from_companion_mode():
    import ast

    import localsched.callbacks

    with open(localsched.callbacks.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert "distributed" not in (node.module or ""), ast.dump(node)
            assert all("distributed" not in a.name for a in node.names)
        elif isinstance(node, ast.Import):
            assert all("distributed" not in a.name for a in node.names)
    code = ("import sys, localsched;"
            "print(sorted(m for m in ('dask', 'distributed') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.stdout.strip() == "[]", out.stderr  # companion mode loads no dask


def test_the_diagnostics_import_nothing_from_companion_mode():
    """Imports point one way (function-level ones too): companion mode
    imports the diagnostics' records, never the reverse; a cluster run's
    state offers what a diagnostic asks of the cluster."""
    import ast
    import pathlib

    import localsched.diagnostics

    for path in pathlib.Path(localsched.diagnostics.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                assert "distributed" not in module, (path.name, module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith(("localsched.distributed", "distributed"))
                               for a in node.names), (path.name, ast.dump(node))


# -- failures from another thread -------------------------------------------------------


def _run_and_break(client, breaker, name):
    """A long task runs under ld.get; ``breaker(client)`` runs from another
    thread once it is dispatched.  Returns (exception, finish's errored).

    The task waits for an event nobody sets, longer than the test may run
    (its timeout): an error out of ``ld.get`` is the breaker's doing, and
    its promptness is bounded by the test's timeout, not by a clock the
    machine's load could stretch."""
    started = threading.Event()
    finished = []
    cb = Callback(pretask=lambda key, dsk, state: started.set(),
                  finish=lambda dsk, state, errored: finished.append(errored))

    def other():
        started.wait(30)
        breaker(client)

    t = threading.Thread(target=other)
    t.start()
    try:
        with pytest.raises(BaseException) as info:
            ld.get({"long": (wait_for_event, name, 600)}, "long", client=client,
                   callbacks=[cb])
    finally:
        t.join(30)
    return info.value, finished


def test_cancel_from_another_thread_gives_distributeds_error(cluster_client):
    from distributed.client import FutureCancelledError

    try:
        exc, finished = _run_and_break(
            cluster_client, lambda c: c.cancel([distributed.Future("long", c)], reason="enough"),
            "test-cancel")
    finally:  # (the shared cluster's worker still runs the task: end it)
        distributed.Event("test-cancel", client=cluster_client).set()
    assert isinstance(exc, FutureCancelledError) and "enough" in str(exc)
    assert finished == [True]
    assert ld.get({"x": (inc, 1)}, "x", client=cluster_client) == 2


def test_close_and_restart_from_another_thread(tmp_path):
    """On a cluster of its own, with nannies (a restarted LocalCluster's
    workers do not come back in distributed 2026.8)."""
    from tests.support.cluster_procs import SubprocessCluster

    cluster = SubprocessCluster(tmp_path, nanny=True)
    try:
        address = cluster.client.scheduler.address
        c1 = distributed.Client(address, set_as_default=False)
        exc, finished = _run_and_break(c1, lambda c: c.restart(wait_for_workers=False),
                                       "test-restart")
        assert isinstance(exc, (distributed.client.FutureCancelledError,
                                distributed.client.CancelledError)), repr(exc)
        assert finished == [True]
        c1.wait_for_workers(2, timeout=30)
        assert ld.get({"x": (inc, 1)}, "x", client=c1) == 2
        exc, finished = _run_and_break(c1, lambda c: c.close(), "test-close")
        assert not isinstance(exc, AttributeError), repr(exc)
        assert isinstance(exc, (distributed.client.FutureCancelledError,
                                distributed.client.CancelledError)), repr(exc)
        assert finished == [True]
        c2 = distributed.Client(address, set_as_default=False)
        assert ld.get({"x": (inc, 1)}, "x", client=c2) == 2
        c2.close()
    finally:
        cluster.close()


def test_all_workers_lost_follows_no_workers_timeout(subprocess_cluster_client):
    """The shared subprocess cluster's scheduler has no-workers-timeout 1s;
    the task kills each worker that runs it."""
    client = subprocess_cluster_client
    try:
        finished = []
        cb = Callback(finish=lambda dsk, state, errored: finished.append(errored))
        with pytest.raises(Exception) as info:  # (without the timeout: until the test's)
            ld.get({"a": 1, "boom": (os._exit, 1)}, "boom", client=client, callbacks=[cb])
        assert type(info.value).__module__.startswith("distributed"), repr(info.value)
        assert finished == [True]
    finally:
        client.cluster_procs.restore_workers()


# -- honest states ----------------------------------------------------------------


@needs_posix_signals
def test_interrupted_tells_running_from_queued(cluster_client):
    """Two workers of one thread each and six 3 s tasks, Ctrl-C once two
    run: those were executing; the others dispatched were queued."""
    import signal

    started = []
    main = threading.get_ident()

    def pretask(key, dsk, state):
        started.append(key)
        if len(started) == 2:
            threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT)).start()

    dsk = {("w", i): (slow_inc, i, 3.0) for i in range(6)}
    stops = []
    with Profiler() as prof, pytest.raises(KeyboardInterrupt):
        ld.get(dsk, list(dsk), client=cluster_client, callbacks=[Callback(
            pretask=pretask, finish=lambda dsk, state, errored: stops.append(
                (dict(state.running_since), dict(state.queued_since)))), prof])
    running, queued = stops[0]
    assert len(running) == 2  # one per worker thread
    assert {r.key for r in prof.interrupted} == set(running)
    assert all(not r.worker_id.endswith("#?") for r in prof.interrupted)
    assert not set(running) & set(queued) and set(queued) <= set(started)


# -- one clock ------------------------------------------------------------------------

def test_a_shifted_scheduler_clock_is_converted_to_the_callers(subprocess_cluster_client):
    """The shared subprocess cluster's scheduler clock runs 5 s ahead
    (conftest.SCHEDULER_CLOCK_SHIFT)."""
    client = subprocess_cluster_client
    before = time.time()  # really shifted (read at or after ``before``, on one machine):
    assert client.run_on_scheduler(time.time) - before >= SCHEDULER_CLOCK_SHIFT - 0.1
    dsk = {("s", i): (slow_inc, i, 0.2) for i in range(4)}
    dsk["total"] = (sum, list(dsk))
    with Profiler() as prof:
        t0 = time.time()
        assert ld.get(dsk, "total", client=client) == 10
        t1 = time.time()
    assert {r.key for r in prof.results} == set(dsk)
    # On the caller's clock: within the call, give or take the conversion's
    # error (a round trip's, seconds under load), which must stay under half
    # the shift for a missed conversion (SHIFT seconds off) to be told apart.
    slack = SCHEDULER_CLOCK_SHIFT / 2
    for r in prof.results:
        assert t0 - slack <= r.start_time <= r.end_time <= t1 + slack, (r, t0, t1)


# -- rerun_exceptions_locally --------------------------------------------------------------

RAN_HERE: list = []


def slow_input(i):
    RAN_HERE.append(("input", i))
    time.sleep(0.5)
    return i


def fails_on(*parts):
    RAN_HERE.append(("failing", len(parts)))
    raise ValueError(f"bad {sum(parts)}")


def test_rerun_gathers_the_inputs_and_runs_only_the_failed_task_here(cluster_client):
    RAN_HERE.clear()
    dsk = {("in", i): (slow_input, i) for i in range(4)}
    dsk["bad"] = (fails_on, *[("in", i) for i in range(4)])
    with pytest.raises(ValueError, match="bad 6") as info:
        ld.get(dsk, "bad", client=cluster_client, rerun_exceptions_locally=True)
    # the workers are other processes: only the failed task ran in this one
    assert RAN_HERE == [("failing", 4)]
    assert any(frame.name == "fails_on" for frame in
               __import__("traceback").extract_tb(info.value.__traceback__))


SEEN_BY_THE_RERUN: list = []


def test_rerun_runs_the_callers_own_task_on_the_gathered_inputs(cluster_client):
    # A function the cluster gets by value (defined in a function, as in a
    # script's or a notebook's __main__): the re-run is of the caller's own
    # function object, with its module's globals, not of the scheduler's
    # unpickled copy.
    import traceback

    def fails_here(x):
        SEEN_BY_THE_RERUN.append(x)
        raise ValueError(f"bad {x}")

    SEEN_BY_THE_RERUN.clear()
    dsk = {"in-0": (inc, 1), "bad": (fails_here, "in-0")}
    with pytest.raises(ValueError, match="bad 2") as info:
        ld.get(dsk, "bad", client=cluster_client, rerun_exceptions_locally=True)
    assert SEEN_BY_THE_RERUN == [2]  # (the workers are other processes)
    tb = info.value.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    (frame,) = [f for f in frames if f.f_code.co_name == "fails_here"]
    assert frame.f_code is fails_here.__code__ and frame.f_globals is globals()
    assert any(f.filename == __file__ and f.name == "fails_here"
               for f in traceback.extract_tb(info.value.__traceback__))


# -- the dashboard ---------------------------------------------------------------------


def test_the_summary_and_the_report_link_the_clusters_dashboard(cluster_client, tmp_path):
    import localsched

    link = cluster_client.dashboard_link
    assert link.startswith("http")
    out = tmp_path / "report.html"
    with Profiler() as prof, localsched.performance_report(str(out)):
        assert ld.get({"x": (inc, 1)}, "x", client=cluster_client) == 2
    assert prof.summary().dashboard == link and link in str(prof.summary())
    assert link in out.read_text(encoding="utf-8")


# -- a script without a guard ---------------------------------------------------------------

SCRIPT = """
import localsched.distributed as ld
from localsched.diagnostics import Profiler

def double(x):
    return 2 * x

with Profiler() as prof:
    print(ld.get({"a": 21, "b": (double, "a")}, "b"))
ld.default_client().restart()  # (the nannies restart their workers)
print(ld.get({"a": 4, "b": (double, "a")}, "b"))
print(sorted(r.key for r in prof.results))
"""

#: Restarts the embedded cluster's workers, computes again, says so, and
#: waits; on a Ctrl-C, computes again (on the same cluster?) and waits to be
#: killed.
KILLED_SCRIPT = """
import sys, time
import localsched.distributed as ld

def double(x):
    return 2 * x

print(ld.get({"a": 21, "b": (double, "a")}, "b"), flush=True)
ld.default_client().restart()
print(ld.get({"a": 4, "b": (double, "a")}, "b"), flush=True)
address = ld.default_client().scheduler.address
try:
    print("ready", flush=True)
    time.sleep(600)
except KeyboardInterrupt:
    print(ld.get({"a": 5, "b": (double, "a")}, "b"),
          ld.default_client().scheduler.address == address, flush=True)
print("ready", flush=True)
time.sleep(600)
"""


def _shm_entries() -> set:
    """What /dev/shm holds (POSIX semaphores and shared memory, on Linux)."""
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _unheld(names, run: str) -> set:
    """The /dev/shm entries among ``names`` that nobody else holds: a
    semaphore or segment another program on the machine (a parallel test
    run, another user) is using is mapped by its process, a store's lock
    file is locked (``flock``, listed in /proc/locks) by its owner, and a
    file named after its creator (``localsched-<pid>_...``) whose creator
    lives outside this run is that program's; a leaked one is held by
    nobody.  Entries that vanish meanwhile were somebody else's."""
    inodes = {}
    for name in names:
        try:
            inodes[os.stat(f"/dev/shm/{name}").st_ino] = name
        except FileNotFoundError:
            pass  # (gone again: somebody else's, and cleaned up)
    for maps in glob.glob("/proc/[0-9]*/maps"):
        try:
            with open(maps, encoding="utf-8") as f:
                for line in f:
                    fields = line.split(None, 5)
                    if len(fields) == 6 and fields[5].startswith("/dev/shm/"):
                        inodes.pop(int(fields[4]), None)
        except OSError:
            pass
    with contextlib.suppress(OSError), open("/proc/locks", encoding="utf-8") as f:
        for line in f:  # "1: FLOCK  ADVISORY  READ 24527 00:1b:95476 0 EOF"
            for field in line.split():
                if field.count(":") == 2 and field.rsplit(":", 1)[1].isdigit():
                    inodes.pop(int(field.rsplit(":", 1)[1]), None)
    ours = {p.pid for p in _started_by(run)}
    return {name for name in inodes.values() if not _made_by_another(name, ours)}


def _made_by_another(name: str, ours: set) -> bool:
    """True if ``name`` says it was made by a living process not in ``ours``."""
    head = name.split("_", 1)[0]
    if not head.startswith("localsched-") or not head[len("localsched-"):].isdigit():
        return False
    pid = int(head[len("localsched-"):])
    return pid not in ours and psutil.pid_exists(pid)


def _started_by(run: str) -> list:
    """The living processes of the script run ``run``: the script and every
    process it started, orphans included, wherever they are (they inherit
    its environment, which carries ``LOCALSCHED_TEST_RUN=run``)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if (p.environ().get("LOCALSCHED_TEST_RUN") == run
                    and p.status() != psutil.STATUS_ZOMBIE):
                out.append(p)
    return out


def _kill_all(run: str) -> None:
    """(After the assertions: never leave a failed run's processes behind.)"""
    for p in _started_by(run):
        with contextlib.suppress(psutil.Error):
            p.kill()


def _run_script(tmp_path, text):
    """The script's process (in a session and process group of its own),
    and the run's mark (see ``_started_by``)."""
    script = tmp_path / "no_guard.py"
    script.write_text(text, encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    run = str(tmp_path)
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"), LOCALSCHED_TEST_RUN=run,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (a user's default: bytecode files too)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
                            start_new_session=True)
    return proc, run


def _leftover_files(tmp_path, workers=True) -> list:
    """What the cluster left in its temporary directory (the scheduler file,
    worker directories), beyond dask's shared scratch directory and locks.
    ``workers=False``: the scheduler's and the cluster's own files only."""
    left = []
    for root, dirs, files in os.walk(tmp_path / "tmp"):
        rel = os.path.relpath(root, tmp_path / "tmp")
        left += [os.path.join(rel, f) for f in files if not f.endswith(".lock")]
        left += [os.path.join(rel, d) for d in dirs if d != "dask-scratch-space"]
        if not workers:
            break
    return left


def test_a_script_without_main_guard_uses_the_embedded_cluster(tmp_path):
    """The script restarts the embedded cluster's workers and ends without
    closing anything: its cluster goes with it, leaving no process, no
    semaphore in /dev/shm, no file, and nothing on stderr but warnings."""
    shm_before = _shm_entries()
    proc, run = _run_script(tmp_path, SCRIPT)
    try:
        stdout, stderr = proc.communicate(timeout=120)
        left_running = _started_by(run)
        leaked = _unheld(_shm_entries() - shm_before, run)
        assert proc.returncode == 0, stderr[-3000:]
        assert stdout.split()[:2] == ["42", "8"] and "'b'" in stdout, stdout
        assert not left_running, [p.info["cmdline"] for p in left_running]
        assert not leaked, sorted(leaked)
        assert not _leftover_files(tmp_path)
        assert " - INFO - " not in stderr, stderr[-3000:]
    finally:
        _kill_all(run)  # (the script's pipes close with its last process)
        proc.communicate()


@needs_posix_signals
def test_the_embedded_cluster_outlives_a_ctrl_c_and_goes_when_its_script_is_killed(tmp_path):
    """A Ctrl-C (SIGINT to the script's process group, as a terminal sends
    it) interrupts the script, not its embedded cluster: the next
    computation runs on the same cluster.  Then the script is killed
    (SIGKILL: no atexit, nothing of it runs) just after a restart of the
    cluster's workers: within seconds its scheduler, nannies and workers
    are gone, and so are their semaphores.  (A nanny still restarting its
    worker then cannot close, its scheduler being gone: it is ended after
    ``_embedded.GRACE`` seconds, its semaphores unlinked all the same; its
    worker's scratch directory is dask's to purge, as for any worker that
    died: the next worker to start in that place does.)"""
    shm_before = _shm_entries()
    proc, run = _run_script(tmp_path, KILLED_SCRIPT)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines == ["42\n", "8\n", "ready\n"], (lines, proc.stderr.read()[-3000:])
        os.killpg(proc.pid, signal.SIGINT)
        lines = [proc.stdout.readline() for _ in range(2)]
        assert lines == ["10 True\n", "ready\n"], (lines, proc.stderr.read()[-3000:])
        assert len(_started_by(run)) > 3  # (the cluster is up: it is ours to watch)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 45
        while _started_by(run) and time.monotonic() < deadline:
            time.sleep(0.1)
        left_running = _started_by(run)
        leaked = _unheld(_shm_entries() - shm_before, run)
        assert not left_running, [p.info["cmdline"] for p in left_running]
        assert not leaked, sorted(leaked)
        assert not _leftover_files(tmp_path, workers=False)
    finally:
        _kill_all(run)  # (the script's pipes close with its last process)
        proc.communicate()
