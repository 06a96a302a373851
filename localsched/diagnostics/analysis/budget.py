"""What a memory budget says in the findings: the ``spill`` rule, and the
``memory_limit`` the ``memory`` finding suggests to a run without one.

``spill`` (``spill_finding``)
    In the computations run within a budget (``RunData.budgets``), writing
    and reading back spilled values took at least ``SPILL_SHARE`` (20 %)
    of their wall time and at least ``MIN_SECONDS`` (50 ms).  Seconds: the
    disk's seconds.  Groups: those whose results were written most (each at
    least a fifth of the bytes, two at most).  The fix: a larger budget
    where the machine has it (about the most held plus spilled at once), or
    less held at once (smaller chunks, an order that uses results soon,
    reductions in steps) or the intermediate read back persisted.

``budget_advice`` (appended to the ``memory`` finding's fix when the run
had no budget)
    Which ``memory_limit=`` would have held the run: results are kept under
    the budget's target (``TARGET``, 60 % of it, dask.distributed's
    ``memory.target``), so ``peak / TARGET`` needs no spilling, and the
    smallest budget that works keeps the largest task's footprint -- its
    inputs and its result, all in memory while it runs -- under the
    target: ``footprint / TARGET``.  Its cost: what is held above the
    target at the peak is written and read back once, at ``DISK_SPEED``
    (an assumed 500 MB/s; ``benchmarks/bench_spill.py`` measures a disk);
    spilling is opt-in (``localsched.memory.spill``), so the sentence says so.

``disk_stall`` (read by ``facts.Facts.overheads``)
    The workers' wait while the scheduler spilled: the disk's seconds
    inside a computation times its workers, taken out of its hand-off gaps
    so that the ``overhead`` rule does not blame the tasks' size for it.

All read measurements only: the budget's record, result sizes
(``CacheData`` in bytes) and the graphs' dependencies; without them they
stay silent.  They return plain tuples ``(kind, title, seconds, groups,
fix)``: ``rules`` makes them findings (this module does not import it).
"""

from __future__ import annotations

from ...run.budget_record import DISK_READ, DISK_WRITE
from ...utils import key_split
from ..reporting.naming import format_seconds

__all__ = ["spill_finding", "budget_advice", "disk_stall", "SPILL_SHARE", "TARGET",
           "DISK_SPEED"]

SPILL_SHARE = 0.20
MIN_SECONDS = 0.05
TARGET = 0.6
DISK_SPEED = 500e6


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:,.1f} MB"


def _limit_text(n: float) -> str:
    """A ``memory_limit`` value, rounded up to two significant figures of MB."""
    mb = max(1.0, n / 1e6)
    step = 10 ** max(0, len(str(int(mb))) - 2)
    return f"'{-(-int(mb) // step) * step}MB'"


def _wall(run, budgets: list) -> float:
    """The wall time of the budgeted computations (their timelines' spans,
    where the walls do not cover them)."""
    walls = [b - a for a, b in run.walls]
    spans = [b.timeline[-1][0] - b.timeline[0][0] for b in budgets if b.timeline]
    return max(sum(walls), sum(spans))


