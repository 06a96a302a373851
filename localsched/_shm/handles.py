"""Handles to segments, and mapping a segment into a value.

A ``SharedValue`` is a value whose large buffers live in a segment: its
name, size, the value's pickle without those buffers (``meta``) and each
buffer's place (``layout``).  Its owner (the store of the process that
received it) releases it explicitly or when the last reference goes; the
finalizer only reports it (``SegmentStore.events``).

Mapping, two ways:

- ``map_value`` in the process that owns the handle (the caller, whose
  outputs may be thousands): the mapping holds **no file descriptor**
  (``mmap(2)`` through ctypes, the descriptor closed at once; Python's
  ``mmap`` keeps a duplicate per mapping), so thousands of outputs need
  no descriptor at all.  The store counts the mapping, so a segment mapped
  here never goes into the free list for a worker to rewrite.
- ``map_locked`` in a worker (a job's inputs, a handful): Python's
  ``mmap``, whose descriptor keeps a shared ``flock`` for as long as the
  mapping lives, so no other worker rewrites those pages meanwhile.

Both map copy-on-write (``MAP_PRIVATE``): a task that writes into an input
gets private copies of the pages it writes and never changes what other
tasks see.  That is the files of Linux; the other kinds read through
their ``read_private`` (``kinds``): POSIX objects on macOS are
copied once into private memory, Windows' named mappings are mapped
copy-on-write by name.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import pickle
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..system.platform import Platform, descriptorless_mmap
from ..worker.records_wire import REC_VALUE
from . import store as segments
from .kinds import SegmentKind
from .store import SegmentStore, kind_of

__all__ = ["SharedValue", "map_value", "map_locked", "load", "release", "release_records",
           "Inbox", "from_wire"]


class SharedValue:
    """A value whose large buffers live in a shared-memory segment.

    ``load()`` maps the segment and gives the value, zero-copy;
    ``release()`` (or losing the last reference) lets the owner unlink or
    reuse the segment.  Pickled, it is only its fields: which of value or
    handle it becomes is the unpickler's choice (``oob``).
    """

    __slots__ = ("name", "size", "meta", "layout", "_store", "__weakref__")

    def __init__(self, name: str, size: int, meta: bytes, layout: tuple,
                 store: SegmentStore | None = None):
        self.name = name
        self.size = size
        self.meta = meta
        self.layout = layout
        self._store = store
        if store is not None:
            store.owned[name] = size
            store.kind.adopt(name)  # (where a writer holds it only until then)

    def __reduce__(self):
        return from_wire, (self.name, self.size, self.meta, self.layout)

    def load(self) -> Any:
        """The value, its buffers mapped from the segment (copy-on-write):
        of its store's kind; an unowned handle's, of the detected
        platform's."""
        store = self._store
        segment_kind = store.kind if store is not None else kind_of(Platform.detect())
        return map_value(_present(segment_kind), self.name, self.size, self.meta, self.layout,
                         store)

    def release(self) -> None:
        """Let the segment go (idempotent; only in the owning process: a
        forked child's copy of a handle owns nothing)."""
        store, self._store = self._store, None
        if store is not None and store.pid == os.getpid():
            store.release(self.name, self.size)

    def __del__(self):
        # No lock, no I/O: the store applies it later (``drain``).
        store = self._store
        if store is not None and store.pid == os.getpid():
            store.events.append(("r", self.name, self.size))

    def __repr__(self) -> str:
        return f"<SharedValue {self.name} {self.size} bytes>"


def from_wire(name: str, size: int, meta: bytes, layout: tuple) -> SharedValue:
    """What a plain ``pickle.loads`` makes of a handle: one owned by no one
    (``oob``'s unpicklers make owned handles or mapped values instead)."""
    return SharedValue(name, size, meta, layout)


# -- mapping ---------------------------------------------------------------------

# (None where there is no C mmap: no shared memory there either, see _platform)
_mmap, _munmap = descriptorless_mmap() or (None, None)
_MAP_FAILED = ctypes.c_void_p(-1).value


def _unmapped(address: int, size: int, events, name: str) -> None:
    # A finalizer: releases the pages (no lock, no I/O) and tells the store.
    _munmap(address, size)
    if events is not None:
        events.append(("u", name))


def _present(segment_kind: SegmentKind | None) -> SegmentKind:
    if segment_kind is None:
        raise FileNotFoundError("this platform has no shared memory")
    return segment_kind


