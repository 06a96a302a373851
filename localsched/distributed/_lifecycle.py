"""One computation's callback lifecycle, for the cluster loop.

A stand-in, shaped like the core's ``localsched.lifecycle.Computation``
(see /work/notes/core_api.md) so the cluster loop ports onto it by
replacing this module: ``with Lifecycle(dsk, callbacks) as life:`` fires
``start(dsk)`` and enters the computation's own callback registry;
``life.open(state)`` fires ``start_state``; the loop fires ``life.pretasks``
and ``life.posttasks``; leaving the block fires ``finish(dsk, state,
errored)`` for every callback whose ``start`` ran, on every exit path.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Any

from .. import callbacks as _callbacks


class Lifecycle:
    def __init__(self, dsk, callbacks: Iterable | None = None, empty_state=None):
        if callbacks is None:
            cbs = _callbacks.active_callbacks()
        else:
            if hasattr(callbacks, "_callback") or _is_raw(callbacks):
                callbacks = [callbacks]
            cbs = []
            for c in callbacks:
                c = _callbacks.normalize_callback(c)
                if c not in cbs:
                    cbs.append(c)
        self.cbs = cbs
        self.hooks = _callbacks.unpack_callbacks(cbs)
        self.pretasks, self.posttasks = self.hooks[2], self.hooks[3]
        self.dsk = dsk
        self.state: Any = None
        self._empty_state = empty_state
        self._started: list = []
        self._token: contextvars.Token | None = None

    def __enter__(self) -> Lifecycle:
        self._token = _callbacks.enter_computation()
        try:
            for cb in self.cbs:
                if cb[0] is not None:
                    cb[0](self.dsk)
                if cb[4] is not None:
                    self._started.append(cb[4])
        except BaseException:
            self.__exit__(True, None, None)
            raise
        return self

    def open(self, state) -> None:
        """Fire start_state with the computation's state."""
        from .. import metrics as _metrics

        self.state = state
        state.span = _metrics._span.get()
        for f in self.hooks[1]:
            f(self.dsk, state)

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self.state is None and self._started and self._empty_state is not None:
                self.state = self._empty_state()
            first = None
            for f in self._started:
                try:
                    f(self.dsk, self.state, exc_type is not None)
                except BaseException as e:  # noqa: B036, BLE001 -- re-raised below
                    if first is None:
                        first = e
            if first is not None:
                raise first
        finally:
            if self._token is not None:
                _callbacks._local_active.reset(self._token)


def _is_raw(x) -> bool:
    return isinstance(x, tuple) and len(x) == 5 and all(f is None or callable(f) for f in x)
