"""A run as a Trace Event Format file: what Perfetto UI and chrome://tracing open.

``chrome_trace(run)`` gives the JSON object form: one process ("localsched"),
one thread track per worker with a complete (``"ph": "X"``) slice per task
and its activities nested inside it, an extra track per worker for what
happened outside its tasks (process-pool transfers, activities outside the
task's run), and counters (``"ph": "C"``) for CPU, memory and cached
results; stack samples are instants (``"ph": "i"``) on their worker's
track, innermost frame first in ``args.stack``, the time each stands for
(the sampler's real period, up to the instant) in ``args.seconds``.  Timestamps are
microseconds since the run's first record (``otherData.t0`` holds that
instant in epoch seconds).  Slices on a track always nest properly: one
that would overlap the end of an enclosing slice is cut at that end (its
``args`` keep the full duration).  Workers are numbered as in the task
stream (``naming.worker_rows``).

What a small saved run can make the trace repeat is bounded: each name,
group, task text and frame is cut to ``naming.TEXT_LIMIT`` characters, and
the samples' stacks to a budget (``STACK_BUDGET``): a sample keeps its
innermost frames.
"""

from __future__ import annotations

import math

from ...utils import key_split
from ..reporting.naming import shown_text, worker_label, worker_rows
from .codec import task_text

__all__ = ["chrome_trace"]


def chrome_trace(run) -> dict:
    """The run (a ``RunData``) as a Trace Event Format object (see the module docstring)."""
    bounds = run.bounds()
    t0 = bounds[0] if bounds else 0.0
    pid = 1
    rows = _trace_rows(run)
    events: list = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": run.meta.get("title") or "localsched"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": 0}},
    ]

    def ns(t):
        return round((t - t0) * 1e9)

    # One track per worker for its tasks (tid 2*row+1), one beside it for
    # what happened outside its tasks (tid 2*row+2), made only when used.
    tracks: dict = {}

    def slice_(tid, name, cat, lo, hi, args):
        tracks.setdefault(tid, []).append([ns(lo), ns(hi), name, cat, args])

    runs: dict = {}  # key -> (tid, start, end) of the task's run, for nesting activities
    for r in run.tasks:
        tid = 2 * rows[r.worker_id] + 1
        runs[r.key] = (tid, r.start_time, r.end_time)
        slice_(tid, _name(r.key), "task", r.start_time, r.end_time,
               {"group": _group(r.key), "task": _task(r.task),
                "duration_s": r.end_time - r.start_time})
    for r in run.failed:
        tid = 2 * rows[r.worker_id] + 1
        runs[r.key] = (tid, r.start_time, r.end_time)
        slice_(tid, _name(r.key), "failed", r.start_time, r.end_time,
               {"group": _group(r.key), "error": r.error,
                "duration_s": r.end_time - r.start_time})
    for r in run.interrupted:
        tid = 2 * rows[r.worker_id] + 1
        runs[r.key] = (tid, r.start_time, r.stop_time)
        slice_(tid, _name(r.key), "interrupted", r.start_time, r.stop_time,
               {"group": _group(r.key), "duration_s": r.stop_time - r.start_time})
    for r in run.activities:
        own = runs.get(r.key)
        args = {"key": _name(r.key), "duration_s": r.stop - r.start}
        if own is not None and own[1] < r.stop and r.start < own[2]:
            # inside (or overlapping) its task's run: nested in its slice
            tid, lo, hi = own
            slice_(tid, shown_text(r.activity), "activity", max(r.start, lo), min(r.stop, hi),
                   args)
        else:
            slice_(2 * rows[r.worker_id] + 2, shown_text(r.activity), "activity", r.start,
                   r.stop, args)
    for r in run.transfers:
        tid = 2 * rows[r.worker_id] + 2
        if r.start_time > r.send_start:
            slice_(tid, "send inputs", "transfer", r.send_start, r.start_time,
                   {"key": _name(r.key), "duration_s": r.send})
        if r.receive_end > r.end_time:
            slice_(tid, "receive result", "transfer", r.end_time, r.receive_end,
                   {"key": _name(r.key), "duration_s": r.receive})

    for worker, row in rows.items():
        label = worker_label(worker, row)
        for tid, name in ((2 * row + 1, label), (2 * row + 2, f"{label}: outside tasks")):
            if tid in tracks:
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                               "args": {"name": f"{name} ({worker})" if worker is not None
                                        and tid % 2 else name}})
                events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                               "args": {"sort_index": tid}})
    for tid in sorted(tracks):
        for lo, hi, name, cat, args in _nested(tracks[tid]):
            events.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
                           "ts": lo / 1000, "dur": (hi - lo) / 1000, "args": args})

    for r in run.resources:
        ts = ns(r.time) / 1000
        events.append({"ph": "C", "name": "CPU (%)", "pid": pid, "ts": ts,
                       "args": {"cpu": float(r.cpu)}})
        events.append({"ph": "C", "name": "Memory (MB)", "pid": pid, "ts": ts,
                       "args": {"memory": float(r.mem)}})
    events += _cache_counters(run, pid, ns)
    # Stack samples of the workers' threads: instants on the worker's track
    # (samples of threads that ran no task have no track and are left out).
    samples = [r for r in run.samples if r.worker_id is not None
               and (row := rows.get(r.worker_id)) is not None and 2 * row + 1 in tracks]
    other = {"generator": "localsched", "t0": t0,
             "clock": "microseconds since t0 (epoch seconds)"}
    events += _sample_events(samples, rows, pid, ns, other)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def _sample_events(samples: list, rows: dict, pid: int, ns, other: dict) -> list:
    """The stack samples as instants, innermost frame first, within the
    stack budget (``other`` gets ``stack_frames_per_sample`` when it cut)."""
    depth, texts = _stack_depth(samples)
    events = []
    for r in samples:
        where = texts(r.stack)
        args = {"group": None if r.group is None else shown_text(r.group),
                "stack": where[:depth], "seconds": r.seconds}
        if len(where) > depth:
            args["outer_frames_left_out"] = len(where) - depth
        events.append({"ph": "i", "s": "t",
                       "name": shown_text(r.stack[-1][2]) if r.stack else "(idle)",
                       "cat": "sample", "pid": pid, "tid": 2 * rows[r.worker_id] + 1,
                       "ts": ns(r.time) / 1000, "args": args})
    if samples and depth < max(len(r.stack) for r in samples):
        other["stack_frames_per_sample"] = depth
    return events