def spill_finding(f) -> list:
    """The ``spill`` finding of the run of ``f`` (a ``Facts``), as tuples."""
    budgets = list(getattr(f.run, "budgets", None) or ())
    events = [e for b in budgets for e in b.events]
    if not events:
        return []
    disk = sum(max(0.0, e[1] - e[0]) for e in events)
    wall = _wall(f.run, budgets)
    if disk < MIN_SECONDS or wall <= 0 or disk < SPILL_SHARE * wall:
        return []
    written = sum(e[4] for e in events if e[2] == DISK_WRITE)
    read = sum(e[4] for e in events if e[2] == DISK_READ)
    by_group: dict = {}
    for e in events:
        if e[2] == DISK_WRITE:
            g = key_split(e[3])
            by_group[g] = by_group.get(g, 0) + e[4]
    ranked = sorted(by_group.items(), key=lambda gb: (-gb[1], gb[0]))
    groups = [g for g, n in ranked[:2] if n >= 0.2 * written] or [g for g, _ in ranked[:1]]
    names = ", ".join(f"'{g}'" for g in groups)
    paused = sum(b.paused_seconds for b in budgets)
    waited = (f"; new work waited {format_seconds(paused)} above the pause threshold"
              if paused >= MIN_SECONDS else "")
    most = max((t[1] + t[2] for b in budgets for t in b.timeline), default=0)
    limit = max(b.limit for b in budgets)
    title = (f"Spilling to disk took {format_seconds(disk)} ({disk / wall:.0%} of the "
             f"{format_seconds(wall)} run within memory_limit {_mb(limit)}): {_mb(written)} "
             f"written and {_mb(read)} read back, mostly results of {names}{waited}.")
    fix = (f"if the machine has the memory, a larger budget (memory_limit="
           f"{_limit_text(most / TARGET)} holds what was held and spilled at once); else "
           f"hold less at once: smaller chunks of {names}, reductions in steps "
           "(split_every=...) so that results are used soon after they are made, or "
           "persist the intermediate that is read back (to disk: to_zarr/to_parquet) and "
           "read back what each step needs.")
    return [("spill", title, disk, groups, fix)]


def disk_stall(run, comp) -> float:
    """Worker-seconds of computation ``comp`` spent waiting while its
    scheduler wrote or read spilled values (it dispatches nothing then):
    the disk's seconds inside the computation times its workers."""
    seconds = sum(max(0.0, min(e[1], comp.finished) - max(e[0], comp.started))
                  for b in getattr(run, "budgets", None) or () for e in b.events)
    return seconds * comp.worker_count() if seconds else 0.0


def _footprints(run) -> tuple[float, object]:
    """The largest task footprint (its result's bytes plus its
    dependencies') and its key, from result sizes and the graphs."""
    sizes: dict = {}
    for r in run.cache:
        if r.metric is not None and r.metric == r.metric:  # (NaN: unknown)
            sizes[r.key] = float(r.metric)
    best, best_key = 0.0, None
    for g in run.graphs:
        keys = g.keys
        for i, deps in enumerate(g.deps):
            total = sizes.get(keys[i], 0.0) + sum(sizes.get(keys[d], 0.0) for d in deps)
            if total > best:
                best, best_key = total, keys[i]
    if best_key is None and sizes:
        best_key = max(sizes, key=sizes.__getitem__)
        best = sizes[best_key]
    return best, best_key


def budget_advice(f) -> str:
    """A sentence for the ``memory`` finding of a run without a budget:
    which ``memory_limit`` would have held it, and what it would cost (""
    when the run had a budget or sizes were not measured)."""
    peak = f.peak
    if peak is None or getattr(f.run, "budgets", None):
        return ""
    footprint, key = _footprints(f.run)
    no_spill = _limit_text(peak.bytes / TARGET)
    if footprint <= 0 or footprint >= 0.9 * peak.bytes:
        tail = ""
        if key is not None and footprint > 0:
            tail = (f" (no smaller budget can: the task '{key_split(key)}' alone needs "
                    f"{_mb(footprint)}, its inputs and result; reduce in steps so that no "
                    "task needs them all at once)")
        return (f" Or run it within a memory budget: memory_limit={no_spill} holds this run "
                f"without spilling{tail}.")
    smallest = footprint / TARGET
    spilled = max(0.0, peak.bytes - footprint)
    cost = 2 * spilled / DISK_SPEED
    return (f" Or run it within a memory budget: memory_limit={_limit_text(smallest)} with "
            f"spilling on (localsched.memory.spill=True) would have held it (its largest "
            f"task, '{key_split(key)}', needs {_mb(footprint)} with its inputs) by spilling "
            f"about {_mb(spilled)} at the peak, about {format_seconds(cost)} of disk at "
            f"{DISK_SPEED / 1e6:,.0f} MB/s; memory_limit={no_spill} or more needs no "
            "spilling.")
