"""Run dask's own scheduler tests, from the installed dask, against localsched.

The issue asks that dask's public tests of its local schedulers
(``dask/tests/test_threaded.py``, ``test_multiprocessing.py``,
``test_local.py``, ``test_callbacks.py``) pass with dask's get functions and
Callback swapped for localsched's.  How the swap is done, and why this way:

* **The test files are copied and their imports rewritten** (``rewrite``):
  ``from dask.threaded import get`` becomes ``from localsched.threaded import
  get``, and likewise ``dask.local.get_sync``, ``dask.multiprocessing.get``,
  ``dask.callbacks.Callback`` and ``dask.diagnostics.Callback``; the other
  names of the same import (``sortkey``, ``_dumps``, ...) stay dask's.  This
  changes exactly the names the tests bind and nothing inside dask, and the
  copy shows what ran.  The rewrite keeps every line number, so a traceback
  points at the same line as in dask's file.
* **A plugin swaps what a test reaches through dask** (``localsched_swap``):
  ``scheduler="threads"`` in ``compute``/``dask.config.set`` resolves through
  ``dask.base.named_schedulers``, and ``dask.multiprocessing.get`` is compared
  by identity inside dask; the plugin points those at localsched before the
  tests are imported.  dask's ``Callback`` class itself is left alone (its
  diagnostics subclass it; see the plugin's docstring).
* **Honesty checks**: the rewrite fails if a swapped name is still imported
  from dask; the plugin fails if a test module still holds one of dask's
  originals, and if a skipped-as-internal test no longer exists.  A run passes
  only if every collected test passed or was skipped for a listed reason.

Each suite runs in its own ``python -m pytest`` subprocess (its own session
and process group, killed as a whole on timeout), so a hang, a leaked thread
or a stuck worker process cannot reach the test run that started it.

Not swapped: ``dask.local.get_async`` (dask's ``get_scheduler`` uses it for
``scheduler=<Executor>``; no test of these four files goes there) and the
default scheduler a collection class captured at import
(``Delayed.__dask_scheduler__`` ...; the tests here always name a scheduler).

>>> rewrite("from dask.local import get_sync, sortkey\\n").source
'from dask.local import sortkey; from localsched.local import get_sync\\n'
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

# (tests/ is on sys.path wherever dask_conformance is importable)
from tests.support.platform_marks import kill_session

from .localsched_swap import SKIP_PREFIX, SWAPPED_NAMES

#: The dask test modules of the contract, in dask's ``dask/tests/``.
DASK_TEST_MODULES = ("test_threaded", "test_multiprocessing", "test_local", "test_callbacks")
#: dask's diagnostics tests (``dask/diagnostics/tests/``), run with dask's
#: Profiler, ResourceProfiler, CacheProfiler, ProgressBar swapped for
#: localsched's (and dask's get functions, as above).
DASK_DIAGNOSTICS_MODULES = ("diagnostics/test_profiler", "diagnostics/test_progress")


def _source_of(module: str) -> Path:
    """The dask file of ``module`` ("test_local", "diagnostics/test_profiler")."""
    package, _, name = module.rpartition("/")
    base = dask_tests_dir()
    if package:
        base = base.parent / package / "tests"
    return base / f"{name}.py"


def _file_of(module: str) -> str:
    """The name the copy of ``module`` gets in the work directory."""
    return module.rpartition("/")[2] + ".py"

#: Skips that say "this platform/interpreter does not apply", not "localsched
#: failed": dask's tests for Windows-only behaviour, and for free-threading.
PLATFORM_SKIPS = (
    re.compile(r"Windows|win32|POSIX supports different contexts"),
    re.compile(r"free-threading"),
)

PER_TEST_TIMEOUT = 60  # seconds, pytest-timeout inside the run


def dask_tests_dir() -> Path | None:
    """``dask/tests`` of the installed dask, or None without dask."""
    import importlib.util

    spec = importlib.util.find_spec("dask")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "tests"


@dataclass
class Rewritten:
    source: str
    swapped: list  # "dask.threaded.get -> localsched.threaded.get", ...


def rewrite(source: str) -> Rewritten:
    """``source`` with its imports of the swapped names taken from localsched.

    >>> r = rewrite("def f():\\n    from dask.threaded import get as g\\n    return g\\n")
    >>> print(r.source, end="")
    def f():
        from localsched.threaded import get as g
        return g
    """
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    swapped = []
    # Replace from the bottom, so earlier line numbers stay valid.
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    for node in sorted(imports, key=lambda n: n.lineno, reverse=True):
        ours = [a for a in node.names if (node.module, a.name) in SWAPPED_NAMES]
        if not ours:
            continue
        kept = [a for a in node.names if (node.module, a.name) not in SWAPPED_NAMES]
        statements = []
        if kept:
            statements.append(ast.ImportFrom(node.module, kept, 0))
        for alias in ours:
            target_module, target_name = SWAPPED_NAMES[(node.module, alias.name)]
            bound = alias.asname or alias.name
            statements.append(ast.ImportFrom(
                target_module,
                [ast.alias(target_name, None if bound == target_name else bound)], 0))
            swapped.append(f"{node.module}.{alias.name} -> {target_module}.{target_name}")
        first, last = node.lineno - 1, node.end_lineno - 1
        indent = lines[first][: node.col_offset]
        text = indent + "; ".join(ast.unparse(s) for s in statements) + "\n"
        # Blank lines stand in for the rest of a multi-line import, so the
        # line numbers of everything below stay dask's.
        lines[first : last + 1] = [text] + ["\n"] * (last - first)
    result = "".join(lines)
    _check_no_dask_import_left(result)
    return Rewritten(result, swapped)


def _check_no_dask_import_left(source: str) -> None:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            left = [a.name for a in node.names if (node.module, a.name) in SWAPPED_NAMES]
            if left:
                raise AssertionError(f"line {node.lineno} still imports {left} from dask")


def prepare(workdir: Path, modules=DASK_TEST_MODULES) -> dict:
    """Copy dask's test ``modules`` into ``workdir``, rewritten; a pytest.ini
    of their own.  Returns ``{module: [swaps]}``."""
    swaps = {}
    for module in modules:
        original = _source_of(module)
        rewritten = rewrite(original.read_text(encoding="utf-8"))
        (workdir / original.name).write_text(rewritten.source, encoding="utf-8")
        swaps[module] = rewritten.swapped
    write_ini(workdir)
    return swaps


def write_ini(workdir: Path, timeout: int = PER_TEST_TIMEOUT) -> None:
    """The run's own pytest.ini: the repo's addopts (doctests of the package,
    durations) must not apply to dask's files.  A hang ends the run (thread
    method) instead of waiting in the hung test's cleanup; ``run_suite``
    re-runs the rest."""
    (workdir / "pytest.ini").write_text(textwrap.dedent(f"""\
        [pytest]
        timeout = {timeout}
        timeout_method = thread
        """), encoding="utf-8")


@dataclass
class Outcome:
    nodeid: str
    outcome: str  # passed, failed, skipped, error, hung
    message: str = ""


@dataclass
class SuiteResult:
    outcomes: list = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    output: str = ""

    def problems(self) -> list:
        """One line per test that did not pass and was not skipped for a
        listed reason; empty when the suite passes."""
        found = []
        for o in self.outcomes:
            if o.outcome in ("passed", "xfailed", "xpassed"):  # xfail: dask's own marks
                continue
            if o.outcome == "skipped" and (
                o.message.startswith(SKIP_PREFIX)
                or any(p.search(o.message) for p in PLATFORM_SKIPS)
            ):
                continue
            found.append(f"{o.outcome.upper()} {o.nodeid}: {o.message}")
        if self.timed_out:
            found.append("the run was killed at its overall timeout")
        elif not self.outcomes:
            found.append(f"no test ran (pytest exit code {self.returncode}):\n"
                         + self.output[-3000:])
        elif self.returncode not in (0, 1) and not any(o.outcome == "hung"
                                                      for o in self.outcomes):
            # 1 is "tests failed" (listed above); a hang ends the run with its
            # own exit code.  Anything else is a broken run: show its output.
            found.append(f"pytest exit code {self.returncode}:\n" + self.output[-3000:])
        return found


def _python_path(extra: list) -> str:
    import localsched

    localsched_root = str(Path(localsched.__file__).resolve().parent.parent)
    tests_dir = str(Path(__file__).resolve().parent.parent)
    parts = [localsched_root, tests_dir, *map(str, extra)]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


SWAP_PLUGINS = ("dask_conformance.localsched_swap",)


def run_pytest(args: list, workdir: Path, timeout: float, report: Path,
               plugins=SWAP_PLUGINS, rootdir: Path | None = None) -> SuiteResult:
    """``python -m pytest args`` in ``workdir`` with ``plugins`` (and the
    reporting plugin); killed, with every process it started, after
    ``timeout`` seconds.  ``workdir`` holds the run's pytest.ini; the rootdir
    is ``workdir`` unless given."""
    env = dict(os.environ)
    # The run is self-contained: no plugins or options from the environment.
    for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        env.pop(var, None)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONPATH"] = _python_path([workdir])
    env["LOCALSCHED_CONFORMANCE_REPORT"] = str(report)
    command = [
        sys.executable, "-m", "pytest", "-p", "pytest_timeout", "-p", "no:cacheprovider",
        "-p", "dask_conformance.reporting",
        *(arg for plugin in plugins for arg in ("-p", plugin)),
        "-c", str(workdir / "pytest.ini"), f"--rootdir={rootdir or workdir}",
        "-q", "-rfEs", *args,
    ]
    result = SuiteResult()
    proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        result.output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        result.timed_out = True
        kill_session(proc)
        result.output, _ = proc.communicate()
    finally:
        # Worker processes the run left behind (same process group).
        kill_session(proc)
    result.returncode = proc.returncode
    result.outcomes = read_report(report)
    return result


def read_report(report: Path) -> list:
    """Outcomes from the plugin's JSON lines; a test that started but never
    reported is "hung" (the run was killed while it ran)."""
    outcomes: dict = {}
    if not report.exists():
        return []
    for line in report.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        nodeid = r["nodeid"]
        if r["when"] == "start":
            outcomes[nodeid] = Outcome(
                nodeid, "hung", f"did not end within {PER_TEST_TIMEOUT} s (a hang)")
            continue
        current = outcomes.get(nodeid)
        outcome = {"failed": "failed" if r["when"] == "call" else "error"}.get(
            r["outcome"], r["outcome"])
        # The first failure of a test is its story (a teardown error after a
        # failed call does not replace it).
        if current is None or current.outcome in ("hung", "passed"):
            outcomes[nodeid] = Outcome(nodeid, outcome, r.get("message", ""))
    return list(outcomes.values())


def run_suite(module: str, workdir: Path, timeout: float = 240) -> SuiteResult:
    """Copy, rewrite and run one dask test module; see ``SuiteResult.problems``.

    A test that hangs past ``PER_TEST_TIMEOUT`` ends its whole run (pytest-
    timeout's thread method exits the process: a hung scheduler test often
    cannot be interrupted, e.g. its pool's shutdown waits for the stuck
    tasks); it is recorded as hung and the module is run again without it,
    so one deadlock does not hide the results of the tests after it.
    """
    import time

    prepare(workdir, [module])
    deadline = time.monotonic() + timeout
    hung: list = []
    attempt = 0
    while True:
        attempt += 1
        args = [_file_of(module)] + [f"--deselect={o.nodeid}" for o in hung]
        result = run_pytest(args, workdir, deadline - time.monotonic(),
                            workdir / f"{_file_of(module)}.{attempt}.jsonl")
        newly_hung = [o for o in result.outcomes if o.outcome == "hung"]
        result.outcomes = hung + result.outcomes
        if result.timed_out or not newly_hung:
            return result
        hung += newly_hung
        if deadline - time.monotonic() < PER_TEST_TIMEOUT:
            result.timed_out = True  # no time left to run the rest
            return result


def main(argv=None) -> int:
    """``python -m dask_conformance.harness [module ...]`` (from ``tests/``):
    run the suites and print what did not pass."""
    import tempfile

    modules = (argv if argv is not None else sys.argv[1:]) or list(DASK_TEST_MODULES)
    status = 0
    for module in modules:
        workdir = Path(tempfile.mkdtemp(prefix=f"dask-{module}-"))
        try:
            result = run_suite(module, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        problems = result.problems()
        passed = sum(o.outcome == "passed" for o in result.outcomes)
        print(f"{module}: {passed}/{len(result.outcomes)} passed, {len(problems)} problems")
        for p in problems:
            print("   ", p)
        status |= bool(problems)
    return status


if __name__ == "__main__":
    sys.exit(main())
