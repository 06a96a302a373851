"""Findings: what a run's records say to change, one :class:`Finding` per cause.

Each finding has a ``kind``, a ``title`` (one sentence), ``seconds`` (the
wall seconds the fix would save: worker-seconds over the workers, or the
what-if's; for ``memory`` how long results waited), ``groups`` (the task
groups involved, dask's ``key_split`` names) and ``fix`` (what to change).
Every rule reads measurements only (``facts.Facts``); a rule whose
measurements the run does not have (no samples, no sizes, no dependencies:
an older JSON) stays silent, so a finding is never a guess.  Findings come
most seconds first.  The ``busy``, ``blas``, ``start-up`` and more-threads
``idle`` rules are in ``causes``; a ``busy`` finding holds back
``causes.HELD_BACK``.  Where the sampler's stacks reach the user's own
code, titles name its function and line (``usercode``).

One function a rule, its thresholds module constants (tested on both
sides, ``tests/diagnostics/analysis/test_findings_thresholds.py``), its
docstring the rule in full: ``overhead`` (hand-offs dwarf short tasks; or
a library's fixed cost per call does, ``percall``),
``gil`` (threads wait for the GIL), ``memory`` (results held at the peak),
``spill`` (``budget.spill_finding``), ``critical-path`` (a chain no worker
count shortens), ``transfer`` (travel between processes), ``idle`` (the
caller's gaps, too few ready tasks) and ``straggler`` (a few slow tasks).
The reader's guide is ``docs/guides/findings.md``.

>>> from localsched.diagnostics.collectors.records import TaskData
>>> from localsched.diagnostics.runs.rundata import RunData
>>> tasks = [TaskData(('load-1', i), None, 0.0, 0.1, 1) for i in range(19)]
>>> tasks.append(TaskData(('load-1', 19), None, 0.0, 2.0, 1))
>>> [(f.kind, f.groups) for f in findings(RunData(tasks=tasks))]
[('straggler', ['load'])]
"""

from __future__ import annotations

import math

from ..reporting.naming import format_seconds, shorten
from . import causes
from .budget import budget_advice, spill_finding
from .crossing import crossing as crossing_cost
from .facts import Facts, union_length
from .finding import Finding, mb, names, pct
from .memory import lifetimes
from .percall import fixed_cost, library_only, loopless_user_code
from .replay import even_split_saving

__all__ = ["Finding", "findings", "KINDS"]

KINDS = ("overhead", "gil", "memory", "critical-path", "transfer", "idle", "straggler",
         "busy", "blas", "start-up", "spill")

MIN_SECONDS = 0.05
OVERHEAD_SHARE = 0.25
SHORT_TASK = 0.010
TARGET_TASK = 0.100
CHUNKS_PER_WORKER = 2
SOURCE_SHARE = 0.1
GIL_STRETCH = 1.8
GIL_MIN_SAMPLES = 20
GIL_ON_TIME = 0.15
GIL_ON_TIME_STRETCH = 1.2
GIL_CONTENDED_SHARE = 0.5
GIL_SHARE = 0.10
GIL_CONCURRENCY = 1.3
GIL_CPU_SHARE = 0.8
GIL_GAP_SHARE = 0.25
MEMORY_BYTES = 32e6
MEMORY_RESULTS = 4
MEMORY_SHARE = 0.6
CP_ONE_TASK = 0.8
CP_SHARE = 0.5
TRANSFER_SHARE = 0.20
IDLE_CALLER_SHARE = 0.20
IDLE_CALLER_SECONDS = 0.2
IDLE_SHARE = 0.25
STRAGGLER_TASKS = 8
STRAGGLER_FACTOR = 3.0
STRAGGLER_EXCESS = 0.05


