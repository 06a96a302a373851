"""Companion mode: localsched's callbacks and diagnostics on a
dask.distributed cluster, observing and never replacing what
dask.distributed does.

Design.  A computation on a cluster always runs through dask.distributed's
own client path: ``client.get(graph, keys, sync=False)``, then
``client.gather`` (what ``Client.get`` does).  So persisted collections,
futures as inputs, annotations, P2P shuffles and every error behave as
under a plain Client.  localsched listens: a scheduler plugin streams the
scheduler's view of the graph and each task's dispatch and end to the
Client, and the five hooks fire from that stream in the caller's thread.
The rooms, imports pointing down only::

    __init__      this note; ``get``; subscribes ``_route`` to registrations
    _get          the front doors: ``get`` (ours) and ``observe`` (dask's client.get)
    _route        the hook into dask's scheduler choice (``named_schedulers``)
    _computation  one computation: send, pump events into hooks, barrier, gather
    _rerun        ``rerun_exceptions_locally``: the failed task alone, here
    _state        ``ClusterState``: dask's state fields from the scheduler's view
    _stream       the Client's event subscription, routing, the clock offset
    _plugin       the scheduler plugin and the functions run on the cluster
                  (shipped by value: stdlib and distributed only)
    _detail       the worker tier's detail (fine metrics, samples, transfers,
                  monitors) and ``WorkerTier``
    _clusters     which cluster: ``client=``, ``address=``, the default Client,
                  an embedded cluster (no ``__main__`` guard needed)
    _embedded     the embedded cluster: dask's SpecCluster of ``dask spec``
                  processes that close on SIGTERM and follow their parent

Which cluster ``get`` uses: ``client=``; else ``address=``; else the
current default Client; else an embedded cluster on this machine, whose
processes never import the caller's ``__main__`` (no ``if __name__ ==
"__main__":`` guard needed) and go with the caller, leaving nothing
behind (``_clusters``).

The hooks:

``start(dsk)``
    before the graph is sent (``dsk``: the graph given; an expression from
    dask is materialized only if a callback reads it);
``start_state(dsk, state)``
    when the scheduler has the graph; ``state`` (:class:`ClusterState`)
    has dask's fields, from the scheduler's view; keys the cluster already
    held are in ``state.cache`` and never run;
``pretask(key, dsk, state)``
    when the scheduler **dispatches** the task to a worker (the worker may
    hold it queued; its true start is ``state.timing[0]`` at posttask);
``posttask(key, result, dsk, state, worker_id)``
    when the task ended; ``result`` is **None** (results stay on the
    workers); ``state.timing`` the worker's compute start and end;
    ``worker_id`` ``"<worker address>#<thread number>"``; ``state.task.nbytes``
    the result's size as the cluster measured it;
``finish(dsk, state, errored)``
    once, after the last posttask, on every exit path.

One clock: every time a callback sees is on the caller's clock (the
scheduler's clock minus ``state.clock_offset``, estimated from the midpoint
of a round trip, as distributed's workers estimate ``scheduler_delay``).

Failures are dask.distributed's own; ``finish`` fires with
``errored=True`` and the next computation works (``ClusterComputation``).

>>> from operator import add
>>> from distributed import LocalCluster, Client
>>> from localsched.distributed import get
>>> with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as lc, \\
...         Client(lc) as client:
...     get({'a': 1, 'b': (add, 'a', 2)}, ['a', 'b'], client=client)
(1, 3)
"""

from __future__ import annotations

import importlib

from .. import callbacks as _callbacks
from . import _route

__all__ = ["ClusterState", "WorkerTier", "default_client", "get", "shutdown"]

# Loaded on first use: ``import localsched`` imports this package (for the
# subscription below) and must stay cheap.
_LAZY = {"get": "_get", "shutdown": "_clusters", "default_client": "_clusters",
         "ClusterState": "_state", "WorkerTier": "_detail"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


_callbacks.on_registration(_route.on_registration)
