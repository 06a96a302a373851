"""A checker for the Trace Event Format (what Perfetto UI and chrome://tracing load).

Written from the format's documented rules (the "Trace Event Format"
document of the Chromium/catapult trace viewer), not from our exporter:

* The file is JSON -- strict JSON, no ``NaN``/``Infinity`` -- either an
  array of events or an object whose ``traceEvents`` is that array;
  ``displayTimeUnit``, when present, is ``"ms"`` or ``"ns"``.
* Every event is an object with a one-character ``ph`` of a known phase and
  a ``pid``; ``args``, when present, is an object.
* Timestamps ``ts`` are numbers in microseconds (every phase but metadata
  has one); ``tid`` is required for thread-scoped events (B, E, X, and
  instant events of thread scope).
* ``X`` (complete) events have a ``name`` and a non-negative ``dur``.
* ``B``/``E`` pairs match per thread, last opened first closed.
* Slices (``X`` and ``B``/``E``) of one thread nest: a slice that starts
  inside another ends inside it too (the viewers draw a thread's slices as
  one stack).
* ``C`` (counter) events have a ``name`` and ``args`` with at least one
  series, every value a number (not a string, not a boolean).
* ``i``/``I`` (instant) events have a scope ``s`` of ``g``, ``p`` or ``t``
  if any.
* ``M`` (metadata) events are named ``process_name``, ``process_labels``,
  ``process_sort_index``, ``thread_name`` or ``thread_sort_index``, with
  ``args.name`` (a string) for names, ``args.sort_index`` (an int) for
  sort indices and ``args.labels`` for labels.

Two rules are ours, for traces meant for people: every process that has
events is named (``process_name``) and so is every thread with slices
(``thread_name``); and timestamps are not negative.

``check_trace(obj)`` returns the list of problems (empty: valid).
"""

from __future__ import annotations

import json
import numbers

__all__ = ["check_trace", "check_trace_text"]

PHASES = set("BEXiICbneMsStfPONDRc") | {"(", ")", "v", "V"}
METADATA = {"process_name", "process_labels", "process_sort_index", "thread_name",
            "thread_sort_index"}

#: Slack when comparing slice ends, in microseconds: timestamps are floats.
TOLERANCE = 1e-3


def _number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_trace_text(text: str) -> list[str]:
    """Parse strictly (NaN and Infinity are not JSON) and check."""

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    try:
        obj = json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        return [f"not strict JSON: {exc}"]
    return check_trace(obj)


def check_trace(obj) -> list[str]:
    problems: list[str] = []
    if isinstance(obj, dict):
        events = obj.get("traceEvents")
        if not isinstance(events, list):
            return ["the object form needs a traceEvents array"]
        unit = obj.get("displayTimeUnit", "ms")
        if unit not in ("ms", "ns"):
            problems.append(f"displayTimeUnit must be 'ms' or 'ns', not {unit!r}")
    elif isinstance(obj, list):
        events = obj
    else:
        return ["a trace is a JSON array or an object with traceEvents"]

    slices: dict = {}  # (pid, tid) -> [(start, end, index)]
    open_b: dict = {}  # (pid, tid) -> [(ts, name, index)]
    named_processes, named_threads = set(), set()
    used_processes, sliced_threads = set(), set()
    for i, e in enumerate(events):
        where = f"event {i}"
        if not isinstance(e, dict):
            problems.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or ph not in PHASES:
            problems.append(f"{where}: unknown phase {ph!r}")
            continue
        where = f"event {i} ({ph} {e.get('name')!r})"
        if "pid" not in e:
            problems.append(f"{where}: no pid")
        pid, tid = e.get("pid"), e.get("tid")
        if "args" in e and not isinstance(e["args"], dict):
            problems.append(f"{where}: args must be an object")
        if ph == "M":
            name, args = e.get("name"), e.get("args")
            if name not in METADATA:
                problems.append(f"{where}: unknown metadata event {name!r}")
            elif not isinstance(args, dict):
                problems.append(f"{where}: metadata needs args")
            elif name in ("process_name", "thread_name"):
                if not isinstance(args.get("name"), str):
                    problems.append(f"{where}: args.name must be a string")
                elif name == "process_name":
                    named_processes.add(pid)
                else:
                    if tid is None:
                        problems.append(f"{where}: thread_name needs a tid")
                    named_threads.add((pid, tid))
            elif name.endswith("sort_index"):
                if not isinstance(args.get("sort_index"), int):
                    problems.append(f"{where}: args.sort_index must be an integer")
            elif not isinstance(args.get("labels"), str):
                problems.append(f"{where}: args.labels must be a string")
            continue
        used_processes.add(pid)
        ts = e.get("ts")
        if not _number(ts):
            problems.append(f"{where}: ts must be a number of microseconds, got {ts!r}")
            continue
        if ts < 0:
            problems.append(f"{where}: negative ts {ts}")
        if ph in "BEX" or ph in "iI" and e.get("s", "t") == "t":
            if tid is None:
                problems.append(f"{where}: thread-scoped events need a tid")
        if ph in "BXCiI" and not isinstance(e.get("name"), str):
            problems.append(f"{where}: no name")
        if ph == "X":
            dur = e.get("dur")
            if not _number(dur) or dur < 0:
                problems.append(f"{where}: dur must be a non-negative number, got {dur!r}")
                continue
            slices.setdefault((pid, tid), []).append((ts, ts + dur, i))
            sliced_threads.add((pid, tid))
        elif ph == "B":
            open_b.setdefault((pid, tid), []).append((ts, e.get("name"), i))
            sliced_threads.add((pid, tid))
        elif ph == "E":
            stack = open_b.get((pid, tid))
            if not stack:
                problems.append(f"{where}: E without a matching B on its thread")
                continue
            start, _, j = stack.pop()
            if ts < start:
                problems.append(f"{where}: ends before its B (event {j}) begins")
            slices.setdefault((pid, tid), []).append((start, ts, j))
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args:
                problems.append(f"{where}: a counter needs args with at least one series")
            elif not all(_number(v) for v in args.values()):
                problems.append(f"{where}: counter values must be numbers: {args!r}")
        elif ph in "iI":
            if e.get("s", "t") not in ("g", "p", "t"):
                problems.append(f"{where}: instant scope must be g, p or t")
    for track, stack in open_b.items():
        for _, name, j in stack:
            problems.append(f"event {j} (B {name!r}): never ended on {track}")
    for track, spans in slices.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_: list = []
        for start, end, j in spans:
            while open_ and open_[-1][0] <= start + TOLERANCE:
                open_.pop()
            if open_ and end > open_[-1][0] + TOLERANCE:
                problems.append(f"event {j}: slice [{start}, {end}] on {track} overlaps the "
                                f"end of event {open_[-1][1]}'s slice (ends {open_[-1][0]}): "
                                "slices of a thread must nest")
            open_.append((end, j))
    for pid in used_processes - named_processes:
        problems.append(f"process {pid} has events but no process_name")
    for track in sliced_threads - named_threads:
        problems.append(f"thread {track} has slices but no thread_name")
    return problems
