"""Shared memory that cannot leak and pins nothing (issue 16, item 2), and
nested process gets in fork/forkserver workers (item 3).

Each test runs real worker processes; the ones about limits, kills, PID
namespaces and the cyclic collector run their computation in a subprocess
of their own, so that what they change (an rlimit, a kill, the collector's
thresholds) touches nothing else.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from localsched import multiprocessing as lmp
from localsched._shm import transport as shm
from localsched.system.platform import Platform

pytestmark = pytest.mark.skipif(not os.path.isdir(shm.SHM_DIR), reason="no /dev/shm")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def _named_by(pid: int) -> list:
    """Every name in /dev/shm (segment or anything else) owned by process ``pid``."""
    pattern = re.compile(rf"{re.escape(shm.PREFIX)}{pid}\D")
    return [n for n in os.listdir(shm.SHM_DIR) if pattern.match(n)]


def _wait_until(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture(autouse=True)
def stop_pools():
    lmp.shutdown()
    yield
    lmp.shutdown()


# -- no file descriptor per output -------------------------------------------------

_ULIMIT = """
import os, resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))   # ulimit -n 1024
import localsched.multiprocessing as lmp

def chunk(i):
    return np.full(20_000, i, dtype="f8")                 # 160 KB

out = lmp.get({("c", i): (chunk, i) for i in range(2000)},
              [("c", i) for i in range(2000)], num_workers=2)
assert len(out) == 2000 and all(o[0] == i for i, o in enumerate(out))
fds = len(os.listdir("/proc/self/fd"))
assert fds < 100, f"{fds} descriptors open while the outputs live"
if sys.argv[1] == "dask":
    import dask.array as da
    x = (da.random.random((1200, 20000), chunks=(1, 20000)) + 1).persist(scheduler=lmp.get)
    assert x.chunks[0] == (1,) * 1200 and float(x[-1, -1].compute(scheduler="sync")) >= 1
    fds = len(os.listdir("/proc/self/fd"))
    assert fds < 100, f"{fds} descriptors open while the persisted chunks live"
del out
print("ok", os.getpid())
"""


@pytest.mark.timeout(300)
def test_outputs_hold_no_file_descriptor_under_ulimit_1024():
    dask = "dask" if _has("dask.array") else "plain"
    proc = _run(_ULIMIT, dask, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok")
    pid = int(proc.stdout.split()[1])
    assert not _named_by(pid)


def _has(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


# -- a SIGKILLed caller ---------------------------------------------------------------

# (also run under the macOS simulation: tests/system/test_platforms.py)
KILLED_MID_RUN = """
import os, signal, numpy as np
from localsched.callbacks import Callback
from localsched.multiprocessing import get

def stop(key, result, dsk, state, worker_id):
    if len(state.finished) == 4:
        print(os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

dsk = {f"a{i}": (np.full, 2_000_000, i) for i in range(30)}
dsk["out"] = (len, [f"a{i}" for i in range(30)])
get(dsk, "out", num_workers=2, chunksize=1, callbacks=[Callback(posttask=stop)])
"""


@pytest.mark.timeout(120)
def test_a_killed_callers_segments_are_gone_within_5s_with_no_other_localsched_process():
    # (This process has started no pool: nothing here sweeps.)
    proc = _run(KILLED_MID_RUN, timeout=100)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    pid = int(proc.stdout.split()[0])
    assert _wait_until(lambda: not _named_by(pid), 5.0), _named_by(pid)


# -- PID namespaces --------------------------------------------------------------------

_IN_NAMESPACE = """
import os, sys, time, numpy as np
from localsched.callbacks import Callback
from localsched.multiprocessing import get
ready, go = sys.argv[1], sys.argv[2]

def wait_then_sum(a):
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.02)
    return float(a.sum())

def seen(key, result, dsk, state, worker_id):
    if key == "a":
        open(ready, "w").close()

dsk = {"a": (np.ones, 1_000_000), "b": (wait_then_sum, "a")}
print(get(dsk, "b", num_workers=1, chunksize=1, callbacks=[Callback(posttask=seen)]))
"""

# PID 1 of the new namespace sets its next pid to one this namespace does not
# use, then runs the computation in a child: its pid means nothing here.
_LAUNCH = """
import subprocess, sys
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(int(sys.argv[1]) - 1))
sys.exit(subprocess.call([sys.executable, "-c", sys.argv[2], *sys.argv[3:]]))
"""


def _unused_pid() -> int:
    with open("/proc/sys/kernel/pid_max") as f:
        top = int(f.read())
    for pid in range(top - 2000, 1000, -997):
        if not any(os.path.exists(f"/proc/{p}") for p in range(pid - 5, pid + 5)):
            return pid
    pytest.skip("no unused pid")


def _can_unshare() -> bool:
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                          capture_output=True).returncode == 0


@pytest.mark.timeout(120)
@pytest.mark.skipif(not _can_unshare(), reason="needs root and unshare --pid")
def test_a_process_in_another_pid_namespace_keeps_its_live_segments(tmp_path):
    ready, go = str(tmp_path / "ready"), str(tmp_path / "go")
    pid = _unused_pid()
    env = dict(os.environ, PYTHONPATH=ROOT)
    inner = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", _LAUNCH, str(pid),
         _IN_NAMESPACE, ready, go],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        stdin=subprocess.DEVNULL)
    try:
        assert _wait_until(lambda: os.path.exists(ready) or inner.poll() is not None, 60)
        assert inner.poll() is None, inner.communicate()
        held = [n for n in os.listdir(shm.SHM_DIR) if n.startswith(f"{shm.PREFIX}{pid}")]
        assert held, os.listdir(shm.SHM_DIR)  # its result "a" waits in a segment
        # This namespace's localsched starts a pool (which sweeps what dead
        # owners left) and sweeps once more on its own.
        assert lmp.get({"x": (sum, [1, 2])}, "x", num_workers=1) == 3
        shm.sweep_stale(shm.store(Platform.detect()).kind)
        assert set(held) <= set(os.listdir(shm.SHM_DIR))
    finally:
        open(go, "w").close()
        out, err = inner.communicate(timeout=60)
    assert inner.returncode == 0, err[-2000:]
    assert out.split() == ["1000000.0"]


# -- a process computation nested in a process task --------------------------------------


def _chain(n: int):
    dsk = {"x0": (np.ones, 1_000_000)}
    for i in range(1, n):
        dsk[f"x{i}"] = (np.add, f"x{i - 1}", 1)
    dsk["out"] = (np.sum, f"x{n - 1}")
    return dsk


def _nested_then_count(n):
    total = lmp.get(_chain(n), "out", num_workers=1, chunksize=1)
    return float(total), sorted(shm.live_segments(pids=[os.getpid()]))


@pytest.mark.timeout(120)
def test_a_nested_process_get_inside_a_process_task_leaves_nothing_behind():
    (total, left), = lmp.get({"t": (_nested_then_count, 4)}, ["t"], num_workers=1)
    assert total == 4_000_000.0
    assert left == []  # the worker's own computation kept none of its segments


# -- finalizers take no lock and do no I/O ----------------------------------------------

_CYCLES = """
import gc, os, numpy as np
from localsched.callbacks import Callback
from localsched.multiprocessing import get

