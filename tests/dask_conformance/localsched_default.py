"""pytest plugin: localsched as dask's default scheduler for a whole run.

Loaded by ``run_dask_suites.py`` (``-p dask_conformance.localsched_default``).
``$LOCALSCHED_DEFAULT`` chooses the get function set globally with
``dask.config.set(scheduler=...)`` before any test is imported:
``threads`` (``localsched.get``, the default), ``sync``, ``processes``, or
``dask`` (nothing set: the baseline run with dask's own schedulers).  With
``$LOCALSCHED_SWAP_NAMED=1`` the scheduler names ("threads", "sync",
"processes") also resolve to localsched, as in the conformance harness.

A test that sets its own scheduler (``scheduler="sync"``, ``with
dask.config.set(scheduler=...)``) still gets the one it asked for.
"""

from __future__ import annotations

import os


def pytest_configure(config):
    mode = os.environ.get("LOCALSCHED_DEFAULT", "threads")
    if mode == "dask":
        return
    import dask
    import localsched.local
    import localsched.multiprocessing
    import localsched.threaded

    get = {
        "threads": localsched.threaded.get,
        "sync": localsched.local.get_sync,
        "processes": localsched.multiprocessing.get,
    }[mode]
    dask.config.set(scheduler=get)  # not as a context manager: for the whole run
    if os.environ.get("LOCALSCHED_SWAP_NAMED") == "1":
        from .localsched_swap import install_swaps

        install_swaps()


def pytest_report_header(config):
    import localsched

    mode = os.environ.get("LOCALSCHED_DEFAULT", "threads")
    return [f"default scheduler: {mode}; localsched from {os.path.dirname(localsched.__file__)}"]
