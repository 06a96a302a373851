"""How ``localsched.multiprocessing.get`` runs batches on a pool, ours or
a foreign one (``submitter_for``)."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, NamedTuple

from .pool import ProcessPool
from .protocol import dumps
from .worker import run_packed

__all__ = ["Submitter", "submitter_for"]


class Submitter(NamedTuple):
    """How the scheduler runs batches on one pool (see ``core.get_async``)."""

    submit: Callable[..., Future]
    stream: bool  # submit takes emit= and streams records as tasks end
    on_interrupt: Callable[[list], None] | None  # stops running work on Ctrl-C


def submitter_for(pool: Any) -> Submitter:
    """The way to run batches on ``pool``: a ``ProcessPool`` streams records
    and can kill running work; a ``multiprocessing.Pool`` or another
    Executor gets each batch cloudpickled (so lambdas work) and returns its
    records whole.

    >>> submitter_for(object())
    Traceback (most recent call last):
      ...
    TypeError: pool= must be a concurrent.futures.Executor or a multiprocessing.Pool, got object
    """
    if isinstance(pool, ProcessPool):
        return Submitter(pool.submit, True, pool.kill)
    if _is_mp_pool(pool):
        def send(payload: bytes, done: Callable[[Any, BaseException | None], None]) -> None:
            pool.apply_async(run_packed, (payload,), callback=lambda b: done(b, None),
                             error_callback=lambda e: done(None, e))

        return Submitter(_packed_submit(send), False, None)
    if isinstance(pool, Executor):
        def send(payload: bytes, done: Callable[[Any, BaseException | None], None]) -> None:
            inner = pool.submit(run_packed, payload)
            inner.add_done_callback(
                lambda f: done(None, f.exception()) if f.exception() else done(f.result(), None))

        return Submitter(_packed_submit(send), False, None)
    raise TypeError(f"pool= must be a concurrent.futures.Executor or a multiprocessing.Pool, "
                    f"got {type(pool).__name__}")


def _packed_submit(send: Callable) -> Callable[..., Future]:
    """An Executor-style submit over ``send(payload, done)``, which runs
    ``worker.run_packed(payload)`` somewhere and calls ``done(result bytes,
    None)`` or ``done(None, exception)``."""

    def submit(fn, *args, **kwargs) -> Future:
        future: Future = Future()
        future.set_running_or_notify_cancel()
        payload = dumps((fn, args, kwargs))  # may raise: not sendable

        def done(packed: bytes | None, exc: BaseException | None) -> None:
            if exc is None and packed is not None:
                try:
                    future.set_result(pickle.loads(packed))
                    return
                except Exception as e:
                    exc = e
            future.set_exception(exc)

        send(payload, done)
        return future

    return submit


def _is_mp_pool(pool: Any) -> bool:
    # Only a program that imported multiprocessing.pool can pass one.
    mod = sys.modules.get("multiprocessing.pool")
    return mod is not None and isinstance(pool, mod.Pool)