def _copied(segment_kind: SegmentKind, name: str, size: int, meta: bytes, layout: tuple,
            loads: Callable) -> Any:
    view = segment_kind.read_private(name, size)
    return loads(meta, buffers=[view[o:o + n] for o, n in layout])


def map_value(segment_kind: SegmentKind, name: str, size: int, meta: bytes, layout: tuple,
              store: SegmentStore | None = None) -> Any:
    """The value, mapped with no descriptor kept (see the module docstring)."""
    if not segment_kind.maps_by_descriptor:
        return _copied(segment_kind, name, size, meta, layout, pickle.loads)
    fd = segment_kind.open_for_reading(name)
    try:
        address = _mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, fd, 0)
        if address is None or address == _MAP_FAILED:
            errno = ctypes.get_errno()
            raise OSError(errno, f"cannot map {name}: {os.strerror(errno)}")
    finally:
        os.close(fd)
    pages = (ctypes.c_ubyte * size).from_address(address)
    events = store.events if store is not None else None
    if events is not None:
        events.append(("m", name))
    weakref.finalize(pages, _unmapped, address, size, events, name)
    view = memoryview(pages).cast("B")
    return pickle.loads(meta, buffers=[view[o:o + n] for o, n in layout])


def map_locked(segment_kind: SegmentKind | None, name: str, size: int, meta: bytes,
               layout: tuple, loads: Callable = pickle.loads) -> Any:
    """The value, mapped with Python's mmap: its descriptor holds a shared
    lock while the mapping lives (a worker's inputs)."""
    segment_kind = _present(segment_kind)
    if not segment_kind.maps_by_descriptor:
        return _copied(segment_kind, name, size, meta, layout, loads)
    fd = segment_kind.open_for_reading(name)
    try:
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)
    finally:
        os.close(fd)
    view = memoryview(mm)
    return loads(meta, buffers=[view[o:o + n] for o, n in layout])


def load(value: Any) -> Any:
    """The value itself: a ``SharedValue`` loaded (zero-copy), anything else
    as it is.

    >>> load(3)
    3
    """
    return value.load() if type(value) is SharedValue else value


def release(value: Any) -> None:
    """Release ``value``'s segment now if it is a ``SharedValue``.

    >>> release(3)
    """
    if type(value) is SharedValue:
        value.release()


def release_records(records: list) -> None:
    """Release the handles in records nobody will read."""
    for r in records:
        if type(r) is tuple and len(r) > REC_VALUE and type(r[REC_VALUE]) is SharedValue:
            r[REC_VALUE].release()


class Inbox:
    """Where a computation's records arrive (``emit``): into the scheduler's
    queue while it runs; released on arrival once it has stopped, so that a
    batch still running after a failure leaves no segment behind, even while
    a traceback keeps the computation's queue alive.  While it runs, the
    store keeps released segments for reuse (``SegmentStore.running``):
    this process's store for ``platform``, the pool's."""

    __slots__ = ("_put", "_closed", "_lock", "_ended", "_store")

    def __init__(self, put: Callable[[Any], None], platform: Platform):
        self._put = put
        self._closed = False
        self._ended = False
        self._lock = threading.Lock()
        # (made here if shared memory can be used: the computation starts)
        self._store = segments.usable_store(platform)
        if self._store is not None:
            self._store.begin()

    def idle(self) -> None:
        """The scheduler waits for workers: apply releases, unlink what
        could not be kept."""
        store = self._store
        if store is not None:
            store.drain()
            store.unlink_deferred()

    def end(self) -> None:
        """The computation is over (call once it holds no handle it
        released): the free list goes if no other computation runs."""
        if self._ended:
            return
        self._ended = True
        if self._store is not None:
            self._store.end()

    def __call__(self, records: list) -> None:
        with self._lock:
            if not self._closed:
                self._put(records)
                return
        release_records(records)

    def abandon(self, cache: dict, queued: Callable[[], list]) -> None:
        """The computation stopped: release the handles in ``cache`` and in
        the record lists ``queued()`` drains, and every one that arrives
        from now on."""
        with self._lock:
            self._closed = True
        for item in queued():
            if type(item) is list:
                release_records(item)
        for k, v in list(cache.items()):
            if type(v) is SharedValue:
                v.release()
                del cache[k]
        self.end()
