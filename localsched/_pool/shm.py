"""Zero-copy transport: large buffers travel through shared memory, not the pipe.

Pickle protocol 5 hands a pickler's ``buffer_callback`` every large
contiguous buffer an object exposes (NumPy arrays, pandas columns through
their arrays, ``bytearray``, anything returning a ``PickleBuffer``).  Here
the buffers of at least ``threshold`` bytes are written once into a *segment*,
a file in ``/dev/shm``, and only the rest of the pickle (a few hundred bytes)
crosses the pipe, inside a ``SharedValue`` handle::

    worker A                        scheduler (parent)                worker B
    ────────                        ──────────────────                ────────
    result ─► pickle, big buffers ─► SharedValue in the cache ──────► unpickling
              pwrite()n into a       (a name, never mapped here)      the job maps
              segment; the record    released with the cache entry    the segment:
              carries the handle                                      arrays point
                                                                      into it

Who owns what.  The scheduler's process owns every segment: a worker
creates one for a result, and hands it over in the record that carries the
result.  The parent releases it when its ``SharedValue`` goes (while a
computation runs a released segment may wait, renamed, in a small free list
for a worker to rewrite: see "reusing released segments" below; the list is
unlinked when the computation ends): when the cache
releases the key (the last reference drops; CPython frees it at once), when
the computation fails or is interrupted (``Inbox.abandon`` releases what the
computation holds and whatever arrives for it later), or at the end, when an
output is loaded for the user.  A segment a worker made but never reported
(it died, or was killed on Ctrl-C, with the record unsent) is found by its
name: every segment of job ``j`` of pool ``p`` in process ``pid`` starts with
``localsched-<pid>-<p>-<j>-``, and the pool sweeps that prefix once the
worker is reaped (``sweep``).  At exit the process sweeps its own prefix; a
process killed outright leaves its segments to the next process that starts
a pool, which removes those of owners that no longer run (``sweep_stale``).

Why plain files and not ``multiprocessing.shared_memory``: its
``SharedMemory`` registers every segment with the resource tracker, a helper
process that unlinks (and warns about) segments still registered when the
*creating* process exits.  Here the creator (a worker) hands ownership to
another process, so the tracker would unlink segments the scheduler still
holds, or warn about segments it no longer has.  ``os.open`` on
``/dev/shm``, ``os.pwrite`` and ``mmap`` need no tracker, no helper process,
and ``pwrite`` reports a full ``/dev/shm`` as ``ENOSPC`` (an ``OSError``, so
the value takes the pipe) where writing through a mapping would be a SIGBUS.

Zero copy on the reading side: the reader maps the segment copy-on-write
(``mmap.ACCESS_COPY``) and unpickles with ``buffers=`` views of that
mapping, so arrays point into the shared pages; a task that writes into an
input gets private copies of the pages it writes, as it got a private copy
from the pipe before, and never changes what other tasks see.  The arrays
keep the mapping alive; unlinking the name while it is mapped is fine.

What takes the pipe: objects without large buffers, buffers below the
threshold, object arrays (pickle sends their items in-band), plain
``bytes`` nested inside a result (a ``bytes`` result
itself travels through shared memory and is copied out on arrival: ``bytes``
cannot point into a mapping).  Everything takes the pipe when shared memory
is switched off, missing, or too small (``available``), with a one-line
warning once per process.

Knobs (environment variables, read when used; workers read theirs at
start-up, so set them before the pool starts):

- ``LOCALSCHED_SHM=0``: off (pipe only, no warning);
- ``LOCALSCHED_SHM_THRESHOLD``: smallest buffer sent through shared memory,
  bytes (default 64 KiB.  Measured here, two pipe hops as before against
  one fresh segment written, mapped, read and unlinked: 4 KiB 19 vs 56 µs,
  64 KiB 73 vs 97 µs, 256 KiB 571 vs 243 µs, 1 MiB 2.6 vs 0.7 ms.  The
  crossover lies between 64 and 256 KiB for a fresh segment; a reused one
  costs less, so 64 KiB);
- ``LOCALSCHED_SHM_RESERVE``: bytes of ``/dev/shm`` left free for others
  (default 16 MiB); a value that does not fit goes through the pipe.

>>> import numpy as np
>>> big = np.arange(100_000, dtype="f8")
>>> meta, buffers = dumps_oob(big, 64 * 1024)
>>> len(meta) < 200, [b.nbytes for b in buffers]
(True, [800000])
"""

from __future__ import annotations

import io
import itertools
import mmap
import os
import pickle
import struct
import sys
import threading
import warnings
from typing import Any, Callable, Optional

