"""What a callback receives: the state view, one record per task, one outcome per run.

The public names of :mod:`localsched.run.state_view` (where the loops build
them): ``State`` (dask's read-only mapping of the scheduler state, plus
``state.task`` and ``state.outcome``), ``TaskRecord``, ``RunOutcome``,
``StateView`` (the interface every diagnostic reads, whatever loop produced
the state), ``DaskState`` and ``state_view`` (a dask scheduler's plain dict,
wrapped).  See that module's note for what each holds.  The arrow points
one way: this front reads the run; the run never imports the front.
"""

from __future__ import annotations

from .run.state_view import (
    DaskState,
    RunOutcome,
    State,
    StateView,
    TaskRecord,
    dependency_positions,
    state_view,
)

__all__ = ["State", "TaskRecord", "RunOutcome", "StateView", "DaskState", "state_view",
           "dependency_positions"]
