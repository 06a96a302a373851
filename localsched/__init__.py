"""localsched: run task graphs fast on one machine, and see where the time went.

>>> import localsched
>>> from operator import add
>>> localsched.get({'a': 1, 'b': (add, 'a', 2)}, 'b')
3
>>> total = localsched.delayed(sum)([localsched.delayed(abs)(-i) for i in range(4)])
>>> total.compute()
6

The schedulers: ``localsched.get`` (threads, the default),
``localsched.local.get_sync``, ``localsched.multiprocessing.get``.  The
diagnostics live in ``localsched.diagnostics``; ``localsched.performance_report``
records everything a block of code computes and writes one HTML report (see
``localsched.diagnostics.report``).  Heavy modules load lazily.
"""

from __future__ import annotations

import importlib
import sys as _sys

# Companion mode subscribes to callback registrations (so that ``with
# Profiler(): x.compute()`` under a default dask.distributed Client is
# observed); it imports neither dask nor distributed until a computation
# needs them.
from . import distributed as _companion  # noqa: E402,F401

# Imported eagerly: the submodule ``localsched.delayed`` would otherwise
# shadow the function of the same name once anything imported it.
from .delayed import Delayed, compute, delayed

__version__ = "0.1.0"

__all__ = ["get", "get_sync", "compute", "delayed", "Delayed", "Callback", "span",
           "performance_report", "__version__"]

# PEP 562: public names load their modules on first use, so ``import
# localsched`` stays cheap (the thread pool machinery pulls in logging).
_LAZY = {
    "get": ("threaded", "get"),
    "get_sync": ("local", "get_sync"),
    "Callback": ("callbacks", "Callback"),
    "span": ("metrics", "span"),
    "performance_report": ("diagnostics.report", "performance_report"),
}
_SUBMODULES = {"callbacks", "core", "delayed", "diagnostics", "graph", "local",
               "multiprocessing", "order", "threaded", "utils", "cli", "metrics"}


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'localsched' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)


# LOCALSCHED_DASHBOARD=1 (or an address), or dask's config key
# localsched.dashboard when dask is already imported, serves the live
# dashboard with no code change (localsched.diagnostics.live.from_environment);
# only then is anything more imported.
from .system import settings as _settings  # noqa: E402  (after the exports above)

if (_settings.text("LOCALSCHED_DASHBOARD") or _settings.text("DASK_LOCALSCHED__DASHBOARD")
        or ("dask.config" in _sys.modules
            and _sys.modules["dask.config"].get("localsched.dashboard", None))):
    from .diagnostics.live import from_environment as _from_environment

    _from_environment()
