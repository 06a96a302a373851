"""localsched's process pool.

The rooms, lowest first (each imports only those above it; none imports the
scheduler, ``localsched.run.core``)::

    job        what a worker process knows of its current job (pid, arrival,
               pickling seconds): globals the batch runner reads
    protocol   the messages between the pool and its workers, exceptions
    taskslot   the few shared bytes where a worker says which task it runs,
               read by the pool when it dies
    worker     the worker process's main loop
    workers    worker handles as the pool sees them: states, start methods
    jobs       a job as the pool sees it, and what it held when it ends
    listener   the listener thread: routes messages, reaps, hands out work
    pool       ProcessPool, the concurrent.futures Executor facade
    submit     how ``localsched.multiprocessing.get`` runs batches on any pool

Large values travel in shared memory, ``localsched._shm`` (its own
package: the pool imports it, never the reverse); the pool carries the
handles in its messages, holds a job's inputs and lent free segments
(``jobs``), and sweeps a dead worker's unreported segments by its job's
name prefix.

``submitter_for(pool)`` says how the process scheduler runs batches on a
pool, ours or a foreign one; ``pool_size(pool)`` how many tasks that pool
runs at once.  Names are exported lazily, so importing ``_pool.job`` (the
batch runner does) starts no process machinery.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ProcessPool", "WorkerDiedError", "BrokenProcessPool", "WorkerState",
           "WorkerStateError", "RemoteTraceback", "RemoteError", "dumps",
           "unpack_exception", "START_METHODS", "pool_size", "submitter_for", "Submitter"]

_WHERE = {
    "ProcessPool": "pool", "WorkerDiedError": "pool", "BrokenProcessPool": "pool",
    "START_METHODS": "pool", "WorkerState": "pool", "WorkerStateError": "pool",
    "RemoteTraceback": "protocol", "RemoteError": "protocol", "dumps": "protocol",
    "unpack_exception": "protocol", "submitter_for": "submit", "Submitter": "submit",
}


def __getattr__(name: str) -> Any:
    if name == "pool_size":
        from ..system.options import pool_size  # one helper for every pool type

        return pool_size
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
