"""A forked child starts with fresh locks, none of its parent's threads or
listening sockets, and outputs stay the parent's (``localsched.system.forking``).

Every scenario runs in a script of its own (forking the test runner, with
its threads, would test the runner), with a timeout: a child that hangs on
a lock copied while held is killed by an alarm and fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.platform_marks import kill_session, needs_fork

pytestmark = needs_fork

# (below pytest's timeout, so that the session is killed and the test fails)
SCRIPT_TIMEOUT = 100


def run_script(tmp_path, source: str, *args: str, env: dict | None = None,
               command: tuple = ()):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    run_env = {k: v for k, v in os.environ.items()
               if not k.startswith(("LOCALSCHED_DASHBOARD", "DASK_LOCALSCHED__"))}
    run_env.update(env or {})
    return _run([*(command or (sys.executable,)), str(path), *args], tmp_path, run_env)


def _run(argv: list, cwd, env: dict) -> subprocess.CompletedProcess:
    """Run ``argv`` in a session of its own; on timeout kill the session
    (a forked child that hung too) and fail."""
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=SCRIPT_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_session(proc)
            out, err = proc.communicate()
            pytest.fail(f"the script hung ({SCRIPT_TIMEOUT}s): {out!r} {err!r}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


# Holds every module-level lock of localsched (and those of the running
# diagnostics) in a thread while the main thread forks; the child then
# checks each module lock it finds is free and runs computations on every
# scheduler with diagnostics on.  An alarm ends a child that hangs.
HELD_AT_FORK = """\
import importlib, io, json, os, pkgutil, signal, sys, threading
from operator import add
import localsched
import localsched.multiprocessing as lm
import localsched.threaded as lt
from localsched.local import get_sync
from localsched.callbacks import Callback
from localsched.diagnostics import Profiler, ProgressBar, ResourceProfiler
from localsched.diagnostics.collectors.sampler import SampleProfiler

for info in pkgutil.walk_packages(localsched.__path__, "localsched."):
    if info.name.startswith(("localsched.__main__", "localsched.command.demo")):
        continue
    try:
        importlib.import_module(info.name)
    except ImportError:
        pass  # (an optional dependency)

LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))

def module_locks():
    return {f"{name}.{attr}": value for name, module in list(sys.modules.items())
            if name.startswith("localsched") and module is not None
            for attr, value in list(vars(module).items()) if isinstance(value, LOCK_TYPES)}

def free(lock):
    taken = lock.acquire(False)
    if taken:
        lock.release()
    return taken

dsk = {'a': 1, 'b': (add, 'a', 1), 'c': (add, 'b', 'a'), 'd': (sum, ['a', 'b', 'c'])}
lm.get(dsk, 'd', num_workers=1)  # (the pools, stores and learned times exist)

rprof = ResourceProfiler(dt=0.001)
rprof.__enter__()
prof, sprof, bar = Profiler(), SampleProfiler(), ProgressBar(out=io.StringIO())
for cb in (prof, sprof, bar):
    cb.register()
lt.get(dsk, 'd')
locks = list(module_locks().values()) + [
    rprof._sample_lock, rprof._run_lock, sprof._lock, bar._draw_lock, prof._build_lock]
assert len(module_locks()) >= 8, sorted(module_locks())

holding, release = threading.Event(), threading.Event()
def hold():
    for lock in locks:
        lock.acquire()
    holding.set()
    release.wait()
    for lock in reversed(locks):
        lock.release()
holder = threading.Thread(target=hold)
holder.start()
holding.wait()
pid = os.fork()
if pid == 0:
    signal.alarm(60)  # a hang ends the child (SIGALRM), the parent reports it
    out = {"held": sorted(n for n, lock in module_locks().items() if not free(lock))}
    with Callback(pretask=lambda key, dsk, state: None):
        out["sync"] = get_sync(dsk, 'd')
        out["threads"] = lt.get(dsk, 'd')
        out["spawn"] = lm.get(dsk, 'd', num_workers=1)
        out["fork"] = lm.get(dsk, 'd', num_workers=1, context="fork")
    rprof.__exit__(None, None, None)  # the parent's block: nothing to do here
    with ResourceProfiler(dt=0.01) as child_rprof:
        out["resources"] = lt.get(dsk, 'd')
    out["samples"] = len(child_rprof.results) >= 2
    lm.shutdown()
    with open("child.json", "w") as f:
        json.dump(out, f)
    os._exit(0)
