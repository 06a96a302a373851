"""pytest plugin: localsched as dask's default scheduler for a whole run.

Loaded by ``run_dask_suites.py`` (``-p dask_conformance.localsched_default``).
``$LOCALSCHED_DEFAULT`` chooses the get function set globally with
``dask.config.set(scheduler=...)`` before any test is imported:
``threads`` (``localsched.get``, the default), ``sync``, ``processes``, or
``dask`` (nothing set: the baseline run with dask's own schedulers).  With
``$LOCALSCHED_SWAP_NAMED=1`` the scheduler names ("threads", "sync",
"processes") also resolve to localsched, as in the conformance harness.

``like-dask`` sets no global scheduler: it swaps the names as above and gives
each collection class localsched's counterpart of its own default (bags:
processes; arrays, dataframes, delayed: threads).  Use it for tests that rely
on a collection's default, e.g. a bag test that configures a
``ProcessPoolExecutor`` as ``pool``, which a threaded get cannot feed.

A test that sets its own scheduler (``scheduler="sync"``, ``with
dask.config.set(scheduler=...)``) still gets the one it asked for.
"""

from __future__ import annotations

import os


def pytest_configure(config):
    mode = os.environ.get("LOCALSCHED_DEFAULT", "threads")
    if mode == "dask":
        return
    if mode == "like-dask":
        swap_collection_defaults()
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


def swap_collection_defaults() -> None:
    """Named schedulers and every loaded dask collection's default scheduler
    (``__dask_scheduler__``, module-level ``DEFAULT_GET``) -> localsched's."""
    import importlib
    import sys

    from .localsched_swap import install_swaps

    for package in ("dask.array", "dask.bag", "dask.delayed", "dask.dataframe"):
        try:
            importlib.import_module(package)
        except ImportError:  # e.g. dask.dataframe without pyarrow
            pass
    replaced = install_swaps()
    for name, module in list(sys.modules.items()):
        if not name.startswith("dask.") or module is None:
            continue
        if getattr(module, "DEFAULT_GET", None) in replaced:
            module.DEFAULT_GET = replaced[module.DEFAULT_GET]
        for value in list(vars(module).values()):
            own = vars(value).get("__dask_scheduler__") if isinstance(value, type) else None
            if isinstance(own, staticmethod) and own.__func__ in replaced:
                value.__dask_scheduler__ = staticmethod(replaced[own.__func__])


def pytest_report_header(config):
    import localsched

    mode = os.environ.get("LOCALSCHED_DEFAULT", "threads")
    return [f"default scheduler: {mode}; localsched from {os.path.dirname(localsched.__file__)}"]
