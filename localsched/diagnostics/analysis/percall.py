"""The ``overhead`` finding's second cause: a library's fixed cost per call.

Tiny tasks that call a data library -- pandas on frames of a few thousand
rows, as a delayed pipeline of small pieces makes -- spend their CPU in the
library's own Python (checking arguments, building indexes and result
objects), a cost each call pays whatever the data's size: the hand-offs
between them are short, the GIL is the symptom, and the fix is fewer,
bigger pieces of data a task.  ``fixed_cost(f)`` says so from its causes:

- the group's tasks took under ``FIXED_TASK`` (10 ms) of CPU each
  (``thread-cpu``: no wait for a CPU is in them, so a busy machine does not
  make them up: ``rules.findings`` does not hold this finding back);
- of the sampler's looks at them, at least ``FIXED_LIBRARY_SHARE`` (50 %)
  were inside a library the task called (``usercode.library_of``: the first
  frame past the user's own code, and past the scheduler's: localsched,
  dask), from at least ``FIXED_MIN_SAMPLES`` (10) looks;
- the **fixed part** of a task's CPU -- what is left beyond the bytes it read
  and wrote (its inputs' and its result's measured sizes, the median task's)
  at ``VECTOR_RATE`` (500 MB/s: a vectorized pass runs at several GB/s)
  -- is at least ``FIXED_SHARE`` (50 %) of its CPU; a group none of whose
  tasks reads an input makes its data inside (random numbers, a file) on
  bytes no size shows, and is left out (dask's ``random-sum`` of 2 MB
  chunks, 0.84 ms of CPU a task, was told "about 0.84 ms whatever the
  data's size": 4x bigger chunks gained 6 ms of the 25 claimed).

Seconds: the fixed part the fix leaves out, ``tasks × fixed × (1 - 1/k)``
over the workers (on threads the GIL runs those calls one at a time: the
wall gains up to the workers' count more), summed over the groups that
qualify, ``k`` the factor: about ``TARGET_TASK`` (100 ms) of CPU a task,
but at least ``CHUNKS_PER_WORKER`` (2) tasks a worker left of the group and
of the pieces it comes from (the group of inputless tasks with the most of
them in its computations).  At least
``MIN_SECONDS`` over the workers, else no finding.

The same per-call Python is what a ``gil`` finding's fix must name where
the tasks run no loop of the user's: ``library_only`` (none of the user's
code in them) and ``loopless_user_code`` (the user's functions loop-free)
tell ``rules`` to say "more data a task", not "move the Python loop".
"""

from __future__ import annotations

import os
from statistics import median

from ...utils import key_split
from ..reporting.naming import format_seconds
from .facts import Facts
from .finding import Finding, names
from .usercode import has_loop, library_of, task_calls, task_code_files

__all__ = ["fixed_cost", "inside_library", "library_only", "loopless_user_code", "FIXED_TASK",
           "FIXED_LIBRARY_SHARE", "FIXED_MIN_SAMPLES", "VECTOR_RATE", "FIXED_SHARE"]

MIN_SECONDS = 0.05
FIXED_TASK = 0.010
FIXED_LIBRARY_SHARE = 0.5
FIXED_MIN_SAMPLES = 10
VECTOR_RATE = 500e6
FIXED_SHARE = 0.5
TARGET_TASK = 0.100
CHUNKS_PER_WORKER = 2
#: What runs the tasks, not what they call.
SCHEDULERS = frozenset({"localsched", "dask", "toolz", "tlz", "cloudpickle", "threading",
                        "concurrent", "queue", "multiprocessing", "python"})


def called_library(stack) -> str | None:
    """The library a sampled task was inside: the first frame past the
    user's own code (and past the scheduler's, for tasks without any), or
    None where the look found the user's code itself at work."""
    own = [i for i, fr in enumerate(stack) if library_of(fr[0]) is None]
    if own:
        start = own[-1] + 1
    else:  # (a task of the library's own: past the scheduler's frames)
        outer = [i for i, fr in enumerate(stack) if library_of(fr[0]) in SCHEDULERS]
        start = outer[-1] + 1 if outer else 0
    for fr in stack[start:]:
        name = library_of(fr[0])
        if name is not None and name not in SCHEDULERS:
            return name
    return None