import cloudpickle

try:
    import fcntl  # (POSIX; without it, no shared memory: see ``available``)
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["SharedValue", "Inbox", "load", "release", "dumps_oob", "dump_records", "dumps_job",
           "loads_job", "available", "sweep", "sweep_stale", "settings", "live_segments",
           "PREFIX", "SHM_DIR"]

SHM_DIR = "/dev/shm"
PREFIX = "localsched-"
DEFAULT_THRESHOLD = 64 * 1024
DEFAULT_RESERVE = 16 * 1024 * 1024
# Buffers start on 64-byte boundaries in a segment: NumPy's SIMD loops and
# any dtype (complex256 included) find their data aligned.
ALIGN = 64

# True in worker processes (set by worker.main): unpickling a SharedValue
# there maps its segment and gives the value; in the scheduler's process it
# gives the handle, which the cache keeps without mapping anything.
attach_on_load = False

# Names of the segments this process owns (the scheduler's): a sweep leaves
# them alone.  (set.add/discard are atomic under the GIL.)
_owned: set = set()
_counter = itertools.count()
# While a computation runs, the names it releases are unlinked when its
# scheduler thread has nothing else to do (``Inbox.idle``) or when it ends,
# not at once: freeing an 8 MB segment's pages takes about 1.5 ms, which
# in the scheduler's loop would delay the next dispatch (measured: 0.49 s
# against 0.42 s on bench_shm's workload).  ``_deferring`` counts the
# computations running; ``_deferred`` holds the names (list.append and
# pop are atomic under the GIL).
_deferring = 0
_deferred: list = []
_defer_lock = threading.Lock()
_warned = False
_warn_lock = threading.Lock()


def settings() -> tuple[bool, int, int]:
    """``(enabled, threshold, reserve)`` from the environment (see the module
    docstring).

    >>> settings()[1] > 0
    True
    """
    env = os.environ
    enabled = env.get("LOCALSCHED_SHM", "1").strip().lower() not in ("0", "off", "false", "no")
    try:
        threshold = max(1, int(env.get("LOCALSCHED_SHM_THRESHOLD", DEFAULT_THRESHOLD)))
    except ValueError:
        threshold = DEFAULT_THRESHOLD
    try:
        reserve = max(0, int(env.get("LOCALSCHED_SHM_RESERVE", DEFAULT_RESERVE)))
    except ValueError:
        reserve = DEFAULT_RESERVE
    return enabled, threshold, reserve


def _warn_once(message: str) -> None:
    global _warned
    with _warn_lock:
        if _warned:
            return
        _warned = True
    if attach_on_load:  # a worker: its stderr is the user's terminal; one line
        try:
            sys.stderr.write(f"localsched: {message}\n")
        except Exception:
            pass
    else:
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _free_bytes() -> int:
    st = os.statvfs(SHM_DIR)
    return st.f_bavail * st.f_frsize


def available() -> bool:
    """Whether shared memory can be used now (on, present, with room for a
    value above the reserve); warns once per process when it cannot.

    The scheduler asks before each job it sends; a worker still checks the
    free space before each segment (``/dev/shm`` is shared with everyone).
    """
    enabled, threshold, reserve = settings()
    if not enabled:
        return False
    try:
        if fcntl is None:
            raise OSError("no fcntl")
        free = _free_bytes()
    except OSError:
        _warn_once(f"no shared memory ({SHM_DIR} is missing); process tasks exchange "
                   f"data through pipes")
        return False
    if free < reserve + threshold:
        _warn_once(f"{SHM_DIR} is too small ({free >> 20} MiB free, {reserve >> 20} MiB "
                   f"kept in reserve); process tasks exchange data through pipes")
        return False
    return True


# -- writing -----------------------------------------------------------------


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


