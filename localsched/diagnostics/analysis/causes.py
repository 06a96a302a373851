"""Findings whose cause lies around the tasks: the machine, BLAS, the pool,
the kind of wait.  Each reads ``facts.Facts`` and returns Findings, like
``rules``; a run that did not record what a rule needs (a saved run
without ``meta["load"]``, no fine metrics) leaves it silent.

``busy``
    Other processes took at least ``BUSY_SHARE`` (25 %) of the machine's
    CPU time during the recording (``meta["load"]``: ``machine_load``; a
    hypervisor's ``steal`` is no process's).
    Or this run's own workers, more than the cores, kept at least
    ``OWN_FULL`` (90 %) of them busy (seconds: the wall time beyond what as
    many workers as cores would take, at best).  Or, whatever the average
    (a load that comes and goes), other processes made the run's threads
    wait for a CPU at least ``WAIT_SHARE`` (20 %) of the recording's
    worker-seconds (of the load meter's ``cpu_wait``, at most their CPU
    seconds: ``_others_wait``; seconds: that wait over the workers).
    Tasks then wait for a CPU, and that looks like what the ``gil``,
    ``straggler`` and ``overhead`` findings read: those are held back
    (``HELD_BACK``) and the finding says which.  Seconds: the others' CPU
    seconds over the cores (the wall time they could have taken).
``blas``
    On threads with 2 or more workers, BLAS uses more than one thread per
    call (``meta["blas"]``: threadpoolctl, else the environment), workers x
    BLAS threads exceed the cores, groups spent at least ``BLAS_NONCPU``
    (35 %) of their task time off their own thread's CPU, and the process's
    threads that Python did not start (BLAS's pools: ``native_cpu``) spent
    at least ``BLAS_OUTSIDE`` (50 %) of those groups' CPU time and
    ``BLAS_HELPERS`` (25 %) of their time off it: BLAS's helpers worked
    while the tasks waited.  A busy machine makes tasks wait off their CPU
    too, but spends no CPU of this process.  On processes: see ``blas``.
    Seconds: half those groups' non-CPU time over the workers.
``start-up``
    On processes, worker processes starting and importing the tasks'
    modules (fine metrics' ``start-up``: a first batch's wait for its
    process, and decoding a batch that imported modules) took at least
    ``STARTUP_SHARE`` (20 %) of start-up plus task time and ``MIN_SECONDS``.
    Never ``transfer``: nothing of it is data moving.  Seconds: start-up
    over the workers.
``idle`` (more threads)
    On threads, without a ``blas`` finding and, on a ``busy`` machine, where
    the system measured the waits for a CPU (else they look like waits for
    I/O), groups not ``gil_bound`` (waiting for the GIL does too) holding at
    least half the task time spent at most ``IO_CPU_SHARE`` (20 %) of it,
    less their waits for a CPU (``Facts.cpu_waited``), on CPU (sleeping,
    waiting for I/O), and the what-if (``replay``) with more threads -- at
    most ``IO_MAX_THREADS`` (64) and as many as the CPU they did use allows --
    saves at least ``IO_SAVING`` (20 %) of the recorded time.  The number
    is the fewest threads within 10 % of the best; seconds: what they save.
"""

from __future__ import annotations

from ..reporting.naming import format_seconds
from .facts import Facts
from .finding import Finding, names, pct
from .replay import what_if

__all__ = ["busy", "is_busy", "blas", "start_up", "more_threads", "gil_bound", "gil_share",
           "HELD_BACK"]

MIN_SECONDS = 0.05
BUSY_SHARE = 0.25
WAIT_SHARE = 0.20
OWN_FULL = 0.9
HELD_BACK = ("gil", "straggler", "overhead", "blas")  # (blas: threads fighting for
# cores that other processes hold tells nothing of BLAS's own oversubscription)
BLAS_NONCPU = 0.35  # (twice the cores' threads: about half their time off it)
BLAS_OUTSIDE = 0.5
BLAS_HELPERS = 0.25  # (a pool's thread left spinning after NumPy's last call is
# no helper: sleeping tasks then wait for nothing it does)
STARTUP_SHARE = 0.20
IO_CPU_SHARE = 0.20
IO_MAX_THREADS = 64
IO_SAVING = 0.20
GIL_BOUND_LOOKS = 10
GIL_BOUND_SHARE = 0.5
GIL_LOADED_SHARE = 0.35


