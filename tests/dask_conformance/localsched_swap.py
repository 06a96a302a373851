"""pytest plugin: run dask's scheduler tests with localsched's get functions.

Loaded with ``-p dask_conformance.localsched_swap`` into the pytest run that
``harness.run_suite`` starts on copies of dask's test files.  It

1. points dask's public scheduler entry points at localsched's before any test
   module is imported (``pytest_configure``):  the module attributes
   ``dask.local.get_sync``, ``dask.threaded.get``, ``dask.multiprocessing.get``
   and the string table ``dask.base.named_schedulers``, so that
   ``scheduler="threads"`` / ``"processes"`` / ``"sync"`` in ``compute`` and
   ``dask.config.set`` reach localsched, and dask's own identity checks
   (``dask.utils.get_scheduler_lock`` compares with
   ``dask.multiprocessing.get``) treat localsched's process get as the process
   scheduler.  ``dask.callbacks.Callback`` is *not* patched here: dask's
   diagnostics subclass it and ``dask.callbacks.local_callbacks`` reads it as a
   module global, so swapping the attribute would change dask's internals, not
   only what the tests see.  The test files' own imports of ``Callback`` (and of
   the get functions) are rewritten in the copies instead (``harness.rewrite``);
2. marks as skipped, with the written reason, the few tests that exercise dask
   internals rather than the scheduler contract (``NOT_THE_CONTRACT``), and
   refuses to run if one of them no longer exists (the list must not rot);
3. refuses to run if a test module still holds one of dask's original get
   functions or dask's Callback as a module global (a swap that missed);
(The outcomes reach the harness through the ``reporting`` plugin.)

Nothing here runs unless pytest loads it as a plugin; importing it (as
``--doctest-modules`` does) has no side effects.
"""

from __future__ import annotations

import os

import pytest

#: (dask module, name) -> (localsched module, name): the public entry points
#: swapped, both in the test files' imports and as dask module attributes.
SWAPPED_GETS = {
    ("dask.local", "get_sync"): ("localsched.local", "get_sync"),
    ("dask.threaded", "get"): ("localsched.threaded", "get"),
    ("dask.multiprocessing", "get"): ("localsched.multiprocessing", "get"),
}
#: Swapped only in the test files' imports (see the module docstring).
SWAPPED_CALLBACK = {
    ("dask.callbacks", "Callback"): ("localsched.callbacks", "Callback"),
    ("dask.diagnostics", "Callback"): ("localsched.callbacks", "Callback"),
}
#: dask's diagnostics, swapped in the test files' imports for localsched's.
SWAPPED_DIAGNOSTICS = {
    ("dask.diagnostics", name): ("localsched.diagnostics", name)
    for name in ("Profiler", "ResourceProfiler", "CacheProfiler", "ProgressBar")
}
SWAPPED_NAMES = {**SWAPPED_GETS, **SWAPPED_CALLBACK, **SWAPPED_DIAGNOSTICS}

#: Every skip this plugin adds starts with this, so the harness can tell them
#: from skips it did not expect.
SKIP_PREFIX = "not localsched's contract: "

