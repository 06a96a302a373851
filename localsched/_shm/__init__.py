"""localsched's shared memory: the zero-copy transport of the process pool.

Large buffers of a value (NumPy arrays, pandas columns, anything pickle
protocol 5 hands out of band) travel in *segments*, named shared memory
written once and mapped (or copied once) by the next process, instead of
through the pool's pipes.  The process pool (``localsched._pool``) carries
the handles in its messages; this package knows nothing of the pool.

The rooms, lowest first (each imports only those above it, and
``localsched.system.platform``; none imports the pool or the scheduler)::

    kinds          where a segment's bytes live, and the rules every kind
                   keeps beside other users: files in /dev/shm (Linux),
                   POSIX shared-memory objects with a journal of names
                   (macOS, the BSDs)
    named_mappings Windows' named mappings (a writer holds what it wrote
                   until its owner does), and their simulation on Linux
    kind_in_use    a platform value's kind of segment, made once per process
    room           the room left: a reading of the directory, reused for a
                   moment while far from the reserve
    store          the segment store, kind-neutral, one per platform value
                   (holding it and its kind): owner names and lock,
                   the reaper, writing, the free list (descriptors the
                   owner holds), releases applied from an event queue,
                   sweeps
    worker_side    the worker's side (the owner lock it holds, what a job
                   writes), an object per worker with its own fork reset
    handles        SharedValue, mapping a segment (no descriptor kept in
                   the owner), the Inbox a computation's records arrive in
    oob            out-of-band pickling; value or handle, chosen per
                   unpickler
    transport      the facade the scheduler is given (``Transport(platform)``:
                   the pool's platform, as the pool was given it)

One public question, for diagnostics and the memory budget:
``bytes_held()``.  Nothing here is imported by ``import localsched``.
"""

from __future__ import annotations

import sys

__all__ = ["bytes_held"]


def bytes_held() -> int:
    """Bytes of shared memory this process's store holds that are in no
    process's resident set: the live segments it holds as handles and
    does not map itself, plus its free list (segments kept for reuse).
    0 when this process has no store (it never ran the process pool with
    shared memory); else the sum over its stores (one per platform value a
    pool ran as: the tests' simulations).  Cheap (no system call), safe
    from any thread; workers that map an input count it in their own
    RSS, which this does not subtract.

    >>> bytes_held() >= 0
    True
    """
    store_module = sys.modules.get(f"{__name__}.store")
    if store_module is None:  # (never imported: nothing held)
        return 0
    return store_module.held_bytes()
