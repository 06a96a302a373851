"""Out-of-band pickling: values with large buffers travel as handles to
segments, the rest of the pickle through the pipe.

Pickle protocol 5 hands a pickler's ``buffer_callback`` every large
contiguous buffer an object exposes (NumPy arrays, pandas columns through
their arrays, ``bytearray``, anything returning a ``PickleBuffer``).
Buffers of at least the threshold are written once into a segment
(``segments``), and a ``SharedValue`` handle to it takes their place.

Value or handle is the *unpickler's* choice, never a process-wide flag:

- ``loads_records(body, store)`` (the pool's listener, in whatever process
  runs the pool, a worker running a nested computation included) makes
  each handle an owned ``SharedValue``: the scheduler keeps it in its cache
  and releases it with the cache entry;
- ``loads_job(body)`` (a worker reading its job) maps each handle: the
  task gets the value, zero-copy (``handles.map_locked``);
- a plain ``pickle.loads`` makes an unowned handle.

Both override ``find_class`` for ``handles.from_wire`` only, so a pickle
without handles costs one Python call per global at most.

>>> import numpy as np
>>> big = np.arange(100_000, dtype="f8")
>>> meta, buffers = dumps_oob(big, 64 * 1024)
>>> len(meta) < 200, [b.nbytes for b in buffers]
(True, [800000])
"""

from __future__ import annotations

import io
import pickle
import struct
import sys
from collections.abc import Callable
from typing import Any

import cloudpickle

from ..worker.records_wire import REC_OK, REC_VALUE
from . import store as segments
from .handles import SharedValue, from_wire, map_locked
from .kinds import SegmentKind
from .store import SegmentStore, settings, warn_once
from .worker_side import WorkerSegments

__all__ = ["dumps_oob", "share", "dump_records", "dumps_job", "loads_job", "loads_records"]


def dumps_oob(obj: Any, threshold: int, arrays: bool = True) -> tuple[bytes, list]:
    """Pickle ``obj`` with its buffers of at least ``threshold`` bytes left
    out: ``(pickle, [memoryview, ...])``; pass the buffers back (in order)
    to ``pickle.loads(..., buffers=)``.  The fast C pickler where it works,
    else cloudpickle, as ``protocol.dumps``.  ``arrays``: non-contiguous
    and datetime arrays too (``_Pickler``; a Python call per object, so
    not for job bodies full of task specs)."""
    big: list = []

    def keep(buf: pickle.PickleBuffer) -> bool:
        try:
            raw = buf.raw()
        except BufferError:  # not contiguous: in-band
            return True
        if raw.nbytes < threshold:
            return True  # in-band
        big.append(raw)
        return False

    try:
        if arrays:
            data = _pickle(obj, keep, threshold)
        else:
            data = pickle.dumps(obj, protocol=5, buffer_callback=keep)
        if b"__main__" not in data:
            return data, big
    except Exception:
        pass
    big.clear()
    return cloudpickle.dumps(obj, protocol=5, buffer_callback=keep), big


class _Pickler(pickle.Pickler):
    """The C pickler, with two kinds of large NumPy arrays made to expose
    their buffer: NumPy pickles non-contiguous arrays and datetime64 /
    timedelta64 arrays in-band (a copy into the pickle), so they would
    take the pipe.  A contiguous copy costs what the in-band copy costs;
    a datetime array travels as its int64 view."""

    def __init__(self, file, buffer_callback, threshold: int):
        super().__init__(file, protocol=5, buffer_callback=buffer_callback)
        self._threshold = threshold
        self._np = sys.modules.get("numpy")

    def reducer_override(self, obj):
        np = self._np
        if np is None or type(obj) is not np.ndarray or obj.nbytes < self._threshold \
                or obj.dtype.hasobject:
            return NotImplemented
        if obj.dtype.kind in "mM":
            return _retyped, (np.ascontiguousarray(obj).view("i8"), obj.dtype)
        if not (obj.flags.c_contiguous or obj.flags.f_contiguous):
            return _retyped, (np.ascontiguousarray(obj), obj.dtype)
        return NotImplemented


def _retyped(a, dtype):
    return a if a.dtype == dtype else a.view(dtype)


def _pickle(obj: Any, buffer_callback, threshold: int) -> bytes:
    f = io.BytesIO()
    _Pickler(f, buffer_callback, threshold).dump(obj)
    return f.getvalue()