def _load(f: Facts) -> dict | None:
    load = f.run.meta.get("load")
    if not isinstance(load, dict):
        return None
    try:
        cores, seconds = float(load["cores"]), float(load["seconds"])
        machine, own = float(load["machine_cpu"]), float(load["own_cpu"])
    except (KeyError, TypeError, ValueError):
        return None
    if cores <= 0 or seconds <= 0:
        return None
    native, steal = load.get("native_cpu"), load.get("steal")
    steal = float(steal) if isinstance(steal, (int, float)) and steal > 0 else 0.0
    return {"cores": cores, "seconds": seconds, "others": max(0.0, machine - own - steal),
            "own": own,
            "native": float(native) if isinstance(native, (int, float)) else None,
            "wait": f.cpu_wait}


def _waited(f: Facts, load: dict, wait: float | None = None) -> bool:
    """Whether the run's threads waited for a CPU (``wait``: else all their
    measured wait) ``WAIT_SHARE`` of the recording's worker-seconds."""
    wait = load["wait"] if wait is None else wait
    return wait is not None and wait >= MIN_SECONDS \
        and wait >= WAIT_SHARE * load["seconds"] * f.workers


def _others_wait(load: dict) -> float | None:
    """Seconds of the run's threads' wait for a CPU that other processes
    can have caused: at most their CPU seconds.  Holding k cores, they keep
    at most k more of the run's threads waiting than its own threads alone
    would; the rest is the run's processes waiting for each other (a cold
    pool's parent and workers starting), no busy machine's."""
    wait = load["wait"]
    return None if wait is None else min(wait, load["others"])


def gil_share(f: Facts) -> float:
    """The share of the sampler's looks at a group that must have waited for
    the GIL: ``GIL_BOUND_SHARE`` (50 %), or ``GIL_LOADED_SHARE`` (35 %)
    where the run's threads waited for a CPU (``WAIT_SHARE``): a thread
    preempted while in code that released the GIL (NumPy's, pandas') leaves
    it free at looks that would find it held on a quiet machine."""
    load = _load(f)
    return GIL_LOADED_SHARE if load is not None and _waited(f, load) else GIL_BOUND_SHARE


def is_busy(f: Facts) -> bool:
    """Whether other processes took ``BUSY_SHARE`` of the machine's CPU, or
    this run's own workers, more than the cores, kept them ``OWN_FULL``."""
    return _busy_by(f) is not None


def _busy_by(f: Facts) -> str | None:
    """``"others"``, ``"own"`` (see ``is_busy``) or None."""
    load = _load(f)
    if load is None:
        return None
    capacity = load["cores"] * load["seconds"]
    if load["others"] >= MIN_SECONDS and load["others"] >= BUSY_SHARE * capacity:
        return "others"
    if f.workers > load["cores"] and load["own"] >= OWN_FULL * capacity:
        return "own"
    if _waited(f, load, _others_wait(load)):
        return "waited"
    return None


def busy(f: Facts, held: list) -> list:
    """The ``busy`` finding (see the module docstring); ``held``: the kinds
    of the findings it holds back, to name."""
    load, by = _load(f), _busy_by(f)
    if load is None or by is None:
        return []
    capacity = load["cores"] * load["seconds"]
    cores = int(load["cores"])
    plural = "s" if cores != 1 else ""
    if by == "own":
        return [Finding(
            "busy",
            f"The machine was busy: this run's {f.workers} workers on {cores} core{plural} "
            f"kept them all busy (this run: {pct(load['own'], capacity)} of them), so tasks "
            "waited for a CPU.",
            max(0.0, load["seconds"] * (1 - cores / f.workers)), [],
            f"at most {cores} workers for work that keeps a CPU busy (num_workers={cores}); "
            f"{_held(held)}.")]
    if by == "waited":
        wait, theirs = load["wait"] or 0.0, _others_wait(load) or 0.0
        part = "" if theirs >= wait else f", at most {format_seconds(theirs)} of it,"
        return [Finding(
            "busy",
            f"The machine was busy at times: the run's threads waited "
            f"{format_seconds(wait)} for a CPU "
            f"({pct(wait, load['seconds'] * f.workers)} of their time){part} for "
            f"other processes, which took {pct(load['others'], capacity)} of its {cores} "
            f"core{plural} on average, in bursts.",
            min(load["seconds"], theirs / f.workers), [],
            f"re-run on a quiet machine before trusting the timings; {_held(held)}.")]
    wait = load["wait"]
    waited = (f"; the run's threads waited {format_seconds(wait)} for a CPU"
              if wait is not None and wait >= MIN_SECONDS else "")
    return [Finding(
        "busy",
        f"The machine was busy: other processes used {pct(load['others'], capacity)} of "
        f"its {cores} core{plural} during the run (this run: "
        f"{pct(load['own'], capacity)}), so tasks waited for a CPU{waited}.",
        min(load["seconds"], load["others"] / load["cores"]), [],
        f"re-run on a quiet machine before trusting the timings; {_held(held)}.")]


