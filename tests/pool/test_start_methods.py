"""Every start method, as the pool's and as the interpreter's default, in
real scripts with and without an ``if __name__ == "__main__"`` guard, and
the interpreter options a worker gets.

Each scenario is a script written to a temporary directory and run by a
fresh interpreter with a timeout: a hang fails the test, never the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.platform_marks import (
    kill_session,
    needs_fork,
    needs_forkserver,
    present_start_methods,
    start_method,
)
from tests.support.windows_sim import env as windows_env

METHODS = ("fork", "spawn", "forkserver")
# (a script runs those of them the platform has: spawn alone on Windows)
PRESENT = present_start_methods(METHODS)
# Seconds a script may take: starting pools of every method on a loaded
# machine takes a few; a hang takes forever.
SCRIPT_TIMEOUT = 90


def run_script(tmp_path, source: str, *options: str, name: str = "script.py",
               windows_like: bool = False):
    """Run ``source`` as a script in ``tmp_path`` with interpreter
    ``options`` (``windows_like``: on the pool Windows gets, simulated:
    ``tests/support/windows_sim.py``); its CompletedProcess (a hang fails the test)."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    env = windows_env() if windows_like else dict(os.environ)
    env.pop("LOCALSCHED_DASHBOARD", None)
    argv = [sys.executable, *options, str(path)]
    with subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=SCRIPT_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_session(proc)  # (and whatever it started)
            out, err = proc.communicate()
            pytest.fail(f"{name} hung ({SCRIPT_TIMEOUT}s); output so far: {out!r} {err!r}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


# What the script does: a get on the shared pool with its default start
# method, with each method as context= and as dask's config (there with
# every diagnostic on, in a performance_report), and a ResourceProfiler
# around a threads computation.
WORK = """\
import multiprocessing
multiprocessing.set_start_method({default!r})
from operator import add
import dask
import localsched.multiprocessing as lm
import localsched.threaded as lt
from localsched.diagnostics import ResourceProfiler
from localsched.diagnostics.report import performance_report

dsk = {{'a': 1, 'b': (add, 'a', 1), 'c': (add, 'b', 'a'), 'd': (sum, ['a', 'b', 'c'])}}
print("default", lm.get(dsk, 'd', num_workers=2))
for method in [m for m in ("fork", "spawn", "forkserver")
               if m in multiprocessing.get_all_start_methods()]:
    print(method, lm.get(dsk, 'd', num_workers=2, context=method))
    with dask.config.set({{"multiprocessing.context": method}}):
        # (every diagnostic on: profilers, resources, cache, fine metrics, samples)
        with performance_report(None, dt=0.01) as report:
            print(method, "config", lm.get(dsk, 'd', num_workers=2))
        print(method, "report", sorted(t.key for t in report.data.tasks))
with ResourceProfiler(dt=0.01) as rprof:
    print("threads", lt.get(dsk, 'd'))
print("resources", len(rprof.results) >= 2 and all(r.mem > 0 for r in rprof.results))
"""


def _guarded(code: str) -> str:
    return ("def main():\n" + textwrap.indent(code, "    ")
            + "\n\nif __name__ == '__main__':\n    main()\n")


@pytest.mark.parametrize("default, guarded, windows_like", [
    *[pytest.param(method, guarded, False, marks=start_method(method).marks,
                   id=f"{method}-{'guarded' if guarded else 'unguarded'}")
      for method in METHODS for guarded in (True, False)],
    # (Windows' pool, simulated: every method goes through multiprocessing)
    pytest.param("spawn", True, True, id="spawn-guarded-windows-like"),
    pytest.param("spawn", False, True, id="spawn-unguarded-windows-like"),
])
def test_every_start_method_in_a_script(tmp_path, default, guarded, windows_like):
    code = WORK.format(default=default)
    done = run_script(tmp_path, _guarded(code) if guarded else code, windows_like=windows_like)
    assert done.returncode == 0, done.stderr
    expected = ["default 6"]
    for method in PRESENT:
        expected += [f"{method} 6", f"{method} config 6",
                     f"{method} report ['b', 'c', 'd']"]
    expected += ["threads 6", "resources True"]
    assert done.stdout.split("\n")[:-1] == expected, done.stderr


@needs_fork
@needs_forkserver
def test_an_unguarded_script_runs_once_in_forkserver_workers(tmp_path):
    # The main module is never run again in a worker: its top-level code
    # (here: a line of output and a file) happens once.
    done = run_script(tmp_path, """\
        import os
        import localsched.multiprocessing as lm
        with open("ran", "a") as f:
            f.write(f"{os.getpid()}\\n")
        def task():
            return os.getpid()
        pids = {lm.get({('t', i): (task,) for i in range(8)}, [('t', i) for i in range(8)],
                       num_workers=2, context=method)[0] for method in
                ("forkserver", "fork", "spawn")}
        print("ok", os.getpid() not in pids)
        """)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok True\n"
    assert len((tmp_path / "ran").read_text(encoding="utf-8").split()) == 1


# -- interpreter options ------------------------------------------------------

# A module the task comes from, imported (and so compiled) in the worker:
# its asserts are there or not according to the worker's own -O.
FLAGS_MODULE = """\
import sys
import warnings


def flags():
    try:
        assert False
        asserts = False
    except AssertionError:
        asserts = True
    action = next(f[0] for f in warnings.filters if issubclass(DeprecationWarning, f[2]))
    return __debug__, asserts, sys.flags.optimize, action
"""

FLAGS_SCRIPT = """\
import multiprocessing
import localsched.multiprocessing as lm
import localsched.threaded as lt
from flagsmod import flags

print("threads", lt.get({'x': (flags,)}, 'x'))
for method in [m for m in ("spawn", "fork", "forkserver")
               if m in multiprocessing.get_all_start_methods()]:
    print(method, lm.get({'x': (flags,)}, 'x', num_workers=1, context=method))
"""


@pytest.mark.parametrize("options, expected, windows_like", [
    (("-O", "-W", "error::DeprecationWarning"), (False, False, 1, "error"), False),
    (("-W", "ignore::DeprecationWarning"), (True, True, 0, "ignore"), False),
    (("-O", "-W", "error::DeprecationWarning"), (False, False, 1, "error"), True),
], ids=["-O -W error", "-W ignore", "-O -W error, windows-like"])
def test_workers_get_the_interpreter_options(tmp_path, options, expected, windows_like):
    (tmp_path / "flagsmod.py").write_text(FLAGS_MODULE, encoding="utf-8")
    done = run_script(tmp_path, FLAGS_SCRIPT, *options, windows_like=windows_like)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")[:-1]
    methods = present_start_methods(("spawn", "fork", "forkserver"))
    assert lines == [f"{where} {expected!r}" for where in ("threads", *methods)]