#: The stack samples' frames written may add up to this many times the
#: characters the run holds them in (each distinct frame once, plus
#: ``_SAMPLE_CHARS`` per sample), plus ``STACK_SLACK``; beyond, every
#: sample keeps the same number of innermost frames (``otherData.
#: stack_frames_per_sample``, ``args.outer_frames_left_out``).  A saved run
#: shares each stack among the samples of it, so without this a small file
#: could make a huge trace.
STACK_BUDGET = 16
STACK_SLACK = 1_000_000
_SAMPLE_CHARS = 16


def _stack_depth(samples: list) -> tuple:
    """(frames written per sample, stack -> its frames' texts innermost first)."""
    cache: dict = {}  # id(stack) -> (stack, texts, characters): samples share stacks
    frame_text: dict = {}

    def described(stack) -> tuple:
        entry = cache.get(id(stack))
        if entry is None:
            out = []
            for frame in reversed(stack):
                text = frame_text.get(frame)
                if text is None:
                    filename, line, name = frame
                    text = frame_text[frame] = shown_text(f"{name} ({filename}:{line})")
                out.append(text)
            entry = cache[id(stack)] = (stack, out, sum(map(len, out)))  # (stack kept alive)
        return entry

    needed = frames = 0
    for r in samples:
        _, out, chars = described(r.stack)
        needed += chars
        frames += len(out)
    held = sum(map(len, frame_text.values())) + _SAMPLE_CHARS * len(samples)
    budget = STACK_BUDGET * held + STACK_SLACK
    deepest = max((len(r.stack) for r in samples), default=0)
    if needed <= budget:
        depth = deepest
    else:
        depth = max(1, int(budget / (needed / frames * len(samples))))
    return depth, lambda stack: described(stack)[1]


def _cache_counters(run, pid: int, ns) -> list:
    """Cached results (and their total ``cache_metric``) as counters, one
    event per instant the level changed."""
    if not run.cache:
        return []
    end = max(max(r.cache_time for r in run.cache),
              max((r.free_time for r in run.cache
                   if r.free_time is not None and math.isfinite(r.free_time)), default=0))
    changes = []
    for r in run.cache:
        metric = r.metric if math.isfinite(r.metric) else 0.0
        changes.append((r.cache_time, 1, metric))
        freed = r.free_time if r.free_time is not None and math.isfinite(r.free_time) else end
        changes.append((freed, -1, -metric))
    changes.sort(key=lambda c: (c[0], c[1]))  # frees first at equal times
    events = []
    count, total = 0, 0.0
    sized = run.cache_metric != "tasks"
    for i, (t, dc, dm) in enumerate(changes):
        count += dc
        total += dm
        if i + 1 < len(changes) and changes[i + 1][0] == t:
            continue  # one event per instant
        ts = ns(t) / 1000
        events.append({"ph": "C", "name": "Cached results", "pid": pid, "ts": ts,
                       "args": {"results": count}})
        if sized:
            events.append({"ph": "C", "name": f"Cached ({run.cache_metric})", "pid": pid,
                           "ts": ts, "args": {run.cache_metric: max(total, 0.0)}})
    return events


def _nested(slices: list) -> list:
    """Sort one track's ``[start_ns, end_ns, ...]`` slices and cut each that
    would overlap the end of an enclosing one at that end, so they nest."""
    slices.sort(key=lambda s: (s[0], -s[1]))
    open_ends: list = []
    for s in slices:
        while open_ends and open_ends[-1] <= s[0]:
            open_ends.pop()
        if open_ends and s[1] > open_ends[-1]:
            s[1] = open_ends[-1]
        open_ends.append(s[1])
    return slices


def _name(key) -> str:
    return shown_text(key)


def _group(key) -> str:
    return shown_text(key_split(key))


def _task(task):
    text = task_text(task)
    return text if text is None else shown_text(text)



def _trace_rows(run) -> dict:
    ids: set = set()
    for records in (run.tasks, run.failed, run.interrupted, run.transfers, run.activities):
        ids.update(r.worker_id for r in records)
    return worker_rows(ids)