def _held(held: list) -> str:
    if not held:
        return ("findings read from waits (the GIL, stragglers, scheduling overhead) are "
                "held back on a busy machine; those read from CPU seconds (a fixed cost "
                "per call) stand")
    return (f"its {', '.join(held)} finding{'s were' if len(held) > 1 else ' was'} held "
            "back: waiting for a CPU looks like them")


def _cpu_shares(f: Facts) -> dict:
    """``{group: (CPU seconds, non-CPU seconds)}`` of the tasks' own threads."""
    cpu, noncpu = f.metric("thread-cpu"), f.metric("thread-noncpu")
    return {g: (cpu.get(g, 0.0), noncpu.get(g, 0.0)) for g in set(cpu) | set(noncpu)
            if g is not None and cpu.get(g, 0.0) + noncpu.get(g, 0.0) > 0}


def _worker_blas(info: dict) -> tuple[int | None, str | None]:
    """(Processes.)  The threads per BLAS call in each worker, and the
    variable that set them: the user's, the most of those set (else
    localsched gave each worker its share of the cores: ``system.blas``)."""
    said = info.get("environment")
    if not isinstance(said, dict):  # (a run saved before it was recorded)
        return None, None
    best: tuple[int | None, str | None] = (None, None)
    for name, value in said.items():
        text = str(value).strip().split(",")[0]
        if text.isdigit() and (best[0] is None or int(text) > best[0]):
            best = (int(text), name)
    return best


def blas(f: Facts) -> list:
    """On processes, each worker's threads per call are those the user's
    environment set (``_worker_blas``; unset, localsched gave each worker
    its share of the cores: ``system.blas``), BLAS's threads' CPU is the
    process tree's outside the tasks' and the caller's threads
    (``_outside_tasks``), and the fix is to unset the variable."""
    info = f.run.meta.get("blas")
    load = _load(f)
    if not isinstance(info, dict) or f.kind not in ("threads", "processes") or f.workers < 2:
        return []
    threads, variable = ((info.get("threads"), None) if f.kind == "threads"
                         else _worker_blas(info))
    cores = load["cores"] if load else None
    if not isinstance(threads, int) or threads < 2 or not cores \
            or f.workers * threads <= cores:
        return []
    shares = _cpu_shares(f)
    heavy = [(g, n, c) for g, (c, n) in shares.items()
             if n >= BLAS_NONCPU * (c + n) and n >= MIN_SECONDS]
    if not heavy or load is None:
        return []
    heavy.sort(key=lambda gn: -gn[1])
    groups = [g for g, _, _ in heavy[:3]]
    noncpu = sum(n for _, n, _ in heavy)
    # (BLAS's own threads: the CPU of this process's threads Python did not
    # start -- on processes, the workers' CPU outside their tasks' threads; a
    # machine's load makes tasks wait without it)
    outside = load["native"] if variable is None else _outside_tasks(f, shares)
    if outside is None or outside < max(MIN_SECONDS, BLAS_OUTSIDE * sum(c for _, _, c in heavy),
                                        BLAS_HELPERS * noncpu):
        return []
    libraries = "/".join(info.get("libraries") or []) or "BLAS"
    if variable is not None:
        return [_worker_blas_finding(f, libraries, variable, threads, int(cores), noncpu, groups)]
    source = info.get("source")
    said = "" if source == "threadpoolctl" else f" ({source})"
    return [Finding(
        "blas",
        f"{libraries} ran {threads} threads per call{said} in each of {f.workers} workers on "
        f"{int(cores)} cores: {f.workers * threads} threads fought for the cores while "
        f"{names(groups)} spent {format_seconds(noncpu)} off their own CPU.",
        noncpu / f.workers / 2, groups,
        "one BLAS thread per worker: wrap the computation in threadpoolctl's "
        "`with threadpool_limits(1):` (pip install threadpoolctl), or set "
        "OPENBLAS_NUM_THREADS=1, MKL_NUM_THREADS=1 and OMP_NUM_THREADS=1 in the "
        "environment before NumPy is imported (set after, they have no effect).")]


def _outside_tasks(f: Facts, shares: dict) -> float | None:
    """(Processes.)  CPU seconds of the process tree outside the tasks'
    threads and the caller's: the workers' helpers (BLAS's pools)."""
    meta = f.run.meta.get("load")
    try:
        own, caller = float(meta["own_cpu"]), float(meta.get("caller_cpu") or 0.0)
    except (KeyError, TypeError, ValueError):
        return None
    return own - caller - sum(c for c, _ in shares.values())


