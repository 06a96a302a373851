"""Which cluster a computation runs on, and the Clients this package owns.

``default_client(client, address)`` picks, in this order: ``client=``;
``address=`` (a Client to that scheduler, made on first use, reused,
closed at exit); the current default Client; an embedded cluster on this
machine, started on first use, reused, and closed at exit (or by
``shutdown()``).

The embedded cluster runs its scheduler and workers in subprocesses of
their own (``dask spec`` processes in dask.distributed's ``SpecCluster``,
as its ``SubprocessCluster`` makes them; ``_embedded`` starts and stops
them).  A ``LocalCluster`` would start its worker processes with
multiprocessing's spawn, which re-imports the caller's ``__main__``: a
script without an ``if __name__ == "__main__":`` guard would then start a
cluster inside every worker it starts ("Nanny failed to start").  The
subprocesses import only dask's command line, so no guard is needed.  They
close on SIGTERM, leaving nothing behind, and go with this process when it
is killed.  (On Windows, where ``dask spec`` subprocesses are not
supported, a LocalCluster is used and scripts need the guard.)
"""

from __future__ import annotations

import atexit
import threading

from ..system import platform as _platform
from ..system.forking import at_fork_in_child

_lock = threading.Lock()
_embedded: list = []  # [cluster, Client] once started
_by_address: dict = {}  # address -> Client
_exit_hooked: list = []


@at_fork_in_child
def _renew_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    # The cluster and Clients are the parent's (their IO loops run there)
    _embedded.clear()
    _by_address.clear()


def default_client(client=None, address: str | None = None):
    """The Client a computation uses (see the module docstring for the order).

    >>> from distributed import LocalCluster, Client
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as lc, \\
    ...         Client(lc) as c:
    ...     default_client() is c
    True
    """
    from distributed import Client

    if client is not None:
        if not isinstance(client, Client):
            raise TypeError(f"client= must be a distributed.Client, got {client!r}")
        return client
    if address is not None:
        with _lock:
            c = _by_address.get(address)
            if c is None or c.status not in ("running", "connecting", "newly-created"):
                c = _by_address[address] = Client(address, set_as_default=False)
                _ensure_exit_hook()
            return c
    try:
        return Client.current(allow_global=True)
    except ValueError:
        pass
    with _lock:
        if not _embedded or _embedded[1].status != "running":
            cluster = _start_embedded()
            _embedded[:] = [cluster, Client(cluster, set_as_default=False)]
            _ensure_exit_hook()
        return _embedded[1]


def _start_embedded():
    """A cluster on this machine whose processes never import ``__main__``
    (where processes have sessions and POSIX signals, which the embedded
    cluster's clean stop needs: elsewhere dask's LocalCluster)."""
    if not _platform.SESSIONS_AND_SIGNALS:
        from distributed import LocalCluster

        return LocalCluster(host="127.0.0.1", dashboard_address="127.0.0.1:0")
    from dask.system import CPU_COUNT
    from distributed.deploy.utils import nprocesses_nthreads

    from . import _embedded

    n_workers, threads = nprocesses_nthreads(CPU_COUNT)
    return _embedded.start(n_workers, threads)


def _ensure_exit_hook() -> None:
    if not _exit_hooked:
        _exit_hooked.append(True)
        atexit.register(shutdown)


def shutdown() -> None:
    """Close the Clients this package made (``address=``) and the embedded
    cluster, if any.  The next computation starts afresh.

    >>> shutdown()
    """
    with _lock:
        clients = list(_by_address.values())
        _by_address.clear()
        embedded = list(_embedded)
        _embedded.clear()
    for c in clients + embedded[1:]:
        try:
            c.close()
        except Exception:  # noqa: BLE001, S110 -- closing at exit: nothing to report to
            pass
    if embedded:
        try:
            embedded[0].close()
        except Exception:  # noqa: BLE001, S110 -- closing at exit
            pass