def _libraries(f: Facts, groups: set) -> dict:
    """``{group: (looks, {library: looks inside it})}`` from the sampler,
    for ``groups``."""
    out: dict = {}
    for s in f.run.samples:
        if s.group not in groups or not s.stack:
            continue
        looks, inside = out.setdefault(s.group, [0, {}])
        out[s.group][0] = looks + 1
        name = called_library(s.stack)
        if name is not None:
            inside[name] = inside.get(name, 0) + 1
    return out


def inside_library(f: Facts, library: str) -> set:
    """The groups whose tasks the sampler saw inside ``library`` at least
    ``FIXED_LIBRARY_SHARE`` of ``FIXED_MIN_SAMPLES`` or more looks: what
    they make is that library's (a pandas task's result is a frame)."""
    return {g for g, (looks, inside) in _libraries(f, set(f.stats)).items()
            if looks >= FIXED_MIN_SAMPLES
            and inside.get(library, 0) >= FIXED_LIBRARY_SHARE * looks}


def library_only(f: Facts, group, least: int = 3) -> str | None:
    """The library whose own work ``group``'s tasks are, when none of the
    user's code is in them (dask's ``sum-partial`` on NumPy chunks, its
    shuffle in partd), else None.  From the functions its task specs call
    (``usercode.task_code_files``, a few tasks'), where recorded; else from
    at least ``least`` of the sampler's looks, none of which found the
    user's code inside the task; None when neither can tell."""
    files: list = []
    for r in [r for r in f.run.tasks if key_split(r.key) == group][:3]:
        found = task_code_files(r.task)
        if found is None:
            continue
        if any(library_of(name) is None for name in found):
            return None
        files += found
    if files:
        return _most([library_of(name) for name in files])
    looks, inside = 0, []
    for s in f.run.samples:
        if s.group != group or not s.stack:
            continue
        looks += 1
        if any(library_of(fr[0]) is None for fr in s.stack[_task_start(s.stack):]):
            return None
        inside.append(called_library(s.stack))
    return _most(inside) if looks >= least else None


def loopless_user_code(f: Facts, group, least: int = 3) -> str | None:
    """``fn (file.py:12)``: the user's function ``group``'s tasks call, when
    the tasks run each of the user's functions themselves (not handed to a
    library function, as a bag's ``map`` hands its lambda to a loop over the
    items: ``usercode.task_calls``), none of them loops
    (``usercode.has_loop``: dask's ``map_overlap`` of ``lambda b: b * 2 -
    1``) and at least ``least`` of
    the sampler's looks inside them found no other code of the user's (a
    helper those functions call, which might loop); else None.  The Python
    holding the GIL in such tasks is their calls into libraries."""
    codes: list = []
    for r in [r for r in f.run.tasks if key_split(r.key) == group][:3]:
        found = task_calls(r.task)
        if found is None:
            return None
        for code, called in found:
            if library_of(code.co_filename) is None:
                if not called:  # (handed to a library, which may call it an item at a time)
                    return None
                codes.append(code)
    if not codes or any(has_loop(c) for c in codes):
        return None
    known = {(c.co_filename, c.co_name) for c in codes}
    looks = 0
    for s in f.run.samples:
        if s.group != group or not s.stack:
            continue
        looks += 1
        if any(library_of(fr[0]) is None and (fr[0], fr[2]) not in known
               for fr in s.stack[_task_start(s.stack):]):
            return None
    if looks < least:
        return None
    code = codes[0]
    return f"{code.co_name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _task_start(stack) -> int:
    """Where a sampled stack enters its task: past localsched's frames (the
    caller's own, when its thread runs tasks too, are outside)."""
    outer = [i for i, fr in enumerate(stack) if library_of(fr[0]) == "localsched"]
    return outer[-1] + 1 if outer else 0


def _most(names: list) -> str:
    """The library named most, its work's own (the scheduler's last)."""
    counts: dict = {}
    for name in names:
        if name is not None:
            counts[name] = counts.get(name, 0) + (0.5 if name in SCHEDULERS else 1)
    return max(counts, key=lambda k: (counts[k], k)) if counts else "the libraries"


