"""How the pool loop runs one computation: decided once, before it starts.

``PoolSettings.for_run`` reads what the pool is (its workers share memory
or not, records stream back or not, results may come in shared memory) and
what the computation's callbacks need (``callbacks.Needs``), and answers
with every choice the loop then only reads: which results travel back,
when pretask fires, what a worker measures, whether a task's records take
the lean path.  One frozen object, so the loop's own attributes are what
changes during a run.

>>> from localsched.run.lifecycle import Computation
>>> from localsched.run.machine import RunState
>>> comp = Computation({'a': (abs, -1)}, [])
>>> with comp:
...     machine = RunState(comp.dsk, 'a'); _ = comp.open(machine)
...     s = PoolSettings.for_run(machine, comp, pack_data=True, stream=True,
...                              rerun=False)
>>> s.plain, s.direct, s.ahead, dict(s.probes)
(True, False, 1, {})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .lifecycle import Computation
    from .machine import RunState

__all__ = ["PoolSettings", "QUEUE_AHEAD"]

# Batches handed to a process pool beyond one per worker (see poolloop;
# thread pools need none: the hand-off is a queue).
QUEUE_AHEAD = 1


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """Every choice the pool loop makes once per run (see the module docstring)."""

    #: Workers share no memory with the caller: each batch is sent its inputs.
    pack_data: bool
    #: ``submit`` takes ``emit=``: records arrive as tasks end (else with the
    #: batch's result).
    stream: bool
    #: A failed task is re-run in the caller's thread (a debugger stops in it).
    rerun: bool
    #: Every result travels back: a posttask hook reads results (or a size a
    #: worker cannot measure is measured here, on the result).
    results_wanted: bool
    #: ... or may have to: also when a failed task may be re-run here.
    keep_all: bool
    #: A worker announces each batch as it starts (exact starts: pretask fires then).
    announce: bool
    #: pretask fires as the record arrives, just before posttask.
    late_starts: bool
    #: Fine metrics: per-task CPU, travel, idle and scheduler time.
    measure: bool
    #: Stack samples every that many seconds (0: none).
    sample: float
    #: Results' sizes are measured here, on the results (no record stream).
    size_here: bool
    #: What a worker is asked to measure (``run_batch``'s keywords; usually nothing).
    probes: Mapping[str, Any]
    #: Nothing watches each task (no hook, no kept records, no measurement):
    #: records take the lean path.
    plain: bool
    #: ... and nobody else holds the cache (no ``cache=`` of the caller's, no
    #: hook given the state): a thread worker running a batch of tiny results
    #: may write the shared cache itself (see ``PoolLoop._dispatch_one``).
    #: (After a failure or Ctrl-C the worker finishes its task before it sees
    #: ``cancelled``: only a cache nobody reads may take that write.)
    direct: bool
    #: Batches that may wait in the pool beyond one per worker.
    ahead: int

    @classmethod
    def for_run(cls, machine: RunState, comp: Computation, *, pack_data: bool,
                stream: bool, rerun: bool) -> PoolSettings:
        needs, pretasks = comp.needs, comp.pretasks
        results_wanted = needs.results or (needs.sizes and not stream)
        announce = bool(pretasks) and needs.exact_start and stream
        probes: dict = {}
        if needs.measure:
            probes["measure"] = True
        if needs.sample:
            probes["sample"] = needs.sample
        if needs.sizes and stream:  # (sizes measured in the worker: see runtime)
            probes["sizes"] = True
        keeps_records = comp.view.outcome.records is not None
        plain = not (pretasks or comp.posttasks or keeps_records or needs.measure
                     or needs.sample)
        return cls(
            pack_data=pack_data, stream=stream, rerun=rerun,
            results_wanted=results_wanted, keep_all=results_wanted or rerun,
            announce=announce, late_starts=bool(pretasks) and not announce,
            measure=needs.measure, sample=needs.sample,
            size_here=needs.sizes and not stream, probes=MappingProxyType(probes),
            plain=plain,
            direct=(plain and not pack_data and machine.owns_cache
                    and not comp.start_states and not comp.finishes),
            ahead=QUEUE_AHEAD if pack_data else 0,
        )