# A callback keeps the cache entries (handles to segments) of the results it
# sees in reference cycles, and drops them two tasks later: they become
# cyclic garbage, which the collector may finalize at any allocation.  Here
# it runs at every directory call (list, rename, unlink) this process makes, so
# that it does so while a release is under way, in the same thread.
def collecting(call):
    def wrapper(*args, **kwargs):
        gc.collect()
        return call(*args, **kwargs)
    return wrapper

held, kinds = [], set()
def keep(key, result, dsk, state, worker_id):
    handle = state.cache[key]
    kinds.add(type(handle).__name__)
    cycle = [handle]
    cycle.append(cycle)
    held.append(cycle)
    if len(held) > 2:
        held.pop(0)

dsk = {"x0": (np.ones, 100_000)}
for i in range(1, 24):
    dsk[f"x{i}"] = (np.add, f"x{i - 1}", 1)
get({"w": (int, 1)}, "w", num_workers=1)    # the pool is up
gc.disable()
for name in ("scandir", "listdir", "rename", "unlink"):
    setattr(os, name, collecting(getattr(os, name)))
out = get(dsk, "x23", num_workers=1, chunksize=1, callbacks=[Callback(posttask=keep)])
held.clear(); gc.collect()
assert "ndarray" not in kinds, kinds     # the cache held handles
print(out[0])
"""


@pytest.mark.timeout(120)
def test_a_handle_collected_inside_a_release_does_not_deadlock():
    try:
        proc = _run(_CYCLES, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("deadlocked: a finalizer waited for a lock its own thread held")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["24.0"]


def test_releases_never_list_dev_shm(monkeypatch):
    # 2,000 unrelated files in /dev/shm must not make releases slower: no
    # release, and nothing the scheduler does while a computation runs,
    # lists the directory.
    assert lmp.get({"w": (int, 1)}, "w", num_workers=1) == 1  # the pool is up
    listed = []
    real_listdir, real_scandir = os.listdir, os.scandir

    def listdir(path=".", *args):
        if str(path) == shm.SHM_DIR:
            listed.append("listdir")
        return real_listdir(path, *args)

    def scandir(path=".", *args):
        if str(path) == shm.SHM_DIR:
            listed.append("scandir")
        return real_scandir(path, *args)

    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "scandir", scandir)
    out = lmp.get(_chain(12), "out", num_workers=1, chunksize=1)
    monkeypatch.undo()
    assert out == 12_000_000
    assert listed == []


# -- shutdown --------------------------------------------------------------------------

def _mark_at_exit(directory):
    import atexit

    atexit.register(lambda: open(os.path.join(directory, str(os.getpid())), "w").close())


@pytest.mark.timeout(180)
def test_shutdown_right_after_a_get_lets_every_worker_exit_cleanly(tmp_path):
    started = []
    for round_ in range(8):
        d = tmp_path / str(round_)
        d.mkdir()
        dsk = {f"a{i}": (np.ones, 10) for i in range(20)}
        dsk["out"] = (len, [f"a{i}" for i in range(20)])
        assert lmp.get(dsk, "out", num_workers=2, chunksize=1, initializer=_mark_at_exit,
                       initargs=(str(d),)) == 20
        started.append(set(map(str, lmp.default_pool(2, "spawn", _mark_at_exit,
                                                     (str(d),)).pids)))
        lmp.shutdown()
        # Every worker ran its exit-time code (none was SIGKILLed).
        assert set(os.listdir(d)) == started[-1], round_


# -- nested fork and forkserver gets ---------------------------------------------------


def _inc(x):
    return x + 1


def _nested(x, context):
    return lmp.get({"a": x, "b": (_inc, "a")}, "b", num_workers=1, context=context)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("outer", ["fork", "forkserver"])
@pytest.mark.parametrize("inner", ["fork", "forkserver"])
def test_a_nested_get_in_a_fork_or_forkserver_worker(outer, inner):
    dsk = {"y": (_nested, 1, inner)}
    assert lmp.get(dsk, "y", num_workers=1, context=outer) == 2
