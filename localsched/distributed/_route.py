"""The hook into dask's scheduler choice.

With a default Client, dask sends ``x.compute()`` to ``client.get`` (the
``"dask.distributed"`` scheduler name a default Client sets in dask's
config), so no callback of dask's or ours would see it
(dask/distributed#1011).  While any localsched callback is registered at
top level, ``dask.base.named_schedulers`` maps ``"dask.distributed"`` and
``"distributed"`` to ``OBSERVER.get``: the same ``client.get`` of the same
Client with the same arguments, observed (``_get.observe``).  Its
``persist`` is the Client's own, so ``dask.persist`` still returns futures.
Outside the registration the entries are restored: dask's own path is
untouched.

What this hook does not see: ``dask.compute(x, scheduler=client)`` and a
Client made current only by ``with client.as_current():`` (dask calls
``client.get`` without consulting the names), and futures
(``client.compute``, ``submit``, ``map``, ``persist``): they run exactly as
without localsched, unobserved.

The registry tells this module of registrations through
``localsched.callbacks.on_registration`` (subscribed when this package is
imported): the base protocol knows nothing of clusters.
"""

from __future__ import annotations

import sys
import threading

from ..system.forking import at_fork_in_child

_lock = threading.Lock()
_saved: dict = {}  # what dask's named_schedulers held before the hook


@at_fork_in_child
def _renew_in_child() -> None:
    global _lock
    _lock = threading.Lock()


class _Observer:
    """Stands in dask's scheduler names: ``get`` observes the current
    Client's ``get``; every other attribute (``persist``...) is the
    Client's own."""

    @staticmethod
    def _client():
        from distributed import Client
        from distributed.worker import get_client

        try:
            Client.current(allow_global=True)
        except ValueError:
            raise RuntimeError("Requested dask.distributed scheduler but no Client active.") \
                from None
        return get_client()

    def get(self, dsk, keys, **kwargs):
        from .. import callbacks as _callbacks

        client = self._client()
        if client.asynchronous or _callbacks.in_computation():
            # (dask's own rules for these: nothing to observe)
            from dask.base import get_scheduler

            return get_scheduler(scheduler=client)(dsk, keys, **kwargs)
        from ._get import observe

        return observe(client, dsk, keys, kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):  # (introspection: pickle, doctest, copy...)
            raise AttributeError(name)
        return getattr(self._client(), name)


OBSERVER = _Observer()


def on_registration(anything_registered: bool) -> None:
    """Hook the names in while a localsched callback is registered."""
    base = sys.modules.get("dask.base")
    if base is None:
        return
    named = base.named_schedulers
    with _lock:
        if anything_registered and not _saved:
            for name in ("dask.distributed", "distributed"):
                _saved[name] = named.get(name)
                named[name] = OBSERVER.get
        elif not anything_registered and _saved:
            for name, old in _saved.items():
                if named.get(name) == OBSERVER.get:
                    if old is None:
                        named.pop(name, None)
                    else:
                        named[name] = old
            _saved.clear()
