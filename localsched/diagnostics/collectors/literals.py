"""What a graph carries in itself: the literal inputs of its tasks, sized
as a process pool would have to move them.

A bag made ``from_sequence``, a list of dicts in a task's arguments, the
data keys of a graph: such inputs are no task's result, so no result size
counts them, and a result's own size (``metrics.nbytes``) is shallow for
Python containers (a list of 10,000 dicts: 85 kB).  Moving them to a
worker process pickles every object in them, and that costs per object far
more than per byte.  ``graph_inputs`` estimates, per task group, what one
task's literal inputs hold: ``(objects, bytes)`` -- objects every Python
object the pickler meets, bytes the flat payload (strings, buffers, arrays).
The walk samples (at most ``SAMPLE`` items of a container, ``TASKS`` tasks of
a group, ``DEPTH`` levels) and scales: "enough to tell" whether processes
pay, at a cost of microseconds per group.

>>> walk([{"id": i, "name": "ab"} for i in range(1000)])  # (a list, 1,000 dicts of 4)
(5001, 36000)
>>> walk(b"x" * 1000)
(1, 1000)
"""

from __future__ import annotations

import sys

__all__ = ["walk", "graph_inputs"]

SAMPLE = 16
TASKS = 8
DEPTH = 8
MIN_BYTES = 1000  # (smaller inputs are not kept: nothing to weigh)
MIN_OBJECTS = 100

_FLAT = (str, bytes, bytearray, memoryview)
_SCALARS = (int, float, complex, bool, type(None))


def walk(value, depth: int = DEPTH) -> tuple:
    """``(objects, bytes)`` pickling ``value`` would meet (estimated)."""
    if isinstance(value, _FLAT):
        return 1, len(value)
    if isinstance(value, _SCALARS):
        return 1, sys.getsizeof(value)
    size = getattr(value, "nbytes", None)  # (arrays, frames: one buffer)
    if isinstance(size, int) and not isinstance(value, type):
        return 1, size
    if depth <= 0:
        return 1, 0
    if isinstance(value, dict):
        return _sampled(list(_first(value.items())), len(value), depth, pairs=True)
    if isinstance(value, (list, tuple)):
        n = len(value)
        step = max(1, n // SAMPLE)
        return _sampled(value[::step][:SAMPLE], n, depth)
    if isinstance(value, (set, frozenset)):
        return _sampled(list(_first(value)), len(value), depth)
    spec = type(value).__module__ == "dask._task_spec"
    if spec and hasattr(value, "value"):  # (a DataNode: a literal in the graph)
        return walk(value.value, depth - 1)
    if spec and hasattr(value, "args"):  # (a Task: its arguments)
        return walk((value.args, getattr(value, "kwargs", None) or {}), depth - 1)
    return 1, 0  # (functions, references, objects pickled by name: cheap)


def _first(items):
    for i, item in enumerate(items):
        if i >= SAMPLE:
            return
        yield item


def _sampled(items, n: int, depth: int, pairs: bool = False) -> tuple:
    if not items:
        return 1, 0
    objects = size = 0
    for item in items:
        for part in (item if pairs else (item,)):
            o, b = walk(part, depth - 1)
            objects, size = objects + o, size + b
    scale = n / len(items)
    return 1 + round(objects * scale), round(size * scale)


def graph_inputs(dsk, keys: list, deps: list, order) -> dict:
    """``{group: [objects, bytes]}`` of one task's literal inputs, on
    average over up to ``TASKS`` tasks of each group: its own arguments and
    the data keys it reads (keys of the graph that are no task).  ``keys``,
    ``deps``, ``order``: the computation's graph (``GraphData``)."""
    from ...utils import key_split

    ran = list(range(len(keys))) if order is None else order
    tasks = set(ran)
    seen: dict = {}
    named: dict = {}  # (key_split once per name: a group's keys share their first part)
    for p in ran:
        k = keys[p]
        name = k[0] if isinstance(k, tuple) and k and isinstance(k[0], str) else k
        g = named.get(name) if isinstance(name, str) else None
        if g is None:
            g = key_split(k)
            if isinstance(name, str):
                named[name] = g
        mine = seen.setdefault(g, [])
        if len(mine) < TASKS:
            mine.append(p)
    out = {}
    for g, positions in seen.items():
        objects = size = 0
        for p in positions:
            parts = [dsk.get(keys[p])] + [dsk.get(keys[d]) for d in deps[p] if d not in tasks]
            o, b = walk(parts)
            objects, size = objects + o, size + b
        if size >= MIN_BYTES * len(positions) or objects >= MIN_OBJECTS * len(positions):
            out[g] = [round(objects / len(positions)), round(size / len(positions))]
    return out