def _bytes_and_sources(f: Facts, group, sizes: dict) -> tuple:
    """(the median task's bytes read and written, where ``sizes`` were
    measured, else None -- None too when none of the group's tasks reads an
    input: a task that makes its data (random numbers, a file read) works
    on bytes no size shows; the group and count of the inputless tasks of
    the computations it ran in with the most of them: the pieces it comes
    from)."""
    moved: list = []
    roots: dict = {}
    reads = False
    for comp in f.comps or ():
        mine = [i for i, key in enumerate(comp.keys) if key_split(key) == group]
        if not mine:
            continue
        reads = reads or any(comp.deps[i] for i in mine)
        if sizes:
            moved += [sizes.get(comp.keys[i], 0.0) + sum(sizes.get(comp.keys[d], 0.0)
                                                         for d in comp.deps[i]) for i in mine]
        for i, deps in enumerate(comp.deps):
            if not deps:
                g = key_split(comp.keys[i])
                roots[g] = roots.get(g, 0) + 1
    source = max(roots, key=lambda g: (roots[g], str(g)), default=None)
    return (median(moved) if moved and reads else None), source, roots.get(source, 0)


def fixed_cost(f: Facts) -> list:
    """The ``overhead`` finding of a library's fixed cost per call (module
    docstring), [] where the causes are not all measured or not met."""
    cpu = f.metric("thread-cpu")
    if not cpu or not f.run.samples:
        return []
    tiny = {g for g, v in cpu.items() if g in f.stats and v < FIXED_TASK * f.stats[g].tasks}
    looked = _libraries(f, tiny)
    sizes = {r.key: float(r.metric) for r in f.run.cache if r.metric is not None} \
        if f.run.cache_metric in ("bytes", "nbytes") else {}
    rows = []
    for g, (looks, inside) in looked.items():
        stats = f.stats.get(g)
        if stats is None or not cpu.get(g) or looks < FIXED_MIN_SAMPLES or not inside:
            continue
        library, hits = max(inside.items(), key=lambda kv: kv[1])
        per_task = cpu[g] / stats.tasks
        if per_task >= FIXED_TASK or hits < FIXED_LIBRARY_SHARE * looks:
            continue
        moved, source, sources = _bytes_and_sources(f, g, sizes)
        if moved is None:
            continue  # (without sizes, no telling the fixed cost from the work)
        fixed = per_task - moved / VECTOR_RATE
        if fixed < FIXED_SHARE * per_task:
            continue
        most = min(stats.tasks, sources or stats.tasks) // (CHUNKS_PER_WORKER * f.workers)
        factor = min(max(2, int(TARGET_TASK / max(per_task, 1e-6))), most)
        if factor < 2:
            continue
        rows.append((stats.tasks * fixed * (1 - 1 / factor), g, library, per_task, fixed,
                     factor, source, sources))
    if not rows:
        return []
    rows.sort(key=lambda r: (-r[0], str(r[1])))
    saved = sum(r[0] for r in rows) / f.workers
    if saved < MIN_SECONDS / f.workers:
        return []
    _s, g, library, per_task, fixed, factor, source, sources = rows[0]
    groups = [r[1] for r in rows[:3]]
    calls = sum(f.stats[r[1]].tasks for r in rows)
    how = (f"give each task about {factor:,}x more data: fewer, bigger partitions or "
           "pieces (a dataframe's npartitions, a delayed loop's batches)")
    if source is not None and sources >= 2 * factor:
        how += f": the {sources:,} pieces of '{source}' as about {sources // factor:,}"
    code = f.user_code.get(g)
    return [Finding(
        "overhead",
        f"Tasks of {names(groups)} spent their CPU on the fixed cost of each call into "
        f"{library}: {calls:,} tasks of {format_seconds(per_task)} of CPU each ('{g}'"
        f"{' in ' + code if code else ''}), about {format_seconds(fixed)} of it whatever "
        f"the data's size (the sampler found the tasks inside {library} at "
        f"{_share(looked[g])} of its looks), paid once a task.",
        saved, groups,
        how + f", so that the fixed cost is paid {factor:,}x less often.")]


def _share(looked: tuple) -> str:
    looks, inside = looked
    return f"{max(inside.values()) / looks:.0%}" if looks else "-"
