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
diagnostics live in ``localsched.diagnostics``.  Heavy modules load lazily.
"""

from __future__ import annotations

from .callbacks import Callback
from .delayed import Delayed, compute, delayed
from .threaded import get

__version__ = "0.1.0"

__all__ = ["get", "get_sync", "compute", "delayed", "Delayed", "Callback", "__version__"]


def __getattr__(name: str):
    # PEP 562: submodules and names that need them, on first use.
    if name == "get_sync":
        from .local import get_sync

        return get_sync
    if name in ("diagnostics", "multiprocessing", "local", "threaded", "core", "graph", "order"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'localsched' has no attribute {name!r}")
