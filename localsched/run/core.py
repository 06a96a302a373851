"""The entry of every local scheduler: ``get_async``.

Design
======

One local computation is four pieces, each in its own module (imports point
downwards only)::

    core.get_async ─┬─► lifecycle.Computation   callbacks: which, what they need,
                    │                           start / start_state / finish
                    ├─► machine.RunState        the graph and its moves
                    │                           (events in, decisions out)
                    ├─► inline.run_inline       sync: tasks in this thread
                    └─► poolloop.PoolLoop       pools: batches out, records in
                              │
                              └─► runtime.run_batch (in the workers)

- ``machine``: the compiled, culled, ordered graph and the state of each
  task; knows nothing of pools, pipes, callbacks or diagnostics.  Its task
  states (``WAITING``, ``READY``, ``RUNNING``, ``DONE``) are defined there.
- ``lifecycle``: one computation's callbacks from ``start`` to ``finish``
  (on every exit path, with a state even when the graph is refused; every
  failing finish hook reported).  The cluster loop
  (``localsched.distributed``) uses it too, but not ``machine``: the
  cluster's scheduler runs the graph, and that loop follows it in its own
  ``ClusterState``.
- ``view``: what a callback receives: ``State`` (dask's mapping over the
  ``RunState``), one ``TaskRecord`` per task (``state.task``), one
  ``RunOutcome`` per run (``state.outcome``); and ``StateView``, the
  interface every diagnostic reads, which ``State``, the cluster loop's
  ``ClusterState`` and (wrapped by ``state_view``) dask's own schedulers'
  dict all offer.
- ``task_records``: the run's records (``state.outcome.records``) for the
  callbacks that read them, kept as plain values, read as tuples.
- ``runtime``: the worker side: running a batch, measuring, sampling.
- ``inline`` and ``poolloop``: the two local loops.  ``batching.Planner``
  says what a worker runs next.

What callbacks need (``callbacks.Needs``: results, exact starts, fine
metrics, samples) is asked once per computation, so runs nobody measures
pay nothing per task.

Nothing points back from the state to the loop or the lifecycle: when the
caller drops a computation's outputs, they go at once, with or without the
cyclic garbage collector.

>>> from operator import add
>>> get_async(None, 1, {'a': 1, 'b': (add, 'a', 1), 'c': [(add, 'b', 1), 'a']}, ['c', 'b'])
([3, 1], 2)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..callbacks import in_computation
from ..system.options import dask_config
from ..worker.runtime import thread_time
from . import budget as _budget
from .inline import run_inline
from .lifecycle import Computation
from .machine import InvalidStateError, RunState
from .poolloop import PoolLoop
from .state_view import State

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["get_async", "State", "InvalidStateError", "in_task"]


def in_task() -> bool:
    """Whether the calling code runs inside a computation (in a task, or in
    a callback of a running computation)."""
    return in_computation()


def _configured_cache() -> dict | None:
    """dask's config key ``cache``, as dask's get_async reads it, when it is
    a results dict (dask also allows a cachey.Cache there: not one)."""
    cache = dask_config("cache")
    return cache if isinstance(cache, dict) else None


def _check_sizes(num_workers: int, chunksize: int | None) -> None:
    if num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers!r}")
    if chunksize is not None and chunksize < 1:
        raise ValueError(f"chunksize must be at least 1, got {chunksize!r}")


def _run_pool(machine: RunState, comp: Computation, submit: Callable, num_workers: int,
              budget: Any, options: dict) -> float:
    """Run the graph on a pool (``PoolLoop``); the worker-seconds idle."""
    loop = PoolLoop(machine, comp, submit, num_workers, budget=budget, **options)
    try:
        loop.run()
    finally:
        idle = loop.idle_seconds
        del loop
    return idle


def get_async(
    submit: Callable[..., Future] | None,
    num_workers: int,
    dsk: Any,
    keys: Any,
    *,
    callbacks: Iterable | None = None,
    rerun_exceptions_locally: bool = False,
    pack_data: bool = False,
    stream: bool = True,
    unpack_exception: Callable | None = None,
    chunksize: int | None = None,
    on_interrupt: Callable[[list], None] | None = None,
    cache: dict | None = None,
    transport: Any = None,
    memory_limit: Any = None,
):
    """Compute ``keys`` of the graph ``dsk``; the core of every scheduler.

    Parameters
    ----------
    submit : callable or None
        ``submit(fn, *args, **kwargs) -> Future``, e.g. an Executor's submit.
        None runs every task inline in the caller's thread.
    num_workers : int
        How many batches may run at once (the executor's worker count).
    dsk : Mapping or object with ``__dask_graph__``
    keys : key or nested list of keys
        The result has the same nesting, lists becoming tuples.
    callbacks : iterable of Callback or 5-tuples, optional
        Fired for this call instead of the registered ones (as dask does).
    rerun_exceptions_locally : bool
        Re-run a failed task in the caller's thread, so a debugger stops in it.
    pack_data : bool
        Workers do not share memory with the caller: send each batch the
        dependency values it needs (process pools).
    stream : bool
        ``submit`` accepts an ``emit=`` keyword that delivers per-task records
        to the caller as tasks end (thread pools, localsched's process pool).
        Otherwise records arrive with the batch's result.
    unpack_exception : callable, optional
        Turns a failed record's value into the exception to raise.
    chunksize : int, optional
        At most this many tasks per batch (default: adaptive).
    on_interrupt : callable, optional
        Called with the running futures when the computation is abandoned
        (KeyboardInterrupt); may cancel or kill them.
    cache : dict, optional
        Results known already (key -> value): those tasks do not run.  The
        computation stores its live results here, as dask's ``cache=`` does.
    transport : module, optional
        ``localsched._shm.transport`` when results may arrive as handles to
        shared memory: the cache keeps the handles, posttask callbacks and
        the caller get the values, and a computation that stops releases
        the handles it holds.
    memory_limit : int, str or float, optional
        A memory budget (bytes, ``"4GB"``, a fraction, ``"auto"``; default:
        ``localsched.memory-limit``, else none): see ``localsched.run.budget``.

    Examples
    --------
    >>> from operator import add
    >>> get_async(None, 1, {'a': 1, 'b': (add, 'a', 1)}, ['b', ['a']])
    (2, (1,))
    """
    _check_sizes(num_workers, chunksize)
    comp = Computation(dsk, callbacks)
    if cache is None:
        cache = _configured_cache()
    with comp:
        machine = RunState(comp.dsk, keys, cache)
        comp.open(machine)  # (no local for the state: an error's frames would keep it)
        measure = comp.needs.measure
        # (read by fine metrics, wall x workers; the dashboard; the what-if)
        comp.view.outcome.extra["workers"] = 1 if submit is None else num_workers
        cpu_start = thread_time() if measure else 0.0
        inline_cpu = idle = 0.0
        budget = _budget.for_run(memory_limit, machine, comp, transport, pack_data)
        try:
            if submit is None:
                inline_cpu = run_inline(machine, comp, budget)
            else:
                idle = _run_pool(machine, comp, submit, num_workers, budget, dict(
                    pack_data=pack_data, stream=stream, unpack_exception=unpack_exception,
                    chunksize=chunksize, rerun_exceptions_locally=rerun_exceptions_locally,
                    on_interrupt=on_interrupt, transport=transport))
            if budget is not None:
                budget.finish()
        finally:
            if budget is not None:
                budget.close()
            if measure:
                # The scheduler's own overhead: CPU time of the caller's thread
                # in this call (the loop, the callbacks), minus the tasks it ran
                # itself (sync).  Waiting for workers costs no CPU.
                cpu = thread_time() - cpu_start - inline_cpu
                comp.view.outcome.overhead = (max(0.0, cpu), idle)
        result = machine.results()
    return result
