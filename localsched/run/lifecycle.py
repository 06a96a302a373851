"""One computation's lifecycle, as every loop runs it (inline, pool, cluster).

::

    comp = Computation(dsk, callbacks)      # which callbacks, and what they need
    with comp:                              # its own callback registry; start(dsk)
        machine = RunState(comp.dsk, keys)  # may refuse the graph
        state = comp.open(machine)          # the State view; start_state(dsk, state)
        ...                                 # the loop fires comp.pretasks / comp.posttasks
                                            # (and keeps state.outcome.records)
        result = machine.results()
    # finish(dsk, state, errored) for every callback whose start ran, on
    # every exit path (success, error, Ctrl-C), with a state even when the
    # graph was refused (an empty one, as dask hands one over).

Errors in ``finish`` hooks never hide anything: every hook runs; when the
computation itself failed, its own exception propagates with a note per
failing hook; otherwise one failing hook's exception is raised as it is,
several together as an ``ExceptionGroup``.

Task records.  When a callback needs them (``Needs.records``), the run's
outcome holds every finished task's ``TaskRecord`` (a
:class:`~localsched.run.task_records.TaskRecords`, kept as plain values)
(``state.outcome.records``), ready before ``start_state`` fires.  The
local loops (``inline``, ``poolloop``: a state built here from a machine)
append to it themselves, one append per task whatever the number of such
callbacks; for a loop that brings its own state (a cluster's) one posttask
hook of this module appends ``state.task``.

Inside the ``with`` block, code in this context (callbacks, tasks run
inline or in a copy of the context) sees a callback registry of its own, so
a get nested in a task does not fire this computation's callbacks.
"""

from __future__ import annotations

import builtins
import contextvars
import os
import traceback
from typing import Any

from .. import callbacks as _callbacks
from .. import metrics as _metrics
from ..callbacks import Needs, callback_list, merge_needs, unpack_callbacks
from ..plan.graph import as_mapping
from ..utils import funcname
from .machine import RunState
from .state_view import RunOutcome, State
from .task_records import TaskRecords

__all__ = ["Computation", "finish_all"]


class Computation:
    """One computation's callbacks, from ``start`` to ``finish``.

    ``callbacks``: None for the registered ones, else the per-call ones
    (Callback objects, 5-tuples, ``Hooks``).  Attributes: ``dsk`` (the graph
    as a Mapping), ``cbs`` (hooks tuples), ``pretasks`` and ``posttasks``
    (hook functions), ``needs`` (a :class:`~localsched.callbacks.Needs`
    merged over the callbacks), ``state`` (the view, after :meth:`open`).
    """

    __slots__ = ("dsk", "cbs", "start_states", "pretasks", "posttasks", "finishes", "needs",
                 "state", "_started", "_token")

    def __init__(self, dsk: Any, callbacks: Any = None):
        # Callbacks see the graph as a Mapping (dask hands schedulers an
        # expression object with __dask_graph__; dask's callbacks expect a dict).
        self.dsk = as_mapping(dsk)
        self.cbs = cbs = callback_list(callbacks)
        _, self.start_states, self.pretasks, self.posttasks, self.finishes = \
            unpack_callbacks(cbs)
        self.needs: Needs = merge_needs(cbs) if cbs else Needs(False, False, False, 0.0, False,
                                                               False)
        self.state: State | None = None
        self._started: list = []  # finish hooks of the callbacks whose start ran
        self._token: contextvars.Token | None = None

    def __enter__(self) -> Computation:
        self._token = _callbacks.enter_computation()
        try:
            dsk = self.dsk
            for cb in self.cbs:
                if cb[0] is not None:
                    cb[0](dsk)
                if cb[4] is not None:
                    self._started.append(cb[4])
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def open(self, machine: RunState | None = None, state: Any = None) -> Any:
        """The state view over ``machine`` (or ``state``, a view the loop
        made: the cluster's); notes the caller's span; starts the task
        records when needed (see the module docstring); fires ``start_state``."""
        own_loop = state is None
        if state is None:
            assert machine is not None, "open() needs a machine or a state"
            state = State(machine, RunOutcome(machine.ntasks))
        state.outcome.span = _metrics._span.get()
        if self.needs.records:
            records = state.outcome.records = TaskRecords()
            if not own_loop:  # (the loop does not know of them: a hook keeps them)
                self.posttasks.insert(0, _keeper(records.append))
        self.state = state
        for f in self.start_states:
            f(self.dsk, state)
        return state

    @property
    def view(self) -> State:
        """The state view the hooks get (after :meth:`open`)."""
        if self.state is None:
            raise RuntimeError("Computation.open() has not been called")
        return self.state

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self._started:
                state = self.state
                if state is None:  # refused before it had a state: an empty one
                    state = State(RunState.empty())
                hooks, self._started = self._started, []
                finish_all(hooks, self.dsk, state, exc is not None, exc)
        finally:
            token, self._token = self._token, None
            if token is not None:
                _callbacks._local_active.reset(token)
            # The state goes with the computation: an exception that leaves
            # it (its failed tasks name exceptions) keeps nothing alive.
            self.state = None
            if tb is not None:
                _clear_loop_frames(tb)


def _keeper(append):
    """The posttask hook that keeps ``state.task`` in the run's records."""

    def keep_record(key, result, dsk, state, worker_id):
        append(state.task)

    return keep_record


def finish_all(hooks: list, dsk, state, errored: bool,
               own: BaseException | None = None) -> None:
    """Call every finish hook, even when some raise.  With ``own`` (the
    computation's own exception, about to propagate) each hook's error
    becomes a note on it; else one error is raised as it is, several as an
    ``ExceptionGroup`` (Python 3.11+; before, the first, with notes naming
    the others)."""
    errors = []
    for f in hooks:
        try:
            f(dsk, state, errored)
        except BaseException as exc:  # noqa: B036 -- reported below
            errors.append((f, exc))
    if not errors:
        return
    if own is not None:
        for f, err in errors:
            _note(own, f"finish hook {getattr(f, '__qualname__', funcname(f))} also raised: "
                       + "".join(traceback.format_exception_only(type(err), err)).strip())
        return
    if len(errors) == 1:
        raise errors[0][1]
    excs = [err for _, err in errors]
    group = getattr(builtins, "BaseExceptionGroup", None)
    if group is not None:
        raise group(f"{len(excs)} finish hooks raised", excs)
    first = excs[0]
    for err in excs[1:]:
        _note(first, f"another finish hook raised: {err!r}")
    raise first


def _note(exc: BaseException, note: str) -> None:
    if hasattr(exc, "add_note"):
        exc.add_note(note)


# (the package's root: the loops live in its folders)
_LOOP_FILES = frozenset(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), *name.split("/"))
    for name in ("run/inline.py", "run/poolloop.py", "worker/runtime.py", "plan/graph.py"))


def _clear_loop_frames(tb) -> None:
    """Drop the locals of the loops' finished frames that an exception
    reaches (its traceback, and the frames those were called from): they
    hold the run's state, whose failed tasks hold the exception, whose
    traceback holds the frames (a cycle only the collector would free).
    The frames themselves stay, so the traceback prints as before."""
    seen = set()
    while tb is not None:
        frame = tb.tb_frame
        while frame is not None and id(frame) not in seen:
            seen.add(id(frame))
            if frame.f_code.co_filename in _LOOP_FILES:
                try:
                    frame.clear()
                except RuntimeError:  # still running: not ours to clear
                    pass
            frame = frame.f_back
        tb = tb.tb_next
