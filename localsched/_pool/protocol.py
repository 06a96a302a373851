"""What travels between the pool and its worker processes, and how.

Every message is one ``send_bytes`` frame: a fixed 9-byte header, then a
body pickled on its own::

    ┌──────┬──────────────────┬──────────────────────────┐
    │ kind │ job id (8 bytes) │ body (pickle, may be b"") │
    └──────┴──────────────────┴──────────────────────────┘

The header is plain bytes so that it can always be read, even when the body
cannot be unpickled: the pool then still knows which job the message
belongs to, fails that job, and keeps discarding the job's later messages
instead of handing them to whatever job comes next.  Every message of a job
carries its id, and the pool drops a message whose id is not the job its
worker is running.

>>> frame = encode(Kind.RECORDS, 7, dumps([("x", True)]))
>>> kind, job_id, body = decode(frame)
>>> kind is Kind.RECORDS, job_id, pickle.loads(body)
(True, 7, [('x', True)])
"""

from __future__ import annotations

import enum
import pickle
import struct
import traceback
from typing import Any

import cloudpickle

from .._shm import oob
from .._shm.worker_side import WorkerSegments

__all__ = ["Kind", "encode", "decode", "dumps", "dump_records", "pack_exception",
           "unpack_exception", "RemoteTraceback", "RemoteError"]


class Kind(enum.IntEnum):
    """The kind of a message: its first byte.

    Parent to worker:

    - ``RUN``: body ``(fn, args, kwargs, streams, shm, lent)``
      (pickled, or with its large buffers in a shared-memory segment:
      ``oob.dumps_job``; ``shm``: None, or the job's segment name prefix and
      the directory of its owner's lock; ``lent``: free segments the job may
      rewrite); run it as job ``job id``.
    - ``STOP``: no body; the worker exits (sent only to a worker with no job).
    - ``LET_GO``: no body; the pool has read job ``job id`` to its end, so its
      owner holds every segment the worker wrote for it: the worker lets
      them go (kinds whose writer holds what it wrote: ``named_mappings``).

    Worker to parent, after start-up (job id 0):

    - ``READY``: the worker is up and its initializer ran; it takes jobs.
    - ``INIT_FAILED``: body: the initializer's exception, packed; the
      worker exits next.

    Worker to parent, about job ``job id``:

    - ``RECORDS``: body: a list of records the job emitted (streaming jobs).
    - ``DONE``: a streaming job's function returned: the job's last message;
      body: the lent segments it used, pickled (or b"" for none).
    - ``RESULT``: body: a plain job's return value: its last message.
    - ``FAILED``: body: the function's exception, packed: the job's last message.
    - ``NOTE``: body: a warning the worker could not give (UTF-8): the
      caller gives it, once per process (``segments.warn_once``).
    """

    RUN = 1
    STOP = 2
    LET_GO = 3
    READY = 10
    INIT_FAILED = 11
    RECORDS = 12
    DONE = 13
    RESULT = 14
    FAILED = 15
    NOTE = 16


#: The kinds after which a job has nothing more to say: its worker is free.
LAST_OF_JOB = frozenset({Kind.DONE, Kind.RESULT, Kind.FAILED})

_HEADER = struct.Struct("<BQ")
HEADER_SIZE = _HEADER.size
_KINDS = {int(k): k for k in Kind}


def encode(kind: Kind, job_id: int = 0, body: bytes = b"") -> bytes:
    """One frame: header, then ``body`` (already pickled)."""
    return _HEADER.pack(kind, job_id) + body


def decode(frame: bytes) -> tuple[Kind, int, memoryview]:
    """``(kind, job id, body)`` of a frame; the body is not unpickled here."""
    if len(frame) < HEADER_SIZE or frame[0] not in _KINDS:
        raise ValueError(f"not a localsched pool message: {bytes(frame[:HEADER_SIZE])!r}")
    code, job_id = _HEADER.unpack_from(frame)
    return _KINDS[code], job_id, memoryview(frame)[HEADER_SIZE:]


def dumps(obj: Any) -> bytes:
    """Pickle for another process: the fast C pickler where it works, else
    cloudpickle (lambdas, closures, anything defined in ``__main__``, which a
    worker process does not have).

    >>> pickle.loads(dumps(lambda x: x + 1))(1)
    2
    """
    try:
        data = pickle.dumps(obj, protocol=5)
    except Exception:
        return cloudpickle.dumps(obj, protocol=5)
    if b"__main__" in data:
        return cloudpickle.dumps(obj, protocol=5)
    return data


# -- exceptions ----------------------------------------------------------------


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process, as text.

    Attached as the ``__cause__`` of the re-raised exception, so the worker's
    frames show under the caller's.
    """

    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return "\n\n" + self.tb


class RemoteError(Exception):
    """Stands in for a worker exception that could not be pickled."""


def _picklable_exception(exc: BaseException) -> BaseException:
    try:
        pickle.loads(dumps(exc))
        return exc
    except Exception:
        return RemoteError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")


def _packed(exc: BaseException) -> tuple:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (_picklable_exception(exc), tb)


def pack_exception(exc: BaseException) -> bytes:
    """An exception and its traceback text, pickled (see ``unpack_exception``)."""
    return dumps(_packed(exc))


def unpack_exception(packed) -> BaseException:
    """A worker's exception, to re-raise here with its remote traceback as cause.

    ``packed`` is ``(exception, traceback text)`` as packed in the worker, or
    an exception already (from a foreign process executor).

    >>> exc = unpack_exception(pickle.loads(pack_exception(KeyError("k"))))
    >>> type(exc).__name__, type(exc.__cause__).__name__
    ('KeyError', 'RemoteTraceback')
    """
    if isinstance(packed, BaseException):
        return packed
    exc, tb = packed
    exc.__cause__ = RemoteTraceback(tb)
    return exc


# -- records -------------------------------------------------------------------

# The record layout is localsched.run.core.run_batch's: (i, ok, value, start,
# end, worker id).  The pool reads only these two fields: ``ok`` False means
# ``value`` is the task's exception, packed here before it travels.
RECORD_OK = 1
RECORD_VALUE = 2


def _pack_record(r: tuple) -> tuple:
    if r[RECORD_OK] is not False or type(r[RECORD_VALUE]) is tuple:
        return r
    return r[:RECORD_VALUE] + (_packed(r[RECORD_VALUE]),) + r[RECORD_VALUE + 1:]


def dump_records(records: list, writer: WorkerSegments | None = None) -> bytes:
    """Pickle a list of records; a result or exception that cannot be pickled
    becomes a failure of its task, explained.  With ``writer``, large
    results travel in shared-memory segments it writes (see ``oob``)."""
    try:
        packed = [_pack_record(r) for r in records]
        if writer is not None:
            return oob.dump_records(packed, writer, dumps)
        return dumps(packed)
    except Exception:
        pass
    safe = []
    for r in records:
        r = _pack_record(r)
        try:
            dumps(r[RECORD_VALUE])
        except Exception as exc:
            what = "result" if r[RECORD_OK] else "exception"
            err = TypeError(f"could not pickle the {what} of this task to send it "
                            f"back from the worker process: {exc}")
            r = r[:RECORD_OK] + (False, (err, traceback.format_exc())) + r[RECORD_VALUE + 1:]
        safe.append(r)
    return dumps(safe)