class _BytesBox:
    """A large ``bytes`` result on its way: its buffer goes out of band
    (``bytes`` itself never does) and is copied out on arrival."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def __reduce_ex__(self, protocol):
        return bytes, (pickle.PickleBuffer(self.data),)




def share(value: Any, writer: WorkerSegments) -> Any:
    """``value``, or a ``SharedValue`` handle (owned by no one here: it is
    for another process) if it has large buffers and they fit into a new
    segment of ``writer``.  Falls back to ``value`` (the pipe) with a
    one-time warning when shared memory cannot take it."""
    enabled, threshold, reserve = settings()
    if not enabled:
        return value
    obj = _BytesBox(value) if type(value) is bytes and len(value) >= threshold else value
    meta, buffers = dumps_oob(obj, threshold)
    if not buffers:
        return value
    try:
        name, size, layout = writer.write(buffers, reserve)
    except OSError as exc:
        warn_once(f"shared memory is full or unavailable ({exc.strerror or exc}); "
                  f"some data goes through pipes")
        return value
    return SharedValue(name, size, meta, layout)


def dump_records(records: list, writer: WorkerSegments, dumps: Callable) -> bytes:
    """Pickle a worker's records, the large results as ``SharedValue``
    handles to segments of ``writer``.

    One pickling pass finds out whether any result has a large buffer (the
    usual case of small results costs nothing more); only then each such
    result is pickled again on its own, into a segment of its own, so the
    scheduler can release each when the cache drops its key.  Raises what
    pickling raises, after removing the segments it made.
    """
    threshold = settings()[1]
    found = []

    def spot(buf: pickle.PickleBuffer) -> bool:
        try:
            if buf.raw().nbytes >= threshold:
                found.append(True)
                return False  # left out (not copied): this pickle is not used then
        except BufferError:
            pass
        return True  # in-band

    try:
        data = pickle.dumps(records, protocol=5, buffer_callback=spot)
    except Exception:
        data = None
    if data is not None and not found:
        for r in records:  # (a plain loop: this runs for every task's record)
            value = r[REC_VALUE]
            if type(value) not in _ATOMIC and _in_band_but_big(value, threshold):
                break
        else:
            return data if b"__main__" not in data else dumps(records)
    made = []
    try:
        out = []
        for r in records:
            v = r[REC_VALUE]
            if r[REC_OK] and v is not None and type(v) not in _ATOMIC:
                shared = share(v, writer)
                if shared is not v:
                    made.append(shared.name)
                    r = (*r[:REC_VALUE], shared, *r[REC_VALUE + 1:])
            out.append(r)
        return dumps(out)
    except BaseException:
        for name in made:
            writer.unlink(name)
        raise


_ATOMIC = frozenset({int, float, str, bool, complex, type(None)})


def _in_band_but_big(value: Any, threshold: int) -> bool:
    """A large result pickle would copy in-band (see ``_Pickler``)."""
    t = type(value)
    if t in _ATOMIC:
        return False
    if t is bytes:
        return len(value) >= threshold
    np = sys.modules.get("numpy")
    return (np is not None and t is np.ndarray and value.nbytes >= threshold
            and not value.dtype.hasobject
            and (value.dtype.kind in "mM"
                 or not (value.flags.c_contiguous or value.flags.f_contiguous)))


# -- value or handle: the unpicklers ---------------------------------------------

_WIRE = (from_wire.__module__, from_wire.__name__)


class _Unpickler(pickle.Unpickler):
    """Unpickles handles with ``make`` instead of ``from_wire``."""

    def __init__(self, data, make: Callable, buffers=None):
        super().__init__(io.BytesIO(data), buffers=buffers)
        self._make = make

    def find_class(self, module, name):
        if module == _WIRE[0] and name == _WIRE[1]:
            return self._make
        return super().find_class(module, name)


def loads_records(body, store: SegmentStore) -> Any:
    """Unpickle a worker's records here, in the owner: handles owned by
    ``store``."""
    return _Unpickler(body, lambda name, size, meta, layout: SharedValue(
        name, size, meta, layout, store)).load()


class _Mapper:
    """Unpickles a job in a worker, each handle mapped from a segment of
    ``kind`` (its pool's)."""

    __slots__ = ("kind",)

    def __init__(self, kind: SegmentKind | None):
        self.kind = kind

    def mapped(self, name: str, size: int, meta: bytes, layout: tuple) -> Any:
        return map_locked(self.kind, name, size, meta, layout, self.loads)

    def loads(self, data, buffers=None) -> Any:
        return _Unpickler(data, self.mapped, buffers).load()


# -- jobs (scheduler -> worker) ----------------------------------------------

_JOB_HEAD = struct.Struct("<I")


def dumps_job(obj: Any, prefix: str | None, dumps: Callable,
              store: SegmentStore | None = None) -> tuple[bytes, SharedValue | None]:
    """A RUN message's body: ``obj`` pickled, its large buffers (inputs
    shipped to the worker) in a segment ``prefix + "in"`` owned by
    ``store`` (or a free segment of ``store``'s, rewritten in place);
    ``(body, handle or None)``.  Release the handle when the job ends (the
    worker unlinks the name once it has mapped it: ``loads_job``; the
    store then never uses that name again, whoever takes it)."""
    if prefix is None or store is None:
        return dumps(obj), None
    threshold, reserve = settings()[1:]
    meta, buffers = dumps_oob(obj, threshold, arrays=False)
    if not buffers:
        return meta, None
    offered = store.take_free()
    reusable = list(offered)
    try:
        name, size, layout = segments.write_segment(store.kind, prefix + "in", buffers, reserve,
                                                    reusable, store.claim_lent)
    except OSError as exc:
        store.give_back(offered)
        warn_once(f"shared memory is full or unavailable ({exc.strerror or exc}); "
                  f"some data goes through pipes")
        return dumps(obj), None
    store.give_back(offered, used=(name,))
    handle = SharedValue(name, size, b"", layout, store)
    head = pickle.dumps((name, size, layout), protocol=5)
    return b"S" + _JOB_HEAD.pack(len(head)) + head + meta, handle


def loads_job(body, segment_kind: SegmentKind | None) -> Any:
    """Unpickle a RUN body made by ``dumps_job`` (in the worker): inputs
    that are handles arrive mapped from segments of ``segment_kind`` (the
    pool's platform's)."""
    mapper = _Mapper(segment_kind)
    if body[:1] != b"S":
        return mapper.loads(body)
    (n,) = _JOB_HEAD.unpack_from(body, 1)
    start = 1 + _JOB_HEAD.size
    name, size, layout = pickle.loads(body[start:start + n])
    value = map_locked(segment_kind, name, size, bytes(body[start + n:]), layout, mapper.loads)
    # Mapped: the name can go now, so that no segment outlives the job's
    # last record (the scheduler may return before it reads the job's end).
    # The scheduler owns it still and releases it at the job's end.
    if segment_kind is not None:
        segment_kind.unlink(name)
    return value
