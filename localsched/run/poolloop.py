"""The pool loop: batches to a pool of workers, records back, hooks fired here.

::

    caller thread (PoolLoop.run)                     workers (runtime.run_batch)
    ────────────────────────────                     ───────────────────────────
    dispatch: Planner ─► batch ──submit(run_batch)──► for each task: t0, execute, t1
    wait:     events (SimpleQueue) ◄── emit([record, ...]) as tasks end
    handle records: complete, wake dependents, fire pretask/posttask
    handle a finished batch: its future is done, the worker is free again
    abort: stop in-process batches, say what was running, release handles

Only this thread touches the ``RunState`` and fires callbacks, so the
callbacks of one computation never run concurrently.  Except on threads
nobody watches (``PoolSettings.direct``, no ``chunksize``): there the
workers share the state under a lock and schedule themselves
(``threadloop.Crew``: no batch, no record; this thread only waits), under
a memory budget too until it arms.

Batches.  ``batching.Planner`` hands a worker a contiguous stretch of the
sequential run (about ``BATCH_BUDGET`` seconds of measured work, more on
a chain nobody else could help with), so memory stays depth-first; see
``localsched/run/batching.py``.  On processes one batch more than there are
workers waits in the pool (``QUEUE_AHEAD``): a worker that finishes gets
its next batch from the pool's listener, not from this thread.  A thread
is free once its batch's last task is reported (``handle``).

Timing.  ``posttask`` fires when a task's record arrives; ``state.task``
holds the ``start``/``end`` the worker measured around the call.  When a
callback needs exact starts, a worker announces each batch as it starts
and hands over finished records before each next task starts; that is
when ``pretask`` fires.  Otherwise pretask fires just before posttask.

Records.  A finished task's ``TaskRecord`` is built only when someone
reads it: posttask hooks (as ``state.task``) or callbacks that read the
run's records (``state.outcome.records``, kept here as plain values once
per task however many read them: ``lifecycle``, ``task_records``).

Results.  When no posttask hook needs results (``Needs.results``) and no
failed task may be re-run here, a result only later tasks of its batch use
stays in the worker (unless tiny and written to the shared cache by the
worker: ``direct``, ``batching``'s "Tiny results"). Results in shared
memory (``transport``) arrive as handles: the cache keeps them; posttask
hooks and the caller get the values.

Memory budget.  With one (``localsched.run.budget``), ``dispatch`` asks it
before each batch (``admit``: it may pause, or put a task that frees memory
on top) and ``handle`` tells it what each list of records completed; once
the budget arms, a batch takes only what fits (``Budget.fits``).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any

from ..metrics import NUMBERS, sizeof
from ..plan.graph import execute, flatten_keys
from ..utils import add_note, name_tasks
from ..worker.budget_worker import run_batch_trimmed
from ..worker.records_wire import CPU_NOTE, PROBE_NBYTES, PROBE_RECEIVED, SAMPLES_NOTE, TaskRecord
from ..worker.runtime import run_batch, run_batch_collect, trim_traceback
from . import batching as _batching
from .batching import Planner
from .flight import Flight, Overlay
from .lifecycle import Computation
from .machine import DONE, RUNNING, STATE_NAMES, InvalidStateError, RunState
from .pool_settings import QUEUE_AHEAD, PoolSettings
from .task_records import cpu_share, with_cpu_share
from .threadloop import Crew

__all__ = ["PoolLoop", "QUEUE_AHEAD"]


class PoolLoop:
    """One computation on a pool (see the module docstring).

    ``submit(fn, *args, **kwargs) -> Future``; ``pack_data``: workers share
    no memory with the caller (send each batch its inputs); ``stream``:
    ``submit`` takes ``emit=`` and records arrive as tasks end; else with
    the batch's result.
    """

    def __init__(self, machine: RunState, comp: Computation, submit: Callable, num_workers: int,
                 *, pack_data: bool, stream: bool, unpack_exception: Callable | None = None,
                 chunksize: int | None = None, rerun_exceptions_locally: bool = False,
                 on_interrupt: Callable | None = None, transport: Any = None,
                 budget: Any = None):
        self.machine, self.comp, self.submit = machine, comp, submit
        self.budget = budget  # (a memory budget, see localsched.run.budget)
        self.unpack_exception, self.on_interrupt = unpack_exception, on_interrupt
        self.transport = transport
        # Every choice made once for the run (which results travel back,
        # when pretask fires, what workers measure, the lean path ...).
        self.settings = settings = PoolSettings.for_run(
            machine, comp, pack_data=pack_data, stream=stream,
            rerun=rerun_exceptions_locally)
        self.state = comp.view
        # (RunState.mover's complete(i, value): a closure, for speed; no callback: no view)
        self.complete = machine.mover(views=bool(comp.cbs))
        # (Only results that cross processes in shared memory are "large";
        # a process's batch holds a copy of each input it is sent.)
        self.planner = Planner(machine, limit=chunksize, learn=transport is not None,
                               max_inputs=_batching.MAX_INPUTS if pack_data else None)
        self.events: SimpleQueue = SimpleQueue()
        self.cancelled: list = []  # made non-empty to stop in-process batches early
        self.inflight: dict = {}  # future -> Flight
        self.flights = machine.in_flight  # batch serial -> its task indices
        self.slots = machine.at  # batch serial -> its worker's task slot
        self.flight_of: dict = {}  # batch serial -> Flight
        self.successor: dict = {}  # after task a of a batch finishes, b starts
        self.stretch = None  # the last CPU note a worker sent (measuring, see runtime)
        # Each finished task's record is kept once for every callback that
        # reads the records (Needs.records): no hook of theirs runs per task.
        records = self.state.outcome.records
        needs = comp.needs
        self.writer = (records.writer(needs.measure, needs.sizes or settings.size_here)
                       if records is not None else None)
        self.idle = num_workers + settings.ahead  # batches that may start now
        self.idle_seconds = 0.0  # worker-seconds with a free worker and nothing ready
        # Results in shared memory arrive as handles, through an Inbox that
        # releases them once the run stops (made as the run starts: ``run``).
        self.load = self.inbox = self.shared_type = None
        # Where a process's records go (``run_batch``'s ``emit``, through the
        # pool): this loop's event queue, or with shared memory an
        # ``Inbox`` (``_shm.handles.Inbox.__call__``) that puts them there.
        self.emit = self.events.put
        if transport is not None:
            self.load = transport.load
            self.shared_type = getattr(transport, "SharedValue", None)
        self.ctx = contextvars.copy_context() if stream and not pack_data else None
        # Threads nobody watches schedule themselves (see ``threadloop``),
        # under a memory budget too until it arms (it then admits each batch).
        self.crew = (Crew(machine, self.complete, budget, views=bool(comp.cbs))
                     if settings.direct and self.ctx is not None and chunksize is None
                     and (budget is None or not budget.armed) else None)
        self.num_workers = num_workers

    # -- the steps ----------------------------------------------------------------

    def run(self) -> None:
        """Run every task; raise the first failure."""
        try:
            # (Not the try's first instruction: CPython 3.11 handles a signal
            # at a loop's backward jump as if at the instruction before the
            # loop's head, and a Ctrl-C there would skip the handler below.)
            machine = self.machine
            if self.transport is not None:
                # (counts this computation running in the segment store until
                # ``abort`` or ``hand_over_outputs`` counts it out: made in
                # this try, so that a Ctrl-C anywhere before cannot leave it
                # counted, and the store keeping every release for reuse)
                self.emit = self.inbox = self.transport.Inbox(self.events.put)
            if self.crew is not None and machine.remaining:
                self.run_crew(self.crew)
            while machine.remaining:
                self.dispatch()
                item = self.wait()
                if item is None:
                    continue
                if type(item) is list:  # records, about a millisecond's worth
                    self.handle(item)
                else:  # a batch's future: the worker is free again
                    self.handle_finished_batch(item)
                item = None  # (hold no result past its release while waiting)
            settings = self.settings
            if (settings.measure or settings.sample) and settings.pack_data and settings.stream:
                self.drain_notes()
            self.hand_over_outputs()
        except BaseException as exc:
            self.abort(exc)
            raise
        finally:
            try:
                self.planner.remember()  # for the next computation's first batches
            except Exception:  # noqa: BLE001 -- never instead of the run's own outcome
                pass

    def run_crew(self, crew: Crew) -> None:
        """Let the workers run the state themselves (``threadloop``); raise
        the first failure as ``fail`` does."""
        ctx = self.ctx
        assert ctx is not None
        crew.start(self.submit, self.num_workers, lambda: ctx.copy().run)
        failure = crew.wait()
        crew.release()  # (its threads may outlive this call: they hold nothing of the run)
        if failure is None:
            self.crew = None  # (handed over, or done: the batches' ways from here on)
        if failure is not None:
            i, exc, t0, t1, wid = failure
            failure = None
            if i < 0:  # not a task's: the loop's own fault
                raise exc
            self.fail(i, exc, t0, t1, wid)

    def dispatch(self) -> None:
        """Hand batches to the free workers while tasks are ready."""
        planner, budget = self.planner, self.budget
        while self.idle and planner.has_ready():
            if budget is not None and not budget.admit(self):
                break  # (paused: a running task will free memory or let it spill)
            # (spare: the other workers idle now, not counting the queue-ahead
            # slots of processes; the batch leaves them as many ready tasks)
            self._dispatch_one(planner, max(0, self.idle - self.settings.ahead - 1))
            self.idle -= 1
        if not self.inflight:  # nothing runs and nothing is ready: a bug
            raise InvalidStateError("scheduler stalled with tasks left")

    def _dispatch_one(self, planner: Planner, spare: int) -> None:
        settings = self.settings
        batch = planner.next_batch(spare)
        if self.budget is not None:  # (room for what the batch's tasks will make)
            self.budget.reserve(batch)
        direct = settings.direct and planner.tiny_batch
        items, data = planner.items(batch, keep_all=settings.keep_all,
                                    pack_data=settings.pack_data, direct=direct)
        machine = self.machine
        if not settings.pack_data:
            if len(batch) > 1 and not direct:
                # Results made inside the batch stay in the worker's overlay:
                # only this thread writes the shared cache, so what hooks
                # see in it is what the records have completed.
                data = Overlay()
                data.shared = machine.cache
            else:
                # One task (it only reads), or tiny results nobody watches
                # (``direct``: each is sent back too, see ``Planner.items``):
                # the worker writes the shared cache itself, the value this
                # thread then writes.  The scheduler frees a result only
                # once all its users reported, so never one a batch reads.
                data = machine.cache
        if settings.announce:
            # The worker announces when the batch starts; each later task
            # starts as soon as its predecessor's record is sent.
            successor = self.successor
            for a, b in zip(batch[:-1], batch[1:], strict=True):
                successor[a] = b
        flight = Flight(batch, time.time())
        if settings.pack_data and not data:
            flight.inputs = False  # (no "sending inputs" for it: its wait is start-up or queue)
        try:
            if self.ctx is not None:  # threads: in a copy of the caller's context
                # (emit: the thread's records straight onto the event queue, see ``wait``)
                # (slot: the task the thread runs now, for running_keys)
                slot = self.slots[planner.serial] = [0, -1]
                fut = self.submit(self.ctx.copy().run, run_batch, items, data, self.cancelled,
                                  settings.announce, emit=self.events.put, where=flight.where,
                                  slot=slot, **settings.probes)
            elif settings.stream:  # a process pool that routes ``emit`` back to this process
                # (an armed budget: the worker hands back what its tasks freed)
                armed = self.budget is not None and self.budget.armed
                fut = self.submit(run_batch_trimmed if armed else run_batch, items, data, None,
                                  settings.announce,
                                  emit=self.emit, **settings.probes)
                if settings.measure:  # the inputs were pickled by submit
                    flight.sent = (flight.dispatched, time.time())
                at_work = getattr(fut, "task_at_work", None)  # (a process pool's job:
                if at_work is not None:  # its worker's task slot, read only when asked)
                    self.slots[planner.serial] = at_work
            else:
                fut = self.submit(run_batch_collect, items, data)
        except Exception as exc:  # e.g. a task or an input that cannot be pickled
            # (The tasks that cannot be sent failed, for a post-mortem to
            # name; the others of the batch never ran.  None found: all.)
            culprits = [i for i in batch if not _sendable(machine.specs[i])] or batch
            add_note(exc, "while sending " + name_tasks([machine.keys[i] for i in culprits]))
            now, failed = time.time(), self.state.outcome.failed
            for i in culprits:
                failed[machine.keys[i]] = (exc, now, now, None)
            raise
        flight.future = fut
        self.inflight[fut] = flight
        self.flight_of[planner.serial] = flight
        self.flights[planner.serial] = batch
        if self.ctx is not None:
            # (threads: the worker is free once its batch's last task is
            # reported, see ``handle``; its future says only what went wrong)
            fut.add_done_callback(_unless_finished(self.events.put, slot, batch[-1]))
        else:
            fut.add_done_callback(self.events.put)

    def wait(self):
        """The next event (a list of records or a done future), or None
        after a short timeout (so a Ctrl-C is seen promptly)."""
        events = self.events
        if self.inbox is not None and events.empty():
            self.inbox.idle()  # unlink released segments while workers work
        try:
            ahead = self.settings.ahead
            if self.settings.measure and self.idle > ahead:  # free workers, nothing ready
                w0 = time.time()
                try:
                    return events.get(True, 0.1)
                finally:
                    self.idle_seconds += (self.idle - ahead) * (time.time() - w0)
            return events.get(True, 0.1)
        except Empty:
            return None

    def _free(self, flight: Flight) -> None:
        """A batch is over: its worker is free again."""
        del self.inflight[flight.future]
        serial = self.planner.mark[flight.batch[0]]
        self.flights.pop(serial, None)
        self.flight_of.pop(serial, None)
        self.slots.pop(serial, None)
        self.idle += 1

    def handle_finished_batch(self, fut) -> None:
        """A batch's future is done: its worker is free again."""
        flight = self.inflight.get(fut)
        exc = fut.exception()
        if flight is None:  # (threads: freed at its last record, then it raised)
            if exc is not None:
                raise exc
            return
        self._free(flight)
        machine = self.machine
        if exc is not None:
            # The whole batch failed (a worker died, a batch could not be
            # sent): the task its worker says it had started, or else any
            # unreported task of the batch may have been running.
            lost = [i for i in flight.batch if machine.status[i] == RUNNING]
            at = getattr(exc, "task_index", None)
            culprits = [at] if at is not None and at in lost else lost
            if not culprits:
                raise exc
            keys = [machine.keys[i] for i in culprits]
            naming = getattr(exc, "for_task", None)
            if naming is not None:
                named = naming(keys)
                self._lost_batch(flight, named, keys)
                raise named from exc
            add_note(exc, "while computing " + name_tasks(keys))
            self._lost_batch(flight, exc, keys)
            raise exc
        if self.settings.stream:
            for i in flight.batch:
                if machine.status[i] == RUNNING:  # stopped early: lost tasks
                    raise InvalidStateError(
                        f"task {machine.keys[i]!r} was dispatched but never reported")
            return
        self.handle(fut.result())

    def _lost_batch(self, flight: Flight, exc: BaseException, keys: list) -> None:
        """A batch failed as a whole: the task its worker was running
        failed with ``exc`` (``keys``: that task, or every task it may have
        been, when the worker could not say), so a post-mortem
        (``state.failed``, ``Profiler.failed``) names it.  Each started
        at the latest when the batch's last reported task ended."""
        now = time.time()
        running = flight.running_task(self.machine, now)
        if running is None:
            return
        _, start, wid = running
        if wid is None:
            wid = getattr(exc, "pid", None) or None  # (a process's worker id: its pid)
        failed = self.state.outcome.failed
        for key in keys:
            failed[key] = (exc, start, now, wid)

    def handle(self, records: list) -> None:
        """Complete each task of a list of records (and fire its hooks)."""
        if self.settings.plain:
            self.handle_plain(records)
        else:
            self.handle_records(records)
        if self.budget is not None:
            self.budget.completed_records(records)
        if self.ctx is not None and records:
            # Threads: a batch whose last task is reported has done its
            # work; its worker takes the next batch now, not after one more
            # wake-up of this thread for its future (``_unless_finished``).
            i, ok = records[-1][:2]
            if ok is not None:  # (a task's end, not a batch's start or a note)
                flight = self.flight_of.get(self.planner.mark[i])
                if flight is not None and flight.batch[-1] == i:
                    self._free(flight)

    def handle_plain(self, records: list) -> None:
        """``handle_records`` when nothing watches each task (see
        ``PoolSettings.plain``): complete each task, time its function and,
        on processes, learn how costly its results are to move."""
        complete, planner = self.complete, self.planner
        stats, group_of, observe = planner.stats, planner.group_of, planner.observe
        fresh, numbers = planner.fresh, NUMBERS  # (a set changed in place)
        # (processes: the groups whose results' cost of moving is known,
        # and those recalled as large not yet confirmed: sets changed in place)
        weighed = planner.weigher.decided if self.settings.pack_data else None
        unconfirmed, shared_type = planner.unconfirmed, self.shared_type
        for n, (i, ok, value, t0, t1, _, _) in enumerate(records):
            if not ok:  # a failure (or a note): the full path says what happened
                self.handle_records(records[n:])
                return
            complete(i, value)
            g = group_of[i]
            st = stats.get(g)
            if st is None or fresh or (st[3] and value is not None
                                       and type(value) not in numbers):
                observe(i, t1 - t0, value)
            else:  # (``observe``'s common case)
                st[0] += t1 - t0
                st[1] += 1
            if weighed is not None and value is not None:  # (as ``handle_records``)
                if type(value) is shared_type:
                    planner.large_result(i)
                elif g not in weighed:
                    planner.moved_result(i, value)
                elif unconfirmed:
                    planner.small_result(i)
            value = None
        if records:
            i, _, _, _, t1, wid, _ = records[-1]
            flight = self.flight_of.get(planner.mark[i])
            if flight is not None:
                flight.last_end, flight.worker_id = t1, wid

    def handle_records(self, records: list) -> None:
        """Complete each task of a list of records and fire its hooks (the
        per-task hot path)."""
        machine, comp, planner, settings = self.machine, self.comp, self.planner, self.settings
        keys, status, complete = machine.keys, machine.status, self.complete
        state, dsk = self.state, comp.dsk
        pretasks, posttasks = comp.pretasks, comp.posttasks
        late_starts, successor, flight_of, mark = (settings.late_starts, self.successor,
                                                   self.flight_of, planner.mark)
        unconfirmed = planner.unconfirmed  # (a set the planner changes in place)
        # (processes: the groups whose results' cost of moving is known)
        weighed = planner.weigher.decided if settings.pack_data else None
        group_of = planner.group_of
        shared_type, pack_data = self.shared_type, settings.pack_data
        new, record = tuple.__new__, TaskRecord
        results_wanted, size_here = settings.results_wanted, settings.size_here
        sizes = "sizes" in settings.probes  # (a size measured in the worker: its probe's nbytes)
        writer = self.writer  # (the run's records, when a callback reads them)
        measured = settings.measure
        make_records = bool(posttasks) or writer is not None
        arrived = time.time() if pack_data else 0.0
        last = len(records) - 1
        flight = None
        # (records_wire.Record tuples, unpacked)
        for n, (i, ok, value, t0, t1, wid, probe) in enumerate(records):
            if ok is None and i < 0:  # a note, not a task (see records_wire)
                self._note(i, value, wid)
                continue
            flight = flight_of.get(mark[i])
            if flight is not None:
                flight.last_end = t0 if ok is None else t1
                flight.worker_id = wid
            key = keys[i]
            if ok is None or late_starts:
                # A batch started (or we only learn it now): the task began.
                if status[i] != RUNNING:
                    raise InvalidStateError(
                        f"task {key!r} announced while {STATE_NAMES[status[i]]}")
                for f in pretasks:
                    f(key, dsk, state)
                if ok is None:
                    continue
            if not ok:
                self.fail(i, value, t0, t1, wid)
            freed = complete(i, value)
            planner.observe(i, t1 - t0, value)
            if type(value) is shared_type:
                planner.large_result(i)
            elif value is not None:
                if weighed is not None and group_of[i] not in weighed:
                    planner.moved_result(i, value)  # (a few results of each group)
                elif unconfirmed:
                    planner.small_result(i)
            if make_records:
                if not results_wanted:
                    value = None  # (not mapped from shared memory for nobody)
                elif self.load is not None:
                    value = self.load(value)
                size = (sizeof(value) if size_here  # (a pool without a record stream)
                        else probe[PROBE_NBYTES] if sizes else None)
                transfer = activities = None
                if pack_data:  # processes: the batch's travel (measured: its activities)
                    transfer, activities = self._travel(i, t0, t1, probe, flight,
                                                        arrived if n == last else None)
                if not measured:
                    probe = None  # (a probe that only carried the size)
                if writer is not None:  # (kept as plain values, no tuple: see task_records)
                    writer.keep(key, t0, t1, wid, freed, probe, size, transfer, activities)
                if posttasks:
                    if measured and self.stretch is not None:  # (its share of the CPU note)
                        probe = with_cpu_share(probe, cpu_share(*self.stretch, t1 - t0))
                    state.task = new(record, (key, t0, t1, wid, tuple(freed) if freed else (),
                                              transfer, probe, activities, size))
                    for f in posttasks:
                        f(key, value, dsk, state, wid)
            if successor:
                nxt = successor.pop(i, None)
                if nxt is not None:
                    k2 = keys[nxt]
                    for f in pretasks:
                        f(k2, dsk, state)
            value = None
        if measured and flight is not None:
            flight.arrived = arrived  # (when this hand-off's results arrived)

    def _travel(self, i: int, t0: float, t1: float, probe, flight: Flight | None,
                arrived: float | None) -> tuple[tuple, tuple | None]:
        """A process task's ``(transfer, activities)`` (``TaskRecord``'s
        fields): its batch's inputs' travel before it started (its batch's
        first task) and its result's after it ended; measured, the stretches
        of its batch's way in (serialize, transfer, start-up, deserialize)."""
        sent = 0.0
        if flight is not None and flight.batch[0] == i and flight.inputs:
            sent = max(0.0, t0 - flight.dispatched)
        transfer = (sent, max(0.0, arrived - t1) if arrived is not None else 0.0)
        activities: tuple | None = None
        arrival = probe[PROBE_RECEIVED] if probe is not None else None
        if arrival is not None and flight is not None and flight.sent is not None:
            (d0, d1), (received, decoded, imported) = flight.sent, arrival
            if imported:  # (decoding the job imported modules: the worker's start-up)
                decoded = min(max(decoded, received), t0)
                activities = (("serialize", d0, d1), ("transfer", d1, received),
                              ("start-up", received, decoded), ("deserialize", decoded, t0))
            else:
                activities = (("serialize", d0, d1), ("transfer", d1, received),
                              ("deserialize", received, t0))
        return transfer, activities

    def fail(self, i: int, exc: BaseException, t0, t1, wid):
        """A task raised: note it, maybe re-run it here, raise its exception."""
        machine = self.machine
        key = machine.keys[i]
        if self.unpack_exception is not None:
            exc = self.unpack_exception(exc)
        self.state.outcome.failed[key] = (exc, t0, t1, wid)
        if self.settings.rerun:
            inputs = machine.cache
            if self.load is not None:  # the values, not their handles
                inputs = {machine.keys[d]: self.load(machine.cache[machine.keys[d]])
                          for d in machine.deps[i]}
            _rerun_locally(machine.specs[i], inputs, key, exc)
        if isinstance(exc, Exception):
            add_note(exc, f"while computing task {key!r}")
        if exc.__traceback__ is not None:
            exc = exc.with_traceback(trim_traceback(exc.__traceback__))
        # (This frame keeps the exception, and the state's failed tasks
        # too: the lifecycle clears the loop's frames once it has finished.)
        raise exc

    def _note(self, i: int, value, wid) -> None:
        """A worker's note (``records_wire``: CPU, samples or a hand-off)."""
        outcome = self.state.outcome
        if i == CPU_NOTE:  # the CPU seconds of the next tasks in this list
            self.stretch = value
            if outcome.records is not None:
                outcome.records.cpu_note(*value)
            return
        if i == SAMPLES_NOTE:  # stack samples: (time, key, stack, seconds) each
            outcome.samples.extend((s[0], wid, *s[1:]) for s in value)
            return
        sent, start, dumped, stop = value  # (HANDOFF_NOTE)
        if not self.settings.measure or not sent:
            return
        flight = self.flight_of.get(self.planner.mark[sent[0]])
        if flight is not None:
            keys = self.machine.keys
            outcome.late.append(([keys[j] for j in sent], start, dumped, stop, flight.arrived))

    def drain_notes(self) -> None:
        """All tasks are done; wait for the batches still in flight (their
        last lists, measurements only: see runtime) to end, reading them."""
        inflight, events = self.inflight, self.events
        while inflight:
            try:
                item = events.get(True, 0.1)
            except Empty:
                continue
            if type(item) is list:
                for i, ok, value, _, _, wid, _ in item:
                    if ok is None and i < 0:
                        self._note(i, value, wid)
            else:
                flight = inflight.pop(item)
                serial = self.planner.mark[flight.batch[0]]
                self.flight_of.pop(serial, None)
                self.flights.pop(serial, None)
                self.slots.pop(serial, None)

    def hand_over_outputs(self) -> None:
        """Outputs in shared memory become the caller's own objects (mapped,
        not copied); their handles go, and with them the segments' names.
        Released explicitly, not left to the handle's last reference: the
        pool's listener thread may still hold the record list that brought it."""
        if self.load is None:
            return
        assert self.inbox is not None
        cache, load, release = self.machine.cache, self.load, self.transport.release
        for k in flatten_keys(self.machine.out_keys, []):
            handle = cache[k]
            cache[k] = load(handle)
            release(handle)
        self.inbox.end()

    def abort(self, exc: BaseException) -> None:
        """The computation stops (a failure, Ctrl-C): stop in-process batches,
        say which tasks were running, release what arrived."""
        self.cancelled.append(True)
        if self.crew is not None:
            futures = self.crew.futures
            self.crew.stop()
            self.crew.release()
            if isinstance(exc, KeyboardInterrupt) and self.on_interrupt is not None:
                self.on_interrupt(futures)
            return
        settings = self.settings
        if not settings.keep_all and not settings.direct:  # (direct: nobody else sees the cache)
            self._drop_placeholders()
        if self.inbox is not None:
            self.inbox.abandon(self.machine.cache, self._drain_events)
        stopped = time.time()
        outcome = self.state.outcome
        for fut, flight in self.inflight.items():
            if fut.cancel():  # still queued in the pool (QUEUE_AHEAD): never started
                continue
            task_index = getattr(fut, "task_index", None)  # (a process pool's job)
            at = task_index() if task_index is not None else None
            running = flight.running_task(self.machine, stopped, at)
            if running is not None and running[0] not in outcome.failed:
                outcome.running_since[running[0]] = running[1:]
        if isinstance(exc, KeyboardInterrupt) and self.on_interrupt is not None:
            self.on_interrupt(list(self.inflight))

    def _drop_placeholders(self) -> None:
        """The cache holds only values tasks returned, for the caller's
        ``cache=`` (dask's) and for callbacks given the state: a result
        that stayed in its worker's batch (only later tasks of the batch
        used it: see ``Planner.items``) was completed here as None, and is
        normally released when its last user ends; after a failure some
        users never ran, so take it out."""
        machine, mark = self.machine, self.planner.mark
        cache, index, status = machine.cache, machine.index, machine.status
        dependents, is_output = machine.dependents, machine.is_output
        for k in list(cache):  # (the live results: fewer than the tasks, after Ctrl-C too)
            i = index.get(k, -1)
            if i < 0:
                continue  # (not of this graph: the caller's own entry)
            batch = mark[i]
            if batch and status[i] == DONE and not is_output[i]:
                users = dependents[i]
                if users and all(mark[c] == batch for c in users):
                    del cache[k]

    def _drain_events(self) -> list:
        """What is waiting in the event queue now."""
        out, events = [], self.events
        while True:
            try:
                out.append(events.get_nowait())
            except Empty:
                return out


def _unless_finished(put: Callable, slot: list, last: int) -> Callable:
    """A thread batch's done callback: its future goes to the event queue
    (``put``) only if the batch did not end with its last task reported
    (cancelled, raised, stopped early), the loop's cue to find out why.
    Otherwise its records, queued before the future was done, have freed
    its worker already (``PoolLoop.handle``)."""

    def done(fut) -> None:
        if fut.cancelled() or fut.exception() is not None or slot[1] != last:
            put(fut)

    return done


def _sendable(spec) -> bool:
    """Whether a task's spec pickles for another process (asked only after
    a batch could not be sent, to name the task at fault)."""
    import cloudpickle

    try:
        cloudpickle.dumps(spec, protocol=5)
    except Exception:  # noqa: BLE001 -- whatever pickling raises: not sendable
        return False
    return True


def _rerun_locally(spec, cache, key, exc):
    """Re-run a failed task here, so that a debugger stops in its code."""
    execute(spec, cache)  # raises again, normally, with the task's own frames
    # It succeeded on a re-run: still report the original failure.
    add_note(exc, f"task {key!r} failed on its worker but succeeded when re-run locally")