def _write_segment(name: str, buffers: list, reserve: int) -> tuple[int, tuple]:
    """Write ``buffers`` into a new segment ``name``; ``(size, layout)``.
    OSError (the segment removed again) when it does not fit."""
    layout = []
    offset = 0
    for b in buffers:
        offset = -(-offset // ALIGN) * ALIGN
        layout.append((offset, b.nbytes))
        offset += b.nbytes
    size = offset
    fd = _reuse(name, size)
    if fd is None:
        if _free_bytes() < size + reserve:
            raise OSError(28, "not enough free space in " + SHM_DIR)
        fd = os.open(os.path.join(SHM_DIR, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        # pwrite copies straight into the file's pages: no mapping, no page
        # faults on the writing side, and ENOSPC instead of SIGBUS.
        for (off, n), b in zip(layout, buffers):
            done = 0
            while done < n:
                done += os.pwrite(fd, b[done:], off + done)
    except BaseException:
        os.close(fd)
        _unlink(name)
        raise
    os.close(fd)
    return size, tuple(layout)


# -- reusing released segments --------------------------------------------------
#
# A new segment costs its pages: allocating and zeroing 8 MB of tmpfs takes
# about 1.5 ms before the copy (1 ms), and freeing them again about 1.5 ms
# more -- as much as computing a chunk.  So while a computation runs, the
# scheduler does not unlink a released segment but renames it into a small
# free list (``<owner prefix>free-<n>``), and a worker that needs a segment
# claims one (an atomic rename) and overwrites its pages.  The danger is a
# process still mapping the old contents: a copy-on-write mapping sees
# changes to the pages it has not written.  Every mapping therefore holds a
# shared ``flock`` on its segment (taken in ``_attach``; it lives as long as
# the mapping's file descriptor, i.e. the mapping), and a claimed segment is
# overwritten only under an exclusive lock taken without waiting: if
# anything still maps it, it is unlinked instead (the mapping keeps its
# pages) and a fresh segment is made.  When the last computation ends, the
# free list is unlinked: nothing stays in /dev/shm between computations.
FREE_MAX = 8  # segments in the free list at most (and no more bytes than that many results)


def _free_list(owner: str) -> list:
    """``[(name, size), ...]`` of the free segments of owner prefix ``owner``."""
    prefix = owner + "free-"
    out = []
    try:
        for e in os.scandir(SHM_DIR):
            if e.name.startswith(prefix):
                try:
                    out.append((e.name, e.stat().st_size))
                except OSError:
                    pass
    except OSError:
        pass
    return out


def _owner_prefix(name: str) -> str:
    """``localsched-<pid>-`` of a segment name."""
    return name[:name.index("-", len(PREFIX)) + 1]


def _reuse(name: str, size: int) -> Optional[int]:
    """Claim a free segment of about ``size`` bytes as ``name``; its file
    descriptor, locked exclusively and truncated to ``size``, or None."""
    fits = [(n, s) for n, s in _free_list(_owner_prefix(name)) if size <= s <= 2 * size + ALIGN]
    for free, free_size in sorted(fits, key=lambda f: f[1]):
        path = os.path.join(SHM_DIR, name)
        try:
            os.rename(os.path.join(SHM_DIR, free), path)  # the claim: one claimer wins
        except OSError:
            continue
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # still mapped somewhere: its pages are not ours to write
            os.close(fd)
            _unlink(name)
            continue
        if free_size != size:
            os.ftruncate(fd, size)
        return fd
    return None


def _retire(name: str) -> None:
    """A released segment: into the free list while a computation runs and
    the list has room, else unlinked (later, if a computation runs)."""
    # Under the lock that ``Inbox.end`` takes to count the last computation
    # out and sweep the free list: a handle dropped late (by another thread)
    # must not rename a segment into the list after that sweep has looked.
    with _defer_lock:
        if _deferring:
            owner = _owner_prefix(name)
            if len(_free_list(owner)) < FREE_MAX:
                try:
                    os.rename(os.path.join(SHM_DIR, name),
                              os.path.join(SHM_DIR, f"{owner}free-{next(_counter)}"))
                    return
                except OSError:
                    pass
            _deferred.append(name)
            return
    _unlink(name)


def _unlink(name: str) -> None:
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


class _BytesBox:
    """A large ``bytes`` result on its way: its buffer goes out of band
    (``bytes`` itself never does) and is copied out on arrival."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def __reduce_ex__(self, protocol):
        return bytes, (pickle.PickleBuffer(self.data),)


def share(value: Any, name: str) -> Any:
    """``value``, or a ``SharedValue`` handle for it if it has large buffers
    and they fit into a new segment ``name`` (not owned here: the handle is
    for another process).  Falls back to ``value`` (the pipe) with a
    one-time warning when shared memory cannot take it."""
    enabled, threshold, reserve = settings()
    if not enabled:
        return value
    obj = _BytesBox(value) if type(value) is bytes and len(value) >= threshold else value
    meta, buffers = dumps_oob(obj, threshold)
    if not buffers:
        return value
    try:
        size, layout = _write_segment(name, buffers, reserve)
    except OSError as exc:
        _warn_once(f"shared memory is full or unavailable ({exc.strerror or exc}); "
                   f"some data goes through pipes")
        return value
    return SharedValue(name, size, meta, layout, owned=False)


def dump_records(records: list, prefix: str, dumps: Callable) -> bytes:
    """Pickle a worker's records, the large results as ``SharedValue``
    handles to segments named ``prefix<n>``.

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
            if type(r[2]) not in _ATOMIC and _in_band_but_big(r[2], threshold):
                break
        else:
            return data if b"__main__" not in data else dumps(records)
    made = []
    try:
        out = []
        for r in records:
            v = r[2]
            if r[1] and v is not None and type(v) not in _ATOMIC:
                shared = share(v, f"{prefix}{next(_counter)}")
                if shared is not v:
                    made.append(shared.name)
                    r = r[:2] + (shared,) + r[3:]
            out.append(r)
        return dumps(out)
    except BaseException:
        for name in made:
            _unlink(name)
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


# -- the handle ----------------------------------------------------------------


class SharedValue:
    """A value whose large buffers live in a shared-memory segment.

    ``name`` (the segment's file in ``/dev/shm``), ``size``, ``meta`` (the
    value's pickle without those buffers) and ``layout`` (each buffer's
    ``(offset, length)`` in the segment).  In the process that owns the
    segment, ``release()`` (or losing the last reference) unlinks it;
    ``load()`` maps the segment and gives the value, zero-copy.

    Pickled, it is only its fields: unpickled in a worker, it *is* the
    value (mapped); in the scheduler, the handle.
    """

    __slots__ = ("name", "size", "meta", "layout", "_owner", "__weakref__")

    def __init__(self, name: str, size: int, meta: bytes, layout: tuple, owned: bool = True):
        self.name = name
        self.size = size
        self.meta = meta
        self.layout = layout
        self._owner = os.getpid() if owned else 0
        if owned:
            _owned.add(name)

    def __reduce__(self):
        return _shared_value, (self.name, self.size, self.meta, self.layout)

    def load(self) -> Any:
        """The value, its buffers mapped from the segment (copy-on-write)."""
        return _attach(self.name, self.size, self.meta, self.layout)

    def release(self) -> None:
        """Unlink the segment (idempotent; only in the process owning it:
        a forked child's copy of a handle is not its owner)."""
        if self._owner and self._owner == os.getpid():
            self._owner = 0
            _owned.discard(self.name)
            _retire(self.name)

    def __del__(self):
        self.release()

    def __repr__(self) -> str:
        return f"<SharedValue {self.name} {self.size} bytes>"


def _shared_value(name: str, size: int, meta: bytes, layout: tuple):
    if attach_on_load:
        return _attach(name, size, meta, layout)
    return SharedValue(name, size, meta, layout)


def _attach(name: str, size: int, meta: bytes, layout: tuple) -> Any:
    fd = os.open(os.path.join(SHM_DIR, name), os.O_RDONLY)
    try:
        # A shared lock for as long as the mapping lives (mmap keeps a
        # duplicate of the descriptor, and the lock belongs to the open
        # file): no one reuses these pages meanwhile (see ``_reuse``).
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # being rewritten: this handle is stale
            raise FileNotFoundError(f"shared-memory segment {name} was released") from None
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)
    finally:
        os.close(fd)
    view = memoryview(mm)
    # The views keep the mapping alive as long as the value uses them.
    return pickle.loads(meta, buffers=[view[o:o + n] for o, n in layout])


def load(value: Any) -> Any:
    """The value itself: a ``SharedValue`` loaded (zero-copy), anything else
    as it is.

    >>> load(3)
    3
    """
    return value.load() if type(value) is SharedValue else value


def release(value: Any) -> None:
    """Release ``value``'s segment now if it is a ``SharedValue`` (idempotent).

    >>> release(3)
    """
    if type(value) is SharedValue:
        value.release()


def release_records(records: list) -> None:
    """Release the handles in records nobody will read."""
    for r in records:
        if type(r) is tuple and len(r) > 2 and type(r[2]) is SharedValue:
            r[2].release()


# -- jobs (scheduler -> worker) ----------------------------------------------

_JOB_HEAD = struct.Struct("<I")


def dumps_job(obj: Any, prefix: Optional[str],
              dumps: Callable) -> tuple[bytes, Optional[SharedValue]]:
    """A RUN message's body: ``obj`` pickled, its large buffers (inputs
    shipped to the worker) in a segment ``prefix + "in"`` owned here;
    ``(body, handle or None)``.  Release the handle when the job ends (the
    worker unlinks the name once it has mapped it: ``loads_job``)."""
    if prefix is None:
        return dumps(obj), None
    threshold, reserve = settings()[1:]
    meta, buffers = dumps_oob(obj, threshold, arrays=False)
    if not buffers:
        return meta, None
    name = prefix + "in"
    try:
        size, layout = _write_segment(name, buffers, reserve)
    except OSError as exc:
        _warn_once(f"shared memory is full or unavailable ({exc.strerror or exc}); "
                   f"some data goes through pipes")
        return dumps(obj), None
    handle = SharedValue(name, size, b"", layout)
    head = pickle.dumps((name, size, layout), protocol=5)
    return b"S" + _JOB_HEAD.pack(len(head)) + head + meta, handle


def loads_job(body) -> Any:
    """Unpickle a RUN body made by ``dumps_job`` (in the worker)."""
    if body[:1] != b"S":
        return pickle.loads(body)
    (n,) = _JOB_HEAD.unpack_from(body, 1)
    start = 1 + _JOB_HEAD.size
    name, size, layout = pickle.loads(body[start:start + n])
    value = _attach(name, size, bytes(body[start + n:]), layout)
    # Mapped: the name can go now, so that no segment outlives the job's
    # last record (the scheduler may return before it reads the job's end).
    # The scheduler owns it still and unlinks it at the job's end if the
    # worker died before getting here.
    _unlink(name)
    return value


# -- the scheduler's side: abandoned computations, sweeps ----------------------


class Inbox:
    """Where a computation's records arrive (``emit``): into the scheduler's
    queue while it runs; released on arrival once it has stopped, so that a
    batch still running after a failure leaves no segment behind, even while
    a traceback keeps the computation's queue alive."""

    __slots__ = ("_put", "_closed", "_lock", "_ended")

    def __init__(self, put: Callable[[Any], None]):
        global _deferring
        self._put = put
        self._closed = False
        self._ended = False
        self._lock = threading.Lock()
        with _defer_lock:
            _deferring += 1

    @staticmethod
    def idle() -> None:
        """The scheduler waits for workers: unlink what was released."""
        while _deferred:
            try:
                _unlink(_deferred.pop())
            except IndexError:  # (another computation's thread took the last)
                return

    def end(self) -> None:
        """The computation is over (call once it holds no handle it
        released): unlink everything released meanwhile."""
        global _deferring
        if self._ended:
            return
        self._ended = True
        with _defer_lock:
            _deferring -= 1
            if not _deferring:  # no computation runs: the free list goes
                sweep(f"{PREFIX}{os.getpid()}-free-")
        self.idle()

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
            if type(v) is SharedValue:  # (a handle whose segment is gone is no result)
                v.release()
                del cache[k]
        self.end()


def job_prefix(pool_token: int, job_id: int) -> str:
    """The name prefix of job ``job_id``'s segments (see the module docstring)."""
    return f"{PREFIX}{os.getpid()}-{pool_token}-{job_id}-"


def _segment_names() -> list:
    """The names in ``/dev/shm`` (none if it cannot be read)."""
    try:
        return os.listdir(SHM_DIR)
    except OSError:
        return []


def sweep(prefix: str) -> int:
    """Unlink the segments named ``prefix...`` that this process does not
    own (a dead worker's unreported results); how many."""
    n = 0
    for name in _segment_names():
        if name.startswith(prefix) and name not in _owned:
            _unlink(name)
            n += 1
    return n


def sweep_stale() -> int:
    """Unlink segments whose owning process no longer runs (it was killed
    before it could clean up); how many."""
    n = 0
    for name in _segment_names():
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _unlink(name)
            n += 1
        except OSError:
            pass  # alive (another user's): not ours to judge
    return n


def live_segments(pids=None) -> dict:
    """``{name: size}`` of the localsched segments in ``/dev/shm`` (of the
    owner processes ``pids``, if given)."""
    out = {}
    try:
        entries = list(os.scandir(SHM_DIR))
    except OSError:
        return out
    wanted = None if pids is None else {str(p) for p in pids}
    for e in entries:
        if not e.name.startswith(PREFIX):
            continue
        if wanted is not None and e.name[len(PREFIX):].split("-", 1)[0] not in wanted:
            continue
        try:
            out[e.name] = e.stat().st_size
        except OSError:
            pass
    return out


_started_in: int = 0


def start_owner() -> None:
    """This process is about to own segments (it starts a pool): once per
    process, remove the segments of owners that died without cleaning up,
    and sweep its own when it exits."""
    global _started_in
    if _started_in == os.getpid():
        return
    _started_in = os.getpid()
    import atexit

    sweep_stale()
    atexit.register(_sweep_own_at_exit)


def _sweep_own_at_exit() -> None:
    if _started_in == os.getpid():
        _owned.clear()
        sweep(f"{PREFIX}{os.getpid()}-")


def _after_fork_in_child() -> None:
    # A forked child owns none of its parent's segments.
    _owned.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