def findings(run, facts: Facts | None = None, hold_back: bool = True) -> list:
    """The findings of ``run`` (a ``RunData``), most seconds first
    (``facts``: its ``Facts`` if already at hand; ``hold_back=False``: a
    ``busy`` finding holds none back, every rule's verdict is kept)."""
    facts = Facts(run) if facts is None else facts
    if not run.tasks:
        return []
    out: list = []
    for rule in (_overhead, _gil, _memory, _critical_path, _transfer, _straggler,
                 causes.blas, causes.start_up, causes.more_threads):
        out += rule(facts)
    # (idle for want of ready tasks: not when a chain or waiting tasks explain it)
    out += _idle(facts, chain=any(f.kind in ("critical-path", "idle") for f in out))
    out += [Finding(*t) for t in spill_finding(facts)]  # (analysis.budget: a budget's cost)
    held = [k for k in causes.HELD_BACK if any(f.kind == k for f in out)]
    busy = causes.busy(facts, held)
    if busy:  # (a busy machine's waits for a CPU look like these: held back)
        out = [f for f in out if not hold_back or f.kind not in causes.HELD_BACK] + busy
    # (overhead's other cause, from CPU seconds and stacks: no busy machine
    # makes it up, none holds it back; one overhead finding, this one where
    # both are found: a cause, where the hand-offs' gaps are a symptom --
    # on threads, pandas' Python per call makes its tasks take turns at the
    # GIL, and the gaps between them read as hundreds of µs of "scheduling"
    # a task; both fixes are fewer, bigger pieces)
    fixed = fixed_cost(facts)
    if fixed:
        out = [f for f in out if f.kind != "overhead"] + fixed
    out.sort(key=lambda f: -f.seconds)
    return out


def _where(f: Facts, group) -> str:
    """`` in udf_score (my_script.py:12)``: the user's code a group ran, if sampled."""
    code = f.user_code.get(group)
    return f" in {code}" if code else ""


_names, _pct, _mb = names, pct, mb


# -- the rules -------------------------------------------------------------------------

