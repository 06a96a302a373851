"""Other platforms' constraints, simulated on Linux (issue 26): no
``fcntl`` (Windows), and ``/dev/shm`` missing (macOS, the BSDs, AWS
Lambda), read-only, too small, filling up, or out of inodes (sandboxes).

Each scenario runs a real process computation in a subprocess of its own:
the ``fcntl`` one with the import (and the other calls Windows lacks)
taken away in it and in its spawned workers (a ``sitecustomize`` on their
path), the ``/dev/shm`` ones in a private
mount namespace (``unshare -m``) where a tmpfs of that kind, or none at
all, is mounted on ``/dev/shm`` (needs root, or sudo without a password as
on CI runners, and unshare: skipped with the reason elsewhere).  Every one
must give the right result with one warning (none when there is room),
given by the caller (no worker's stderr line), and leave nothing in that
``/dev/shm``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.shm.test_shm_lifetime import KILLED_MID_RUN
from tests.support.macos_sim import MACOS_LIKE, objects_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The computation: results and inputs of 2.4 MB (shared memory when it
# works), two workers, a ResourceProfiler around it (it reads /dev/shm).
# Prints one JSON line: the result was right, the warnings about pipes.
COMPUTATION = """
import json, operator, os, sys, warnings
import numpy as np
import localsched.multiprocessing as lmp
from localsched._shm import store as segments
from localsched.diagnostics import ResourceProfiler

from localsched._shm import handles

owned = set()  # (the segments this process owned: values that crossed in shared memory)
_init = handles.SharedValue.__init__
def counting_init(self, name, *args, **kwargs):
    _init(self, name, *args, **kwargs)
    if self._store is not None:
        owned.add(name)
handles.SharedValue.__init__ = counting_init
sweeps = []  # (each a listing of /dev/shm: once per process, however many jobs)
_sweep = segments.sweep_stale
segments.sweep_stale = lambda *a, **k: sweeps.append(1) or _sweep(*a, **k)

n = 300_000
dsk = {("a", i): (np.full, n, float(i)) for i in range(4)}
dsk.update({("b", i): (operator.add, ("a", i), ("a", (i + 1) % 4)) for i in range(4)})
dsk["total"] = (sum, [(np.sum, ("b", i)) for i in range(4)])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with ResourceProfiler(dt=0.05) as rprof:
        bs, total = lmp.get(dsk, [[("b", i) for i in range(4)], "total"], num_workers=2)
    bs2 = lmp.get(dsk, [("b", i) for i in range(4)], num_workers=2)  # (a second run)
try:  # (while this process still owns its pools: does it own a lock file?)
    lock = any(n.endswith(".lock") for n in os.listdir("/dev/shm"))
except OSError:
    lock = False
lmp.shutdown()
right = (total == 12 * n and len(rprof.results) >= 2
         and all(b.shape == (n,) and (b == i + (i + 1) % 4).all()
                 for bb in (bs, bs2) for i, b in enumerate(bb)))
notes = [str(w.message) for w in caught
         if issubclass(w.category, RuntimeWarning) and "pipe" in str(w.message)]
print(json.dumps({"right": bool(right), "warnings": notes, "lock": lock,
                  "sweeps": len(sweeps), "segments": len(owned)}))
"""


def _check(proc: subprocess.CompletedProcess, warnings_expected: int) -> dict:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stdout + proc.stderr
    out = json.loads(lines[-1])
    assert out["right"], out
    assert len(out["warnings"]) == warnings_expected, out
    # One warning, the caller's: no worker writes its own line.
    assert "localsched:" not in proc.stderr, proc.stderr
    # The store's set-up sweeps /dev/shm once per process, not once per
    # job when it cannot be made (a listing per batch).
    assert out["sweeps"] <= 1, out
    return out


# -- no fcntl (Windows) ------------------------------------------------------------

# What Windows lacks of what localsched might touch, taken away from a
# Linux interpreter (spawned workers included).
WINDOWS_LIKE = """
import ctypes, os, signal, sys
sys.modules["fcntl"] = None  # "import fcntl" raises ImportError
for name in ("statvfs", "pidfd_open", "confstr"):
    if hasattr(os, name):
        delattr(os, name)
if hasattr(signal, "SIGKILL"):
    del signal.SIGKILL
