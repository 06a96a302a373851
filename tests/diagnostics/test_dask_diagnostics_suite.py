"""dask's own diagnostics tests, run against localsched's diagnostics.

dask's ``dask/diagnostics/tests/test_profiler.py`` and ``test_progress.py``
(from the installed dask) are copied to a temporary directory with their
``dask.diagnostics`` and ``dask.callbacks`` imports pointed at localsched's,
and run by pytest in a subprocess.  They still compute with dask's own
schedulers and collections (``dask.threaded.get``, ``dask.array``): what
they check is that localsched's profilers, progress bar and plots do what
dask's do, used the way dask's tests use them.

Deselected, each with its reason:
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from localsched.callbacks import Callback

dask = pytest.importorskip("dask")
pytest.importorskip("bokeh")
pytest.importorskip("psutil")

REPO = Path(__file__).resolve().parents[2]
SUITE = ("test_profiler.py", "test_progress.py")

#: Tests that check dask's internals rather than the diagnostics API, by name.
DESELECTED = {
    "test_progress.py::test_format_time": (
        "dask.diagnostics.progress.format_time is dask's deprecated alias of "
        "dask.utils.format_time: the test checks that it warns and points to "
        "dask.utils, and dask.utils' padding.  localsched.diagnostics.progress."
        "format_time is localsched's own, not deprecated, helper."
    ),
}
__doc__ += "".join(f"\n* ``{name}``: {why}" for name, why in DESELECTED.items())

# What the rewrite must turn every dask diagnostics import into.
_IMPORT = re.compile(r"\bdask\.(diagnostics|callbacks)\b")

# localsched's Callback registers with dask's registry too (so that dask's
# schedulers fire it) once localsched/callbacks.py has ``_dask_callback``.
needs_dask_registration = pytest.mark.xfail(
    "_dask_callback" not in vars(Callback),
    reason="needs localsched.callbacks to put registered Callbacks in dask's registry",
    strict=True,
)


def dask_tests_dir() -> Path:
    path = Path(dask.__file__).parent / "diagnostics" / "tests"
    if not all((path / name).is_file() for name in SUITE):
        if os.environ.get("CI"):
            pytest.fail(f"dask's diagnostics tests are not installed under {path}")
        pytest.skip(f"dask's diagnostics tests are not installed under {path}")
    return path


def rewrite(source: str) -> str:
    """Point dask's diagnostics imports at localsched's; refuse anything left over."""
    out = _IMPORT.sub(r"localsched.\1", source)
    assert not re.search(r"\bdask\.(diagnostics|callbacks)\b", out)
    return out


def test_rewrite_points_every_diagnostics_import_at_localsched():
    source = (dask_tests_dir() / "test_profiler.py").read_text(encoding="utf-8")
    rewritten = rewrite(source)
    assert "from localsched.diagnostics import CacheProfiler, Profiler, ResourceProfiler" \
        in rewritten
    # the graphs still run on dask's own scheduler
    assert "from dask.threaded import get" in rewritten


@needs_dask_registration
def test_dask_diagnostics_tests_pass_against_localsched(tmp_path):
    source_dir = dask_tests_dir()
    for name in SUITE:
        source = (source_dir / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(rewrite(source), encoding="utf-8")
    report = tmp_path / "report.xml"
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "-o", "addopts=", "--timeout", "60", f"--junitxml={report}",
        *[f"--deselect={name}" for name in DESELECTED],
        *SUITE,
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert report.exists(), proc.stdout + proc.stderr
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        name = f"{case.get('classname').split('.')[-1]}.py::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[name] = kinds[0] if kinds else "passed"
    not_passed = {name: kind for name, kind in outcomes.items() if kind != "passed"}
    assert not_passed == {}, proc.stdout[-5000:]
    assert proc.returncode == 0, proc.stdout[-5000:]
    # the whole suite ran: every test dask has there, minus the deselected ones
    assert len(outcomes) >= 25
    assert not set(DESELECTED) & set(outcomes)


def inc(x):
    return x + 1


DSK = {"x": 1, "a": (inc, "x"), "b": (inc, "a"), "c": (max, "a", "b")}


@needs_dask_registration
def test_profilers_time_and_free_under_dasks_own_scheduler():
    """dask's state is a plain dict without timing or freed keys: the
    profilers time tasks from pretask to posttask and read frees from it."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from dask.threaded import get as dask_get

    from localsched.diagnostics import CacheProfiler, Profiler

    # A pool of our own: dask's default one would outlive the test.
    with ThreadPoolExecutor(2) as pool, Profiler() as prof, CacheProfiler() as cprof:
        before = time.time()
        assert dask_get(DSK, "c", pool=pool) == 3
        after = time.time()
    records = {r.key: r for r in prof.results}
    assert sorted(records) == ["a", "b", "c"]
    for r in records.values():
        assert before <= r.start_time <= r.end_time <= after
        assert isinstance(r.worker_id, int)
    assert records["a"].end_time <= records["b"].start_time
    cached = {r.key: r for r in cprof.results}
    assert sorted(cached) == ["a", "b", "c"]
    # 'a' leaves the cache when 'c', its last dependent, ends
    assert cached["a"].free_time == cached["c"].cache_time
    assert cached["b"].free_time == cached["c"].cache_time
    assert all(r.cache_time <= r.free_time <= after for r in cached.values())


def test_registered_profiler_fires_once_per_task_on_localsched_with_dask_imported():
    """dask's registry is read by localsched's schedulers too: a Callback in
    both must not fire twice."""
    from localsched.diagnostics import Profiler
    from localsched.threaded import get

    seen = []
    prof = Profiler()
    counter = Callback(posttask=lambda key, result, dsk, state, wid: seen.append(key))
    prof.register()
    counter.register()
    try:
        assert get(DSK, "c") == 3
    finally:
        prof.unregister()
        counter.unregister()
    assert sorted(r.key for r in prof.results) == ["a", "b", "c"]
    assert sorted(seen) == ["a", "b", "c"]
    assert not any(type(cb).__name__ == "_ForDask" for cb in dask.callbacks.Callback.active)