def _overhead(f: Facts) -> list:
    """The ``overhead`` rule.

    In the computations where the hand-off gaps -- a worker's wait between
    a task's end and the start of its next task when that task was ready
    already -- and the workers' wait while the scheduler prepared
    (compiled, ordered) the graph are at least ``OVERHEAD_SHARE`` (25 %) of
    hand-offs plus task time, they add up to at least ``MIN_SECONDS`` (50
    ms), and the groups named have median tasks shorter than ``SHORT_TASK``
    (10 ms). On processes and clusters the travel of inputs is taken out
    (that is ``transfer``); on threads the gaps' waits for the GIL other
    workers' tasks held (``Facts.gil_gaps``); everywhere the most of them
    that can have been waits for a CPU, the workers' own or for a GIL
    whose holder waited for one (``Facts.gap_cpu_waits``: a busy
    machine's, not the scheduler's). Seconds: those over the workers, less
    those the fix leaves (one hand-off in ``factor``), at most those computations'
    wall time (with their preparation) beyond their work. Fix: about
    ``TARGET_TASK`` (100 ms) of work per task (as chunk bytes where result
    sizes were measured) -- but bigger tasks need fewer chunks, and the
    ``factor`` leaves at least ``CHUNKS_PER_WORKER`` (2) of the sources'
    chunks (``_chunks``: the inputless tasks of the data-holding group with
    most of them) and of the group's tasks a worker: no finding where it is
    below 2 (tiny tasks split from chunks already that few, as a groupby's
    shuffle makes: the only bigger chunk is the whole, which leaves workers
    idle).
    """
    # (judged per computation: a run of tiny tasks beside one of long ones is
    # still one whose tiny tasks cost more to hand over than to run)
    gaps = busy = 0.0
    tasks = 0
    ceiling = 0.0  # (the most it could save: those computations' wall beyond their work)
    judged = []
    for comp, (handoffs, preparation, travel), (gil, _by), waited in zip(
            f.comps or (), f.overheads, f.gil_gaps, f.gap_cpu_waits, strict=True):
        n = comp.worker_count()
        # (the gaps less the waits for the GIL and for a CPU in them)
        spent = max(0.0, handoffs - gil - waited) + preparation * n
        if f.kind in ("processes", "cluster"):
            spent = max(0.0, spent - travel)
        worked = sum(comp.durations)
        if spent >= OVERHEAD_SHARE * (spent + worked):
            gaps, busy, tasks = gaps + spent, busy + worked, tasks + len(comp.keys)
            ceiling += max(0.0, comp.finished - comp.started + preparation - worked / n)
            judged.append(comp)
    if gaps < MIN_SECONDS:
        return []
    short = [(g, s) for g, s in f.stats.items() if s.median < SHORT_TASK]
    if not short:
        return []
    short.sort(key=lambda gs: -gs[1].tasks)
    many = sum(s.tasks for _, s in short)
    groups = [g for g, s in short[:3] if s.tasks >= 0.1 * many]
    g0, s0 = short[0]
    per_task = gaps / max(1, tasks)
    # (bigger tasks come from fewer chunks: at most as many fewer as leaves
    # CHUNKS_PER_WORKER of the sources' chunks, and of this group's tasks, a worker)
    source, sources = _chunks(f, judged)
    most = min(s0.tasks, sources or s0.tasks) // (CHUNKS_PER_WORKER * f.workers)
    factor = min(max(2, min(10_000, math.ceil(TARGET_TASK / max(s0.median, 1e-6)))), most)
    saved = min(gaps * (1 - 1 / max(factor, 1)) / f.workers, ceiling)
    if factor < 2 or saved < MIN_SECONDS / f.workers:
        return []  # (the chunks are as few as the workers allow: no fix gains)
    size = f.size(g0)
    if size is not None and size >= 64e3:
        how = (f"make each task of '{g0}' do about {factor:,}x more work: chunks of about "
               f"{_mb(min(size * factor, 256e6))} instead of {_mb(size)} (the "
               f"whole: {_mb(size * s0.tasks)})")
    else:
        how = (f"make each task of '{g0}' do about {factor:,}x more work (fewer, larger "
               "chunks or partitions; a bag's items batched; small steps fused)")
    if source is not None and sources >= 2 * factor:
        how += (f": the {sources:,} chunks or partitions of '{source}' as about "
                f"{sources // factor:,}")
    return [Finding(
        "overhead",
        f"Scheduling and hand-offs took {format_seconds(gaps)} of worker time "
        f"({_pct(gaps, gaps + busy)} of it): {tasks:,} tasks, a median "
        f"{format_seconds(s0.median)} each in {_names(groups)}, against about "
        f"{format_seconds(per_task)} of overhead per task{_where(f, g0)}.",
        saved, groups,
        how + f", so that a task takes ~{format_seconds(TARGET_TASK)}.")]


def _chunks(f: Facts, comps: list) -> tuple:
    """The chunks the work comes from: ``(group, count)`` of the tasks
    without inputs of the group that has the most of them, among the groups
    of such tasks that hold data -- at least ``SOURCE_SHARE`` (10 %) of the
    largest one's result bytes (where measured; else of its time): an
    array's chunks, a dataframe's partitions, not the index arrays of a
    shuffle or coordinates.  ``(None, 0)`` for none."""
    count: dict = {}
    spent: dict = {}
    for comp in comps:
        durations = comp.durations
        for i, deps in enumerate(comp.deps):
            if not deps:
                g = _group(comp.keys[i])
                count[g] = count.get(g, 0) + 1
                spent[g] = spent.get(g, 0.0) + durations[i]
    if not count:
        return None, 0
    sizes = {g: f.size(g) for g in count}
    if all(v is not None for v in sizes.values()):
        weight = {g: (sizes[g] or 0.0) * count[g] for g in count}
    else:
        weight = spent
    heaviest = max(weight.values())
    sources = [g for g in count if weight[g] >= SOURCE_SHARE * heaviest]
    source = max(sources, key=lambda g: (count[g], weight[g]))
    return source, count[source]