class _NoLibc(ctypes.CDLL):  # (ctypes.CDLL(None): no C library by that name)
    def __init__(self, name, *args, **kwargs):
        if name is None:
            raise TypeError("expected str, bytes or os.PathLike object, not NoneType")
        super().__init__(name, *args, **kwargs)
ctypes.CDLL = _NoLibc
import subprocess
class _NoPassFds(subprocess.Popen):  # (what subprocess says on Windows)
    def __init__(self, *args, pass_fds=(), **kwargs):
        if pass_fds:
            raise ValueError("pass_fds is not supported on Windows.")
        super().__init__(*args, **kwargs)
subprocess.Popen = _NoPassFds
from tests.support.windows_sim import install  # (and localsched runs as Windows)
install()
"""


@pytest.fixture
def no_fcntl_env(tmp_path):
    """An environment whose Python processes (spawned workers included)
    cannot import fcntl, and lack the other calls Windows lacks."""
    (tmp_path / "sitecustomize.py").write_text(WINDOWS_LIKE)
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))


def _named_by(pid: int) -> list:
    if not os.path.isdir("/dev/shm"):
        return []
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"localsched-{pid}_")]


def test_without_fcntl_import_threads_resource_profiler_and_processes(no_fcntl_env):
    """Without fcntl (nor statvfs, pidfd_open, confstr, SIGKILL, a C library
    by the name None, or subprocess's pass_fds), ``import
    localsched.multiprocessing`` works, a ResourceProfiler around a threads
    computation samples, and a process computation gives the right result
    through pipes with one warning, on the pool Windows gets."""
    script = textwrap.dedent("""
        import sys
        try:
            import fcntl
        except ImportError:
            pass
        else:
            sys.exit("fcntl is importable: the simulation does not hold")
        import localsched.multiprocessing
        import localsched.threaded
        from localsched.diagnostics import ResourceProfiler
        from operator import add
        with ResourceProfiler(dt=0.01) as rprof:
            assert localsched.threaded.get({"a": 1, "b": (add, "a", 1)}, "b") == 2
        assert len(rprof.results) >= 2, rprof.results
        print("threads ok", flush=True)
        """) + COMPUTATION
    proc = subprocess.Popen([sys.executable, "-c", script], env=no_fcntl_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        stdout, stderr = proc.communicate(timeout=100)
    finally:
        proc.kill()
        proc.wait()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert "threads ok" in stdout, stdout + stderr
    out = _check(done, warnings_expected=1)
    assert "lock" in out["warnings"][0], out  # (says why)
    assert _named_by(proc.pid) == []


# -- macOS: POSIX shared-memory objects, no /dev/shm ----------------------------------------


@pytest.fixture
def macos_env(tmp_path):
    """An environment whose Python processes (spawned workers included)
    see no /dev/shm but have POSIX shared-memory objects under macOS's
    rules (``tests/support/macos_sim.py``), with a temporary directory of their own
    (where the owner locks and journals go)."""
    pytest.importorskip("_posixshmem", reason="POSIX shared memory (not on Windows)")
    site, tmp = tmp_path / "site", tmp_path / "tmp"
    site.mkdir()
    tmp.mkdir()
    (site / "sitecustomize.py").write_text(MACOS_LIKE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), ROOT]), TMPDIR=str(tmp))
    return env, tmp


def _registry_left(tmp) -> list:
    return [str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()]


def _run_macos(env: dict, script: str, timeout: float = 100) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        proc.stdout_text, proc.stderr_text = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
        proc.wait()
    return proc


def test_macos_processes_share_memory_through_posix_objects(macos_env):
    """Where there is no /dev/shm but POSIX shared memory (macOS, the
    BSDs), large values still travel through shared memory: the right
    result, no warning, segments used, the ResourceProfiler sampling; and
    once the process has exited no object, lock file or journal is left."""
    env, tmp = macos_env
    script = textwrap.dedent("""
        import os
        assert not os.path.isdir("/dev/shm"), "the simulation does not hold"
        """) + COMPUTATION
    proc = _run_macos(env, script)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout_text,
                                       proc.stderr_text)
    out = _check(done, warnings_expected=0)
    assert out["segments"] > 0, out
    assert objects_of(proc.pid) == []
    assert _registry_left(tmp) == []


def test_macos_a_killed_callers_objects_are_reaped_from_its_journal(macos_env):
    """SIGKILLed mid-run with results in POSIX objects, which no one can
    list on macOS: its reaper unlinks every object its journal names, then
    the journal and the lock, within seconds."""
    import signal
    import time

    env, tmp = macos_env
    proc = _run_macos(env, KILLED_MID_RUN)
    assert proc.returncode == -signal.SIGKILL, proc.stderr_text[-2000:]
    pid = int(proc.stdout_text.split()[0])
    deadline = time.monotonic() + 5
    while (objects_of(pid) or _registry_left(tmp)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert objects_of(pid) == []
    assert _registry_left(tmp) == []


def test_macos_a_script_moving_temporary_files_keeps_shared_memory(macos_env):
    """``tempfile.tempdir`` set by a script (the documented in-process way
    to move temporary files) moves the owner's lock and journal; its
    workers, started with the environment's temporary directory, must still
    find them, or every value silently takes the pipes (issue #35)."""
    env, tmp = macos_env
    moved = tmp / "moved"
    moved.mkdir()
    script = textwrap.dedent(f"""
        import tempfile
        tempfile.tempdir = {str(moved)!r}
        import numpy as np
        from localsched import multiprocessing as lmp

        def how(a):
            base = a
            while isinstance(base, np.ndarray) and base.base is not None:
                base = base.base
            return type(getattr(base, "obj", base)).__name__

        result = lmp.get({{"a": (np.arange, 200_000)}}, "a", num_workers=1)
        piped = how(result) in ("bytes", "bytearray", "ndarray")  # (not a mapping)
        print("ARRIVED", how(result) if piped else "shared", flush=True)
        """)
    proc = _run_macos(env, script)
    assert proc.returncode == 0, proc.stderr_text[-2000:]
    assert "ARRIVED shared" in proc.stdout_text, proc.stdout_text + proc.stderr_text[-2000:]
    assert _registry_left(tmp) == []


# -- /dev/shm missing, read-only, small, full, out of inodes -------------------------------

# Shell set-ups run in the private mount namespace before the computation.
SHM_MISSING = """
olddev=$(mktemp -d)
mount --bind /dev "$olddev"
mount -t tmpfs -o size=1m tmpfs /dev
for n in null zero urandom random full tty; do
    touch /dev/$n && mount --bind "$olddev/$n" /dev/$n
done
ln -s /proc/self/fd /dev/fd
umount "$olddev" && rmdir "$olddev"
"""

SCENARIOS = {
    # name: (set-up, extra environment, warnings expected, shared memory used:
    # an owner lock file exists while the pools live, and results arrive in
    # segments)
    "roomy": ("mount -t tmpfs -o size=256m tmpfs /dev/shm", {}, 0, True),
    "missing": (SHM_MISSING, {}, 1, False),
    "read-only": ("mount -t tmpfs -o ro tmpfs /dev/shm", {}, 1, False),
    # (no lock file either: nothing is created before the fallback is decided)
    "too-small": ("mount -t tmpfs -o size=1m tmpfs /dev/shm", {}, 1, False),
    # Room for the lock and a value or two, then full: each value that
    # does not fit takes the pipe (decided per failure, workers included).
    "fills-up": ("mount -t tmpfs -o size=6m tmpfs /dev/shm",
                 {"LOCALSCHED_SHM_RESERVE": "0"}, 1, True),
    "no-inodes": ("mount -t tmpfs -o nr_inodes=1 tmpfs /dev/shm", {}, 1, False),
    # An inode for the owner's lock file and one segment at a time (the
    # root directory takes the third).
    "few-inodes": ("mount -t tmpfs -o nr_inodes=3 tmpfs /dev/shm", {}, 1, True),
    # Present, writable by its owner, with room, but not by this user (a
    # sandbox's /dev/shm): creating the owner's lock file fails (EACCES).
    "not-writable": ("mount -t tmpfs -o mode=0755,uid=65534 tmpfs /dev/shm", {}, 1, False),
}

# How the computation runs in a scenario (default: as root): root without
# the capabilities that bypass file permissions, as an ordinary user is.
RUN_AS = {"not-writable": "setpriv --bounding-set=-dac_override,-dac_read_search,-fowner "
                          "--inh-caps=-all"}


def _as_root(env: dict) -> list:
    """The command prefix that runs a command as root with ``env``: none
    for root; ``sudo -n env ...`` where sudo needs no password (CI runners)."""
    if os.geteuid() == 0:
        return []
    keep = ("PATH", "HOME", "PYTHONPATH", "LOCALSCHED_SHM_RESERVE")
    return ["sudo", "-n", "env", "PYTHONDONTWRITEBYTECODE=1",
            *[f"{k}={env[k]}" for k in keep if k in env]]


def _namespace_problem() -> str | None:
    if not sys.platform.startswith("linux"):
        return "mount namespaces are Linux's"
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    if os.geteuid() != 0 and shutil.which("sudo") is None:
        return "needs root (or sudo) to mount a tmpfs in a private mount namespace"
    probe = subprocess.run([*_as_root(dict(os.environ)), "unshare", "-m", "--propagation",
                            "private", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if probe.returncode != 0:
        return f"cannot mount in a private mount namespace here: {probe.stderr.strip()}"
    return None


@pytest.fixture(scope="module")
def namespaces():
    problem = _namespace_problem()
    if problem is not None:
        pytest.skip(problem)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_dev_shm_scenarios(namespaces, scenario):
    """The processes scheduler with /dev/shm missing, read-only, too
    small, filling up or out of inodes: the right result, one warning (none
    when there is room), and nothing left in that /dev/shm once the
    computation's process has exited."""
    setup, env_extra, warnings_expected, shared = SCENARIOS[scenario]
    run_as = RUN_AS.get(scenario, "")
    if run_as and shutil.which(run_as.split()[0]) is None:
        pytest.skip(f"needs {run_as.split()[0]} (util-linux)")
    shell = (f"set -e\n{setup}\nset +e\n"
             f'{run_as} "$0" -c "$1"; status=$?\n'
             f'echo "LEFT: $(ls -A /dev/shm 2>/dev/null | tr "\\n" " ")"\n'
             f"exit $status\n")
    env = dict(os.environ, PYTHONPATH=ROOT, **env_extra)
    proc = subprocess.run(
        [*_as_root(env), "unshare", "-m", "--propagation", "private", "sh", "-c", shell,
         sys.executable, textwrap.dedent(COMPUTATION)],
        capture_output=True, text=True, timeout=100, env=env, stdin=subprocess.DEVNULL)
    out = _check(proc, warnings_expected)
    assert out["lock"] is shared, out
    assert (out["segments"] > 0) is shared, out
    left = [line for line in proc.stdout.splitlines() if line.startswith("LEFT:")]
    assert left and "localsched-" not in left[-1], proc.stdout


# -- /proc without its details: psutil alone ------------------------------------------


def test_resource_profiler_and_live_feed_on_psutil_alone():
    """Where /proc cannot tell shared pages apart or list children (macOS,
    Windows), the ResourceProfiler sums psutil's RSS and the live page finds
    child processes through psutil: around a process computation both
    still see the workers."""
    import psutil

    from localsched import multiprocessing as lmp
    from localsched.diagnostics.collectors.resource import _ProcessTree
    from localsched.diagnostics.live import resource_probe
    from localsched.system import platform as _platform

    # (macOS's answers about /proc: none; segments as this platform has them)
    no_proc = dataclasses.replace(_platform.Platform.detect(), proc_details=False)
    shared = lmp.SharedPools(no_proc)
    held_mb = 2 * HOLD_MB
    try:
        tree = _ProcessTree(no_proc)  # (the ResourceProfiler's, as that platform has it)
        tree.measure()
        dsk = {("h", i): (_hold_memory, i) for i in range(2)}
        assert shared.get(dsk, [("h", 0), ("h", 1)], num_workers=2) == (0, 1)
        # The workers hold HOLD_MB each of the tasks' memory: counted.
        mem, _ = tree.measure()
        own_mb = psutil.Process().memory_info().rss / 1e6
        assert mem >= own_mb + 0.9 * held_mb, (mem, own_mb)
        children = {p.pid for p in resource_probe.children(psutil.Process(), no_proc)}
        assert set(shared.pool(2).pids) <= children
    finally:
        shared.shutdown()


HOLD_MB = 100


def _hold_memory(i):
    """Keep ``HOLD_MB`` MB (10**6 bytes) of touched memory in this worker
    process until it exits."""
    import builtins

    import numpy as np

    held = builtins.__dict__.setdefault("_localsched_test_held", [])
    held.append(np.ones(HOLD_MB * 10**6 // 8))
    return i