_START_STATE = "tests dask.local.start_state_from_dask, dask's internal state builder"
#: Tests that call dask's internal helpers directly and never reach a get
#: function: they would pass whatever localsched does, so running them would
#: only inflate the count.  Keep this minimal; each entry says why.
NOT_THE_CONTRACT = {
    "test_local.py::test_start_state": _START_STATE,
    "test_local.py::test_start_state_looks_at_cache": _START_STATE,
    "test_local.py::test_start_state_with_redirects": _START_STATE,
    "test_local.py::test_start_state_with_independent_but_runnable_tasks": _START_STATE,
    "test_local.py::test_start_state_with_tasks_no_deps": _START_STATE,
    "test_local.py::test_finish_task": "tests dask.local.finish_task on a hand-built dask state",
    "test_local.py::test_sort_key": "tests dask.local.sortkey, a key-sorting helper",
    "test_multiprocessing.py::test_pickle_globals": "tests dask.multiprocessing._dumps",
    "test_multiprocessing.py::test_pickle_locals": "tests dask.multiprocessing._dumps",
    "test_multiprocessing.py::test_out_of_band_pickling":
        "tests dask.multiprocessing._dumps/_loads",
    "test_multiprocessing.py::test_remote_exception":
        "tests dask.multiprocessing.remote_exception, dask's error wrapper",
    "test_profiler.py::test_profiler":
        "asserts that Profiler records hold dask's internal Task objects (TaskData.task): "
        "localsched's scheduler hands callbacks the task as the user's graph gives it. The "
        "test passes where dask's scheduler runs the graph: "
        "tests/diagnostics/test_dask_diagnostics_suite.py runs it that way in CI",
    "test_callbacks.py::test_start_state_callback":
        "asserts that callbacks receive dask's internal task objects (dsk['x']() calls a "
        "DataNode dask converted the graph to); localsched hands callbacks the graph as the "
        "user wrote it, where dsk['x'] is 1 (the start_state call itself is tested by "
        "test_callbacks.py::test_start_callback and tests/test_contract.py)",
    "test_multiprocessing.py::test_get_context_using_python3_posix":
        "tests dask.multiprocessing.get_context (the config it reads is tested through get "
        "by test_custom_context_used_python3_posix)",
}

_originals: dict = {}


def _resolve(module: str, name: str):
    import importlib

    return getattr(importlib.import_module(module), name)


def install_swaps() -> dict:
    """Point dask's get attributes and named-scheduler table at localsched.

    Returns ``{dask function: localsched function}`` for the swapped gets.
    """
    import importlib

    import dask.base

    replaced = {}
    for (dask_mod, name), (ours_mod, ours_name) in SWAPPED_GETS.items():
        module = importlib.import_module(dask_mod)
        original = getattr(module, name)
        ours = _resolve(ours_mod, ours_name)
        replaced[original] = ours
        setattr(module, name, ours)
    for scheduler_name, fn in list(dask.base.named_schedulers.items()):
        if fn in replaced:
            dask.base.named_schedulers[scheduler_name] = replaced[fn]
    return replaced


def pytest_configure(config):
    replaced = install_swaps()
    _originals.update({fn: "dask" for fn in replaced})
    _originals[_resolve("dask.callbacks", "Callback")] = "dask"


def pytest_report_header(config):
    import localsched

    return [f"localsched under test: {os.path.dirname(localsched.__file__)}"]


def _base_id(nodeid: str) -> str:
    """``dir/test_x.py::test_y[param]`` -> ``test_x.py::test_y``."""
    return os.path.basename(nodeid.split("[", 1)[0])


def pytest_collection_modifyitems(session, config, items):
    seen = set()
    checked_modules = set()
    for item in items:
        base = _base_id(item.nodeid)
        if base in NOT_THE_CONTRACT:
            seen.add(base)
            item.add_marker(pytest.mark.skip(reason=SKIP_PREFIX + NOT_THE_CONTRACT[base]))
        module = getattr(item, "module", None)
        if module is not None and module not in checked_modules:
            checked_modules.add(module)
            missed = [
                name for name, value in vars(module).items()
                if _is_original(value)
            ]
            if missed:
                raise pytest.UsageError(
                    f"{module.__file__} still uses dask's own {missed}: the swap missed them"
                )
    stale = {
        test for test in NOT_THE_CONTRACT
        if test.split("::")[0] in {os.path.basename(str(i.path)) for i in items}
        and test not in seen
    }
    if stale:
        raise pytest.UsageError(
            f"NOT_THE_CONTRACT names tests that dask no longer has: {sorted(stale)}"
        )


def _is_original(value) -> bool:
    try:
        return value in _originals
    except TypeError:  # unhashable module global
        return False
