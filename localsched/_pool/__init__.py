"""localsched's process pool, and the shared-memory transport it carries.

The rooms, lowest first (each imports only those above it; none imports the
scheduler, ``localsched.core``)::

    job        what a worker process knows of its current job (pid, arrival,
               pickling seconds): globals the batch runner reads
    segment_kinds  where a segment's bytes live: files in /dev/shm (Linux)
               or POSIX shared-memory objects with a journal of names (macOS)
    named_mappings  Windows' named mappings (a writer holds what it wrote
               until its owner does), and their simulation on Linux
    kind_in_use  the kind this process uses, chosen once per process
    segments   the segment store: owner names and lock, the reaper, writing,
               the free list, releases applied from an event queue, sweeps
    handles    SharedValue, mapping a segment (no descriptor kept in the
               owner), the Inbox a computation's records arrive in
    oob        out-of-band pickling; value or handle, chosen per unpickler
    shm        the transport facade the scheduler is given (``transport=shm``)
    protocol   the messages between the pool and its workers, exceptions
    taskslot   the few shared bytes where a worker says which task it runs,
               read by the pool when it dies
    worker     the worker process's main loop
    workers    worker handles as the pool sees them: states, start methods
    listener   the listener thread: routes messages, reaps, hands out work
    pool       ProcessPool, the concurrent.futures Executor facade
    submit     how ``localsched.multiprocessing.get`` runs batches on any pool

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
        from ..options import pool_size  # one helper for every pool type

        return pool_size
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