release.set()
holder.join()
_, status = os.waitpid(pid, 0)
rprof.__exit__(None, None, None)
for cb in (prof, sprof, bar):
    cb.unregister()
print(json.dumps({"status": status, "parent_samples": len(rprof.results) >= 2}))
"""


def test_a_child_forked_while_every_lock_is_held_computes(tmp_path):
    done = run_script(tmp_path, HELD_AT_FORK)
    assert done.returncode == 0, done.stderr
    parent = json.loads(done.stdout.splitlines()[-1])
    assert parent == {"status": 0, "parent_samples": True}, \
        f"the child failed (ended by signal 14: it hung): {done.stderr}"
    child = json.loads((tmp_path / "child.json").read_text(encoding="utf-8"))
    assert child == {"held": [], "sync": 6, "threads": 6, "spawn": 6, "fork": 6,
                     "resources": 6, "samples": True}


def test_fork_workers_let_go_of_a_dashboards_port_and_connections(tmp_path):
    pytest.importorskip("bokeh")
    done = run_script(tmp_path, """\
        import http.client, socket, warnings
        from operator import add
        import localsched.multiprocessing as lm
        from localsched.diagnostics.live import Dashboard

        dash = Dashboard("127.0.0.1:0", quiet=True)
        port = dash.port
        # A browser's connection, kept alive (HTTP/1.1) once answered.
        browser = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        browser.request("GET", "/json/progress.json")
        browser.getresponse().read()
        # Fork workers, started while the dashboard serves: alive after close().
        assert lm.get({'a': 1, 'b': (add, 'a', 1)}, 'b', num_workers=2, context="fork") == 2
        dash.close()
        try:
            print("connection closed", browser.sock.recv(1) == b"")
        except socket.timeout:  # a worker holds the connection open
            print("connection closed", False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "port in use": a worker holds it
            again = Dashboard(f"127.0.0.1:{port}", quiet=True)
        print("same port", again.port == port)
        again.close()
        browser.close()
        lm.shutdown()
        """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["connection closed True", "same port True"]


@pytest.mark.parametrize("switch", ["LOCALSCHED_DASHBOARD", "DASK_LOCALSCHED__DASHBOARD"])
def test_the_dashboard_switch_starts_one_dashboard_not_one_per_worker(tmp_path, switch):
    pytest.importorskip("bokeh")
    done = run_script(tmp_path, """\
        import os, sys
        import localsched
        import localsched.multiprocessing as lm

        def serving():
            dash = sys.modules.get("localsched.diagnostics.live.dash")
            return dash is not None and dash._shared is not None

        keys = [("w", i) for i in range(8)]
        for method in ("spawn", "fork"):
            print(method, sorted(set(lm.get({k: (serving,) for k in keys}, keys,
                                            num_workers=2, context=method))))
        print("here", serving())
        lm.shutdown()
        sys.modules["localsched.diagnostics.live.dash"]._shared.close()
        """, env={switch: "1"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("localsched dashboard:")] == lines[:1]
    assert lines[1:] == ["spawn [False]", "fork [False]", "here True"]
    assert "in use" not in done.stderr


# -- localsched profile on a script that forks ----------------------------------

FORKING_SCRIPT = """\
import os, sys, time
import localsched.threaded as lt

def fork_and_wait():
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        print("parent saw child", os.waitstatus_to_exitcode(status), flush=True)
    else:
        print("child", flush=True)
    return pid

when = sys.argv[1]
if when == "early":
    pid = fork_and_wait()  # the resource sampler has just started
for i in range(3):
    lt.get({"x": (sum, [i, 1])}, "x")
if when == "late":
    pid = fork_and_wait()
if not pid:
    sys.exit(3)  # the child's own status
"""


@pytest.mark.parametrize("when", ["early", "late"])
def test_profile_a_script_that_forks(tmp_path, when):
    done = run_script(tmp_path, FORKING_SCRIPT, when,
                      command=(sys.executable, "-m", "localsched", "profile", "--no-progress",
                               "--dt", "0.001", "-o", str(tmp_path / "report.html"),
                               "--json", str(tmp_path / "run.json")))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["child", "parent saw child 3"]
    # One line about the outputs: the parent's (a child would add a second)
    assert done.stderr.count("written:") == 1, done.stderr
    assert json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))["tasks"]
    assert (tmp_path / "report.html").stat().st_size > 100_000



def test_performance_report_is_written_by_the_process_that_started_it(tmp_path):
    done = run_script(tmp_path, """\
        import os
        import localsched
        from localsched.diagnostics.report import performance_report

        with performance_report("report.html", samples=False, dt=0.001) as report:
            localsched.get({'a': (abs, -2), 'b': (abs, 'a')}, 'b')
            pid = os.fork()
            if pid:
                os.waitpid(pid, 0)  # the child leaves the block first
        if pid == 0:
            print("child wrote", report.data is not None or os.path.exists("report.html"),
                  flush=True)
            os._exit(0)
        print("parent wrote", report.data is not None and os.path.exists("report.html"))
        """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["child wrote False", "parent wrote True"]


def test_the_dask_config_switch_starts_no_dashboard_in_dasks_workers(tmp_path):
    # dask's processes scheduler runs the main module again in each worker
    # (multiprocessing's spawn): importing dask, then localsched, there
    # reads the same YAML switch.
    pytest.importorskip("bokeh")
    pytest.importorskip("dask")
    (tmp_path / "localsched.yaml").write_text("localsched:\n  dashboard: 127.0.0.1:0\n",
                                              encoding="utf-8")
    done = run_script(tmp_path, """\
        import sys
        import dask
        import localsched

        def serving():
            dash = sys.modules.get("localsched.diagnostics.live.dash")
            return dash is not None and dash._shared is not None

        if __name__ == "__main__":
            import dask.multiprocessing
            keys = [("w", i) for i in range(8)]
            print("dask", sorted(set(dask.multiprocessing.get({k: (serving,) for k in keys},
                                                               keys, num_workers=2))))
            print("here", serving())
            sys.modules["localsched.diagnostics.live.dash"]._shared.close()
        """, env={"DASK_CONFIG": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("localsched dashboard:")] == lines[:1]
    assert lines[1:] == ["dask [False]", "here True"]


# The sampler thread reads the segment store's memory; were the store's module
# first imported in that thread, a process forked meanwhile would find it half
# made ("partially initialized module").  It is imported as sampling starts,
# in the caller's thread: the sampler's first step already finds it whole.
SAMPLER_IMPORTS = """\
import json, os, signal, sys, threading
from localsched.diagnostics import ResourceProfiler

assert "localsched._shm.store" not in sys.modules
seen, parked, go = {}, threading.Event(), threading.Event()
sample_until = ResourceProfiler._sample_until
parent = os.getpid()

def first_step(self, stop):
    if os.getpid() != parent:  # (the child's own sampler, of its computation: no parking)
        return sample_until(self, stop)
    module = sys.modules.get("localsched._shm.store")
    seen["whole"] = module is not None and hasattr(module, "live_segments")  # (its last def)
    parked.set()
    go.wait(30)
    return sample_until(self, stop)

ResourceProfiler._sample_until = first_step
with ResourceProfiler(dt=0.01):
    parked.wait(30)
    pid = os.fork()
    if pid == 0:
        signal.alarm(60)
        import localsched.multiprocessing as lm
        value = lm.get({"x": (sum, [1, 2])}, "x", num_workers=1)
        lm.shutdown()
        os._exit(0 if value == 3 else 1)
    go.set()
    _, status = os.waitpid(pid, 0)
print(json.dumps({"seen": seen, "child": status}))
"""


def test_the_resource_sampler_finds_the_segment_store_imported(tmp_path):
    done = run_script(tmp_path, SAMPLER_IMPORTS)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"seen": {"whole": True}, "child": 0}