def _worker_blas_finding(f: Facts, libraries: str, variable: str, threads: int, cores: int,
                         noncpu: float, groups: list) -> Finding:
    share = max(1, cores // f.workers)
    return Finding(
        "blas",
        f"{libraries} ran {threads} threads per call in each of {f.workers} worker processes "
        f"on {cores} cores ({variable}={threads} in the environment): "
        f"{f.workers * threads} threads fought for the cores while {names(groups)} spent "
        f"{format_seconds(noncpu)} off their own CPU.",
        noncpu / f.workers / 2, groups,
        f"unset {variable} before starting Python: localsched then runs each worker's BLAS "
        f"on its share of the cores ({share} thread{'s' if share > 1 else ''} here); or set "
        f"it to {share}.")


def start_up(f: Facts) -> list:
    if f.kind != "processes":
        return []
    seconds = sum(f.metric("start-up").values())
    if seconds < MIN_SECONDS or seconds < STARTUP_SHARE * (seconds + f.busy):
        return []
    return [Finding(
        "start-up",
        f"Worker processes took {format_seconds(seconds)} of worker time "
        f"({pct(seconds, seconds + f.busy)} of it with the tasks) starting and importing "
        "the tasks' modules before running them: no data was moving.",
        seconds / f.workers, [],
        "the pool is started once per script and reused by its later computations "
        "(localsched keeps it), so a longer script pays it once; for work that releases "
        "the GIL (NumPy, pandas, I/O), threads (scheduler=localsched.get) start nothing.")]


def gil_bound(f: Facts) -> set:
    """The groups whose tasks, on threads, mostly waited for the GIL: the
    sampler waited for it (``meta["gil_waits"]``, where the system says how
    long it waited for a CPU) at ``gil_share`` (50 %; loaded, 35 %) of at
    least ``GIL_BOUND_LOOKS`` (10) looks.  Their waits are no I/O (more
    threads would not help)."""
    if f.kind != "threads":
        return set()
    share = gil_share(f)
    out = set()
    for g, (looks, contended) in f.gil_looks.items():
        if looks >= GIL_BOUND_LOOKS and contended >= share * looks:
            out.add(g)
    return out


def more_threads(f: Facts) -> list:
    # (on a busy machine, or with BLAS's threads fighting, tasks wait for a
    # CPU, which looks like waiting for I/O: more threads would not help;
    # nor for tasks waiting for the GIL.  Where the system measured the
    # waits for a CPU, they are taken out of the tasks' time off the CPU:
    # what is left slept, read or fetched, busy machine or not)
    if f.kind != "threads" or not f.comps or blas(f) or (is_busy(f) and f.cpu_wait is None):
        return []
    shares = {g: (c, max(0.0, n - f.cpu_waited(g))) for g, (c, n) in _cpu_shares(f).items()}
    held = gil_bound(f)
    waiting = {g: (c, n) for g, (c, n) in shares.items()
               if c <= IO_CPU_SHARE * (c + n) and g not in held}
    spent = sum(c + n for c, n in waiting.values())
    if not waiting or spent < 0.5 * f.busy:
        return []
    cpu = sum(c + 0.0 for c, _ in shares.values())
    cpu_per_thread = cpu / max(sum(c + n for c, n in shares.values()), 1e-9)
    load = _load(f)
    cores = load["cores"] if load else 1.0
    limit = min(IO_MAX_THREADS, max(f.workers + 1, int(cores / max(cpu_per_thread, 1e-3))))
    counts = [n for n in (2, 4, 8, 16, 32, 64) if f.workers < n <= limit]
    if not counts:
        return []
    found = what_if(f.run, counts, comps=f.comps)
    if found is None:
        return []
    recorded = found["recorded"]["seconds"]
    best = min(found["workers"].values())
    n = min(c for c, s in found["workers"].items() if s <= 1.1 * best)
    saved = recorded - found["workers"][n]
    if saved < MIN_SECONDS or saved < IO_SAVING * recorded:
        return []
    groups = sorted(waiting, key=lambda g: -sum(waiting[g]))[:3]
    share = sum(c for c, _ in waiting.values()) / spent
    return [Finding(
        "idle",
        f"Tasks of {names(groups)} waited (slept, read, fetched) with only {share:.0%} of "
        f"their time on CPU, {f.workers} at a time: on {n} threads the run would take "
        f"about {format_seconds(found['workers'][n])} instead of "
        f"{format_seconds(recorded)} (what-if).",
        saved, groups,
        f"run it on {n} threads: compute(..., scheduler=localsched.get, num_workers={n}) "
        f"(or localsched.get(dsk, keys, num_workers={n})); waiting tasks leave the cores "
        "to each other.")]

