"""The inline loop: every task in the caller's thread, by the ready rule.

The synchronous scheduler's loop.  When no callback at all takes part,
nothing can read the run's view, so a lean copy of the
loop (``_run_plain``) does only the run's moves: no note of the task
running, no times, no ``finished``/``released`` sets, the move inlined.
Otherwise it pops the top of the ready stack
(``RunState.ready``), runs the task here, completes it and fires the hooks;
a failing task raises its own exception with its own frames first.
A finished task's record is built when posttask hooks or the run's
records (``state.outcome.records``) want it.  Under a memory budget
(``localsched.run.budget``), the same loops take their tasks through a
``pop`` that lets the budget read the real memory now and then
(``_watching``: with no budget, a task pays nothing for it); once the
budget arms, the measured loop calls it before and after each task.
"""

from __future__ import annotations

import threading
import time

from .. import metrics as _metrics
from ..plan.graph import CALL, execute
from ..utils import add_note
from ..worker import runtime
from ..worker.records_wire import TaskRecord
from .budget import WATCH_EVERY, WATCH_FIRST
from .lifecycle import Computation
from .machine import DONE, READY, RUNNING, STATE_NAMES, WAITING, InvalidStateError, RunState
from .task_records import Writer

__all__ = ["run_inline"]


def run_inline(machine: RunState, comp: Computation, budget=None) -> float:
    """Run every task of ``machine`` in this thread; returns the CPU seconds
    the tasks took when ``comp.needs.measure`` (else 0).  ``budget``: a
    ``localsched.run.budget.Budget``, watched (``_watching``) by the plain
    or the observed loop until it arms, then the measured loop runs, where
    its hooks are."""
    needs = comp.needs
    if needs.measure or needs.sample:
        return _run_measured(machine, comp, budget)
    try:
        if comp.cbs:
            _run_observed(machine, comp, budget)
        else:
            _run_plain(machine, comp, budget)
    except _Armed:  # (tasks are left: the budget's hooks run from now on)
        return _run_measured(machine, comp, budget)
    return 0.0


class _Armed(Exception):
    """A watching budget armed (``_watching``): the loop hands over."""


def _watching(machine: RunState, budget):
    """The ready stack's ``pop`` for a loop while a memory budget only
    watches (see ``localsched.run.budget``: "Watching, then counting"):
    before each task, the budget reads the memory when it says (``poll``
    s after its last reading), after a task of ``LONG`` s or more (the
    time since the last pop: that task's, and its moves), and after 1,
    2, 4, ... up to ``WATCH_EVERY`` tasks; raises ``_Armed`` once it arms.
    A loop's own ``pop``: the loops are the same with a budget or none,
    and with none a task pays nothing for it."""
    pop, now, completed, long = machine.ready.pop, time.time, budget.completed, budget.long
    last = -1
    due = then = now()
    # (the count doubles up to WATCH_EVERY: a run of fast tasks -- memory
    # the allocator reuses is quick to fill -- may end within one poll)
    every = countdown = WATCH_FIRST

    def take() -> int:
        nonlocal last, due, then, every, countdown
        t = now()
        countdown -= 1
        if (t >= due or t - then >= long or countdown <= 0) and last >= 0:
            completed(last, True)  # (the task before: it has completed)
            if budget.armed:
                raise _Armed
            due = t + budget.poll  # (the budget's wait: longer far from its limit)
            every = countdown = min(2 * every, WATCH_EVERY)
        then = t
        last = pop()
        return last

    return take


def _run_observed(machine: RunState, comp: Computation, budget=None) -> None:
    """``run_inline`` while callbacks take part that neither measure nor
    sample (with a budget: until it arms, ``_watching``)."""
    keys, specs, cache, status, ready = (machine.keys, machine.specs, machine.cache,
                                         machine.status, machine.ready)
    pop = ready.pop if budget is None else _watching(machine, budget)
    state, dsk = comp.view, comp.dsk
    pretasks, posttasks = comp.pretasks, comp.posttasks
    complete = machine.mover()  # (RunState.mover's complete(i, value): a closure, for speed)
    now = time.time
    wid = threading.get_ident()
    new, record = tuple.__new__, TaskRecord  # (a record without a Python-level __new__)
    writer, sizes = _writer(state, comp)
    make_records = bool(posttasks) or writer is not None
    while ready:
        i = pop()
        key = keys[i]
        if status[i] != READY:
            raise InvalidStateError(f"task {key!r} started while {STATE_NAMES[status[i]]}")
        status[i] = RUNNING  # (before pretask: it sees the task running, as in dask)
        machine.current = i
        for f in pretasks:
            f(key, dsk, state)
        t0 = now()
        try:
            value = execute(specs[i], cache)
        except BaseException as exc:
            _failed(state, key, exc, t0, now(), wid)
            raise
        t1 = now()
        machine.current = None
        freed = complete(i, value)
        if make_records:  # (kept as plain values, no tuple: see task_records)
            size = _metrics.sizeof(value) if sizes else None
            if writer is not None:
                writer.keep(key, t0, t1, wid, freed, None, size)
            if posttasks:
                state.task = new(record, (key, t0, t1, wid, tuple(freed) if freed else (),
                                          None, None, None, size))
                for f in posttasks:
                    f(key, value, dsk, state, wid)
        value = None