def _sample_interval(f: Facts) -> float | None:
    interval = f.run.meta.get("sample_interval")
    if isinstance(interval, (int, float)) and interval > 0:
        return float(interval)
    seconds = sorted(s.seconds for s in f.run.samples if s.seconds)
    return seconds[len(seconds) // 10] if len(seconds) >= GIL_MIN_SAMPLES else None


def _gil(f: Facts) -> list:
    """The ``gil`` rule.

    On threads with at least 2 workers, the sampler says Python code held
    the GIL: it needs the GIL to look, so such code delays its looks, while
    tasks asleep or in NumPy leave it free. Where the system says how long
    the sampler waited for a CPU (Linux: ``SampleProfiler.gil_waits``, its
    lateness less that wait, so that a machine busy with other processes
    does not count), at least ``GIL_CONTENDED_SHARE`` (50 %; where the run's
    threads waited for a CPU, ``causes.gil_share``: 35 %) of the looks at a
    group's tasks waited for the GIL (more than 1 ms). Elsewhere (and
    in runs saved without those waits): its samples stood for at least
    ``GIL_STRETCH`` (1.8) sampler intervals on average and fewer than
    ``GIL_ON_TIME`` (15 %) of its looks came on time (within 1.2
    intervals). Either way from at least ``GIL_MIN_SAMPLES`` (20) samples,
    while the group's tasks overlapped (at least 1.3 running at once on
    average), hold at least ``GIL_SHARE`` (10 %) of task time and, where
    fine metrics were taken, spent at most 80 % of their time on CPU.
    Or, samples or not: other workers' hand-off gaps beside its tasks were
    waits for the GIL (``Facts.gil_gaps``: longer than gaps with no task
    beside them, at most what the threads slept) for at least
    ``GIL_GAP_SHARE`` (25 %) of its task time less its waits for a CPU --
    tiny tasks of Python code (pandas on small frames) take turns, and the
    workers wait between them.
    Seconds: the group's non-CPU task time (without fine metrics, its time
    beyond one task at a time; without the sampler's evidence, none) less
    its share of the run's waits for a CPU (``Facts.cpu_waited``, where
    measured), plus those gaps' waits, over the workers, and never more
    than processes could save of its CPU time (``cpu × (1 - 1/workers)``:
    waits beyond were for a CPU). Fix: localsched's processes, unless pickling
    what would cross between them (``crossing``: results passed other than
    along a chain, the graph's literal inputs, pandas objects at their fixed
    cost, and each task's hand-off on processes) costs half what they save:
    then only the GIL-free rewrite.
    """
    if f.kind != "threads" or f.workers < 2:
        return []
    sampled = _gil_sampled(f)
    gapped: dict = {}
    for _total, by_group in f.gil_gaps:
        for g, v in by_group.items():
            gapped[g] = gapped.get(g, 0.0) + v
    cpu = f.metric("thread-cpu")
    out = []
    for g in sorted(set(sampled) | set(gapped), key=str):
        stats = f.stats.get(g)
        if stats is None or stats.total < GIL_SHARE * f.busy:
            continue
        stake, running, evidence = sampled.get(g, (0.0, None, None))
        gap = gapped.get(g, 0.0)
        if evidence is None:
            # (against its tasks' time less their waits for a CPU)
            if gap < MIN_SECONDS or gap < GIL_GAP_SHARE * (stats.total - f.cpu_waited(g)):
                continue
            evidence = "hand-off gaps beside its tasks, longer than with no task beside them"
        elif gap >= MIN_SECONDS:
            evidence += f"; {format_seconds(gap)} of it between tasks"
        stake += gap
        saved = stake / f.workers
        if cpu.get(g):
            # (processes could at best run the tasks' CPU time side by side:
            # waits beyond that were for a CPU, not for the GIL)
            saved = min(saved, cpu[g] * (1 - 1 / f.workers))
        if stake < MIN_SECONDS or saved < MIN_SECONDS / f.workers:
            continue
        at_once = f"its tasks ran {running:.1f} at a time on threads but waited" \
            if running is not None else \
            f"on {f.workers} threads, workers waited between its tasks"
        out.append(Finding(
            "gil",
            f"Python code in '{g}'{_where(f, g)} held the GIL: {at_once} "
            f"{format_seconds(stake)} ({evidence}).",
            saved, [g], _gil_fix(f, g, saved)))
    return out


def _gil_sampled(f: Facts) -> dict:
    """``{group: (seconds its tasks waited for the GIL, tasks running at
    once, evidence)}`` where the sampler says so (``_gil``)."""
    if not f.run.samples:
        return {}
    interval = _sample_interval(f)
    if not interval:
        return {}
    per_group: dict = {}
    for s in f.run.samples:
        if s.group is not None:
            per_group.setdefault(s.group, []).append(s.seconds or interval)
    cpu, noncpu = f.metric("thread-cpu"), f.metric("thread-noncpu")
    needed = min(GIL_CONTENDED_SHARE, causes.gil_share(f))
    out = {}
    for g, seconds in per_group.items():
        stats = f.stats.get(g)
        if stats is None or len(seconds) < GIL_MIN_SAMPLES:
            continue
        stretch = sum(seconds) / len(seconds) / interval
        on_time = sum(1 for x in seconds if x <= GIL_ON_TIME_STRETCH * interval) / len(seconds)
        evidence = f"the sampler's looks were {stretch:.1f}x late"
        waits = (f.run.meta.get("gil_waits") or {}).get(g)
        if waits and waits[0] >= GIL_MIN_SAMPLES:  # (measured: the waits for the GIL)
            contended = waits[1] / waits[0]
            on_time = 0.0 if contended >= needed else 1.0
            stretch = max(stretch, GIL_STRETCH)
            evidence = f"the sampler waited for the GIL at {contended:.0%} of its looks"
        spans = [(r.start_time, r.end_time) for r in f.run.tasks if _group(r.key) == g]
        running = stats.total / max(union_length(spans), 1e-9)
        if stretch < GIL_STRETCH or on_time >= GIL_ON_TIME or running < GIL_CONCURRENCY:
            continue
        if g in cpu and cpu[g] + noncpu.get(g, 0.0) > 0:
            if cpu[g] / (cpu[g] + noncpu.get(g, 0.0)) > GIL_CPU_SHARE:
                continue
            stake = noncpu.get(g, 0.0) - f.cpu_waited(g)
        else:
            stake = stats.total * (1 - 1 / running) - f.cpu_waited(g)
        out[g] = (max(0.0, stake), running, evidence)
    return out


def _gil_fix(f: Facts, g, saved: float) -> str:
    """Processes where what would cross between them costs less than they
    save, else only the GIL-free rewrite."""
    rewrite = (f"move the Python loop in '{g}' into code that releases the GIL (NumPy, "
               "pandas, Numba with nogil=True, Cython)")
    library, own = library_only(f, g), None
    if library is None:
        own = loopless_user_code(f, g)
    if library is not None or own is not None:  # (no loop to move: fewer calls)
        whose = (f"{library}'s own work per call (none of your code is in its tasks)"
                 if library is not None else
                 f"{own}, which has no loop, calling into its libraries")
        rewrite = (f"give each task of '{g}' more data (fewer, bigger chunks or partitions): "
                   f"the Python holding the GIL there is {whose}, paid once a task")
    size, cost = crossing_cost(f, g)
    if cost >= 0.5 * saved:
        moved = (f"{_mb(size)} of results and inputs would cross between them, "
                 if size is not None else "")
        return (f"{rewrite}: processes would not pay here ({moved}about "
                f"{format_seconds(cost)} of pickling and hand-offs).")
    moved = f" ({_mb(size)} of results and inputs would cross)" if size is not None else ""
    return (f"run it on localsched's processes: compute(..., "
            f"scheduler=localsched.multiprocessing.get){moved}, or {rewrite}.")


def _group(key) -> str:
    from ...utils import key_split

    return key_split(key)


def _memory(f: Facts) -> list:
    """The ``memory`` rule.

    The bytes held at the peak (``memory.memory_peak``) are at least
    ``MEMORY_BYTES`` (32 MB), at least ``MEMORY_RESULTS`` (4) results per
    worker were held then (more than the working set), and at most 2 groups
    hold ``MEMORY_SHARE`` (60 %) of them. Seconds: how long those results
    waited, on average. The fix names the groups whose tasks released them,
    and for a run without a memory budget which ``memory_limit`` would have
    held it and at what cost (``budget.budget_advice``).
    """
    peak = f.peak
    if peak is None or peak.bytes < MEMORY_BYTES:
        return []
    # (as the peak counts them: a result never freed is held to the run's end;
    # under a budget, not while on disk)
    held = [(r, leave) for r, size, enter, leave in lifetimes(f.run)
            if enter <= peak.time <= leave and size]
    if len(held) < MEMORY_RESULTS * f.workers:
        return []
    top = list(peak.by_group.items())[:2]
    if sum(b for _, b in top) < MEMORY_SHARE * peak.bytes:
        return []
    top = [(g, b) for g, b in top if b >= 0.2 * peak.bytes] or top[:1]
    groups = [g for g, _ in top]
    mine = [(r, leave) for r, leave in held if _group(r.key) in groups]
    waited = sum(leave - r.cache_time for r, leave in mine) / max(1, len(mine))
    ended: dict = {}
    for r in f.run.tasks:
        ended.setdefault(r.end_time, _group(r.key))
    users: dict = {}
    for r, _leave in mine:
        user = ended.get(r.free_time)
        if user is not None:
            users[user] = users.get(user, 0) + 1
    consumers = [u for u, _ in sorted(users.items(), key=lambda kv: -kv[1])][:2]
    parts = ", ".join(f"'{shorten(str(g), 40)}' {_mb(b)}" for g, b in top)
    until = f" until {_names(consumers)} used them" if consumers else ""
    return [Finding(
        "memory",
        f"At the peak {_mb(peak.bytes)} of results were held, mostly by {parts}: "
        f"{len(mine)} results waited {format_seconds(waited)} on average{until}.",
        waited, groups,
        (f"let {_names(consumers)} use them sooner: " if consumers else "")
        + f"smaller chunks of {_names(groups)}, a reduction in steps "
        "(split_every=...) instead of one wide task, or persist them on disk "
        "and read back what each step needs." + budget_advice(f))]


def _critical_path(f: Facts) -> list:
    """The ``critical-path`` rule.

    The longest chain with the measured hand-off after each task (what no
    number of workers shortens, ``replay.unlimited_makespan``) is at least
    ``CP_SHARE`` (50 %) of the time from the first task's start to the last
    one's end (per computation, summed), its tasks' own time at least
    ``MIN_SECONDS``, and longer than one task per computation, none of
    them ``CP_ONE_TASK`` (80 %) of the chain's own time: one long task is a
    ``straggler``'s matter (beside CPU hogs, one tiny ``inc`` of a tree of
    adds preempted for 190 ms made a chain of 11 "84 %" of the run).
    """
    cp = f.critical
    bound, span = f.chain_bound
    if cp is None or len(cp.keys) < 2 or len(cp.keys) <= len(f.comps or ()) \
            or cp.seconds < MIN_SECONDS or bound < CP_SHARE * span:
        return []
    durations = {r.key: r.end_time - r.start_time for r in f.run.tasks}
    if max(durations.get(k, 0.0) for k in cp.keys) >= CP_ONE_TASK * cp.seconds:
        return []
    on_chain: dict = {}
    for k in cp.keys:
        g = _group(k)
        on_chain[g] = on_chain.get(g, 0.0) + durations.get(k, 0.0)
    ranked = sorted(on_chain.items(), key=lambda kv: -kv[1])
    groups = [g for g, _ in ranked[:3]]
    g0, s0 = ranked[0]
    return [Finding(
        "critical-path",
        f"A chain of {len(cp.keys):,} dependent tasks needs {format_seconds(bound)} (with "
        f"its hand-offs) of the {format_seconds(span)} the tasks ran "
        f"({_pct(bound, span)}), mostly in {_names(groups)}: more workers would not make "
        "it faster.",
        cp.seconds, groups,
        f"shorten the chain: split the work of '{g0}' ({format_seconds(s0)} on the chain) "
        "into independent pieces that run side by side, or start independent work "
        "earlier so it overlaps the chain.")]


def _travel(f: Facts) -> tuple:
    """(seconds, {group: seconds}) of inputs and results travelling."""
    by_group: dict = {}
    for activity in ("transfer", "serialize", "deserialize"):
        for g, v in f.metric(activity).items():
            by_group[g] = by_group.get(g, 0.0) + v
    if not by_group and f.run.transfers:
        for t in f.run.transfers:
            g = _group(t.key)
            by_group[g] = by_group.get(g, 0.0) + max(0.0, t.send) + max(0.0, t.receive)
    if not by_group:
        for a in f.run.activities:
            if a.activity == "transfer":
                g = _group(a.key)
                by_group[g] = by_group.get(g, 0.0) + max(0.0, a.stop - a.start)
    return sum(by_group.values()), by_group


def _transfer(f: Facts) -> list:
    """The ``transfer`` rule.

    On processes or a cluster: the inputs' and results' travel (fine
    metrics' ``transfer``/``serialize``/``deserialize``, else the transfer
    records, else a cluster's transfer activities) is at least
    ``TRANSFER_SHARE`` (20 %) of travel plus task time and at least
    ``MIN_SECONDS``.
    """
    if f.kind not in ("processes", "cluster"):
        return []
    travel, by_group = _travel(f)
    if travel < MIN_SECONDS or travel < TRANSFER_SHARE * (travel + f.busy):
        return []
    groups = [g for g, _ in sorted(by_group.items(), key=lambda kv: -kv[1])
              if g is not None][:3]
    sizes = [x for x in (f.size(g) for g in groups) if x is not None]
    moved = f" (results of about {_mb(max(sizes))} each)" if sizes else ""
    where = "between processes" if f.kind == "processes" else "between workers"
    fix = ("use the threads scheduler (scheduler=localsched.get) if the work releases the "
           "GIL (NumPy, pandas, most I/O), or fuse steps so that less data crosses between "
           "processes"
           if f.kind == "processes" else
           "fuse steps so that dependent tasks run where their inputs are, and keep "
           "large intermediate results out of shuffles and gathers")
    return [Finding(
        "transfer",
        f"Moving inputs and results {where} took {format_seconds(travel)} "
        f"({_pct(travel, travel + f.busy)} of travel plus task time), mostly for "
        f"{_names(groups) or 'tasks'}{moved}.",
        travel / f.workers, groups, fix + ".")]


def _idle(f: Facts, chain: bool) -> list:
    """The ``idle`` rule.

    Two causes. The caller: with 2 or more computations the user's code
    asked for (``Facts.asked``: not those a library started inside the
    same call, as dask's ``set_index`` computes its divisions), time of the
    recording before and between them (graph building, submission, the
    script's own work; not the time after the last one; with one
    computation, that is its graph being built: nothing to fix) is at least
    ``IDLE_CALLER_SHARE`` (20 %) of the recording and at least
    ``IDLE_CALLER_SECONDS`` (200 ms: the first computation's own start-up,
    the pool's, stays below). Too few ready tasks: with 2 or more workers,
    the worker-seconds in which a worker had nothing it could run (fewer
    tasks ready or running than workers, from the measured ends and the
    dependencies) are at least ``IDLE_SHARE`` (25 %) of all worker-seconds
    and ``MIN_SECONDS`` -- unless a ``critical-path`` finding already
    explains them.
    """
    out = []
    caller = f.caller
    n = len(f.walls)
    if f.asked > 1 and caller >= IDLE_CALLER_SECONDS and caller >= IDLE_CALLER_SHARE * f.block:
        out.append(Finding(
            "idle",
            f"Workers waited {format_seconds(caller)} ({_pct(caller, f.block)} of the "
            f"recording) on the caller: before and between the {n} computation"
            f"{'s' if n != 1 else ''}, while it built graphs, imported or did other work.",
            caller, [],
            "if the computations share inputs, compute them together "
            "(dask.compute(a, b, ...)) or persist what they share, so that it is computed "
            "once; the time between them is the script's own (building graphs, reading, "
            "its other work), which no scheduler setting shortens."))
    starved, by_group = f.starved
    if chain or f.workers < 2 or starved < MIN_SECONDS \
            or starved < IDLE_SHARE * f.worker_seconds:
        return out
    groups = [g for g in by_group][:3]
    counts = ", ".join(f"'{g}' {f.stats[g].tasks}" for g in groups if g in f.stats)
    out.append(Finding(
        "idle",
        f"Workers had nothing ready to run for {format_seconds(starved)} of worker time "
        f"({_pct(starved, f.worker_seconds)}): too few tasks at once while "
        f"{_names(groups)} ran ({counts} tasks).",
        starved / f.workers, groups,
        f"split {_names(groups[:1])} into more, smaller tasks (more chunks or "
        f"partitions than the {f.workers} workers), or compute independent results "
        "together so that their tasks fill the gaps."))
    return out


def _straggler(f: Facts) -> list:
    """The ``straggler`` rule.

    In a group of at least ``STRAGGLER_TASKS`` (8) tasks, at most 10 % of
    them took more than ``STRAGGLER_FACTOR`` (3) times the group's median
    and more than ``STRAGGLER_EXCESS`` (50 ms) over it; what an even split
    would have saved (``replay.even_split_saving``; without dependencies,
    their time beyond the median over the workers) is at least
    ``MIN_SECONDS``.
    """
    import numpy as np

    out = []
    for g, s in f.stats.items():
        if s.tasks < STRAGGLER_TASKS:
            continue
        d = s.durations
        slow = np.flatnonzero((d > STRAGGLER_FACTOR * s.median)
                              & (d > s.median + STRAGGLER_EXCESS))
        if not len(slow) or len(slow) > 0.1 * s.tasks:
            continue
        excess = float((d[slow] - s.median).sum())
        saved = _saved_by_split(f, {s.keys[i] for i in slow.tolist()}, s.median)
        if saved is None:  # (dependencies not recorded: its time over the median)
            saved = excess / f.workers
        if saved < MIN_SECONDS:
            continue
        worst = int(slow[np.argmax(d[slow])])
        out.append(Finding(
            "straggler",
            f"{len(slow)} of the {s.tasks} tasks of '{g}'{_where(f, g)} took far longer "
            f"than the rest: {shorten(repr(s.keys[worst]), 60)} took "
            f"{format_seconds(float(d[worst]))} against a median "
            f"{format_seconds(s.median)}; split evenly, the run would save "
            f"{format_seconds(saved)}.",
            saved, [g],
            "look at the slow tasks' inputs: an uneven split (rechunk or repartition "
            "evenly), a slow file or a bigger partition; the rest of the group waits for "
            "them."))
    return out


def _saved_by_split(f: Facts, slow: set, median: float) -> float | None:
    """Seconds the run would save had the ``slow`` tasks' work been split
    evenly (``replay.even_split_saving``, per computation), or None when
    dependencies were not recorded."""
    if not f.comps:
        return None
    saved = 0.0
    for comp in f.comps:
        mine = {i: median for i, k in enumerate(comp.keys) if k in slow}
        if mine:
            saved += even_split_saving(comp, comp.worker_count(), mine)
    return saved