def _run_plain(machine: RunState, comp: Computation, budget=None) -> None:
    """``run_inline`` when no callback at all takes part (nothing can read
    the state's view; with a budget, until it arms: ``_watching``): the
    run's moves only, with no bookkeeping that only a view reads
    (``finished``, ``released``, the task running now, the tasks' times).
    ``RunState.mover``'s move is
    spelled out here (a call per task saved), as in the threads' crew:
    keep the three in step.  The
    order, the releases and a failure's traceback are the other loops'."""
    keys, specs, cache, status, ready = (machine.keys, machine.specs, machine.cache,
                                         machine.status, machine.ready)
    waiting, dependents, deps = machine.waiting, machine.dependents, machine.deps
    refs, is_output = machine.refs, machine.is_output
    push, by_priority = ready.extend, machine.priority.__getitem__
    pop = ready.pop if budget is None else _watching(machine, budget)
    done = 0
    try:
        while ready:
            i = pop()
            if status[i] != READY:
                raise InvalidStateError(f"task {keys[i]!r} started while {STATE_NAMES[status[i]]}")
            spec = specs[i]
            try:
                if spec[0] == CALL and len(spec[3]) == len(spec[2]) == 2:  # (f, x, y), both keys
                    args = spec[2]
                    value = spec[1](cache[args[0]], cache[args[1]])
                else:
                    value = execute(spec, cache)
            except BaseException as exc:
                status[i] = RUNNING
                t = time.time()
                _failed(comp.view, keys[i], exc, t, t, threading.get_ident())
                raise
            cache[keys[i]] = value
            value = None
            status[i] = DONE
            done += 1
            new = None
            for d in dependents[i]:
                w = waiting[d] - 1
                waiting[d] = w
                if not w and status[d] == WAITING:
                    status[d] = READY
                    if new is None:
                        new = [d]
                    else:
                        new.append(d)
            if new is not None:  # (the ready rule: see RunState.mover)
                if len(new) > 1:
                    new.sort(key=by_priority, reverse=True)
                push(new)
            for d in deps[i]:
                r = refs[d] - 1
                refs[d] = r
                if not r and not is_output[d]:
                    del cache[keys[d]]
    finally:
        machine.remaining -= done


def _writer(state, comp: Computation) -> tuple[Writer | None, bool]:
    """(the run's records' writer or None, whether records carry sizes)."""
    records = state.outcome.records
    needs = comp.needs
    return (None if records is None else records.writer(needs.measure, needs.sizes)), needs.sizes


def _failed(state, key, exc: BaseException, t0: float, t1: float, wid) -> None:
    """Note a failed (or interrupted) task in the outcome; its own frames
    first in the traceback."""
    if isinstance(exc, Exception):
        state.outcome.failed[key] = (exc, t0, t1, wid)
        add_note(exc, f"while computing task {key!r}")
        exc.with_traceback(runtime.trim_traceback(exc.__traceback__))
    else:
        state.outcome.running_since[key] = (t0, wid)  # interrupted


def _run_measured(machine: RunState, comp: Computation, budget=None) -> float:
    """``run_inline`` while a callback measures or samples, or a budget holds."""
    keys, specs, cache, status, ready = (machine.keys, machine.specs, machine.cache,
                                         machine.status, machine.ready)
    state, dsk = comp.view, comp.dsk
    pretasks, posttasks = comp.pretasks, comp.posttasks
    measure, sample = comp.needs.measure, comp.needs.sample
    complete = machine.mover()  # (RunState.mover's complete(i, value): a closure, for speed)
    now = time.time
    wid = threading.get_ident()
    local = _metrics._local
    outer_sink = getattr(local, "sink", None)
    running = runtime.running_tasks
    outer_task = running.get(wid)
    cpu = runtime.thread_time
    spent = 0.0
    writer, sizes = _writer(state, comp)
    make_records = bool(posttasks) or writer is not None
    try:
        probe = None  # (not first in the try: see poolloop.PoolLoop.run)
        while ready:
            i = ready.pop()
            key = keys[i]
            if status[i] != READY:
                raise InvalidStateError(f"task {key!r} started while {STATE_NAMES[status[i]]}")
            status[i] = RUNNING
            machine.current = i
            if budget is not None:  # (its inputs back from disk, room for its output)
                budget.prepare(i)  # (nothing until the budget arms)
            for f in pretasks:
                f(key, dsk, state)
            if measure:
                sink = local.sink = []
                c0 = cpu()
            if sample:
                running[wid] = key
            t0 = now()
            try:
                value = execute(specs[i], cache)
            except BaseException as exc:
                _failed(state, key, exc, t0, now(), wid)
                raise
            t1 = now()
            if measure:
                c = cpu() - c0
                spent += c
                # (a records_wire.Probe: cpu, metrics; no marks or size here)
                probe = (c, sink or None, None, None, None, None)
            machine.current = None
            freed = complete(i, value)
            if budget is not None:
                budget.completed(i, t1 - t0 >= budget.long)
            if make_records:
                size = _metrics.sizeof(value) if sizes else None
                if writer is not None:
                    writer.keep(key, t0, t1, wid, freed, probe, size)
                if posttasks:
                    state.task = tuple.__new__(TaskRecord, (
                        key, t0, t1, wid, tuple(freed) if freed else (), None, probe, None, size))
                    for f in posttasks:
                        f(key, value, dsk, state, wid)
            value = None
    finally:
        local.sink = outer_sink
        if outer_task is None:
            running.pop(wid, None)
        else:  # a computation nested in a task: its task again
            running[wid] = outer_task
    return spent
