"""The JSON form of a run: one object, columnar record lists, exact floats.

``encode_run(run)`` gives the JSON-able dict ``RunData.to_dict`` returns,
``decode_run(data)`` the keyword arguments that build the ``RunData`` back
(``RunData.from_dict``).  The layout:

* ``"format": "localsched-run"``, ``"version"``, ``"meta"``, ``"cache_metric"``;
* one object per record list (``tasks``, ``failed``, ``interrupted``,
  ``transfers``, ``resources``, ``cache``, ``activities``, ``samples``) with
  one array per field (*columnar*).  Times are ``{"base", "q", "k"}``:
  ``base + k * q`` gives each value back exactly (``_ticks``);
* keys, workers, task reprs, activity names, groups, stack frames and stacks
  are each stored once in a table (``keys``, ``workers``, ``task_reprs``,
  ...) and referenced by position.  Keys keep their type: a string, number,
  boolean or None as itself, a tuple as a JSON array (a key is never a
  list), bytes as ``{"bytes": hex}``; any other key becomes ``{"repr": ...}``
  and loads back as that string;
* ``graphs``: one object per computation, its dependencies (``keys`` as
  positions in ``keys``, ``deps`` as positions in its own ``keys``, ``order``
  the positions that ran in run order, or null), ``started``, ``finished``,
  ``workers``, ``submitted``, ``stack`` (the caller's frames as ``[file,
  line, function]``, outermost first); absent in runs saved before they
  were kept (read as none);
* ``budgets``: one object per computation run within a memory budget
  (``localsched.diagnostics.collectors.budgets``); absent in older runs (none);
* ``analysis`` (written, never read back: recomputed from the records):
  what ``localsched.diagnostics.analysis.overview`` says of the run --
  findings, critical path, memory peak, what-if -- for readers without
  localsched;
* floats are written exactly (``repr``), non-finite ones as ``{"float":
  "nan"}`` (or ``"inf"``, ``"-inf"``).  A record's ``task`` (the task spec,
  with its functions) is stored as its short repr: a task that was None or
  a string loads back as itself, anything else as the text the hovers show.

A report page embeds the same JSON in ``<script type="application/json"
id="localsched-data">`` (``DATA_ELEMENT_ID``); ``embedded_json`` finds it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

from ..collectors.budgets import decode_budgets, encode_budgets
from ..collectors.records import (
    ActivityData,
    CacheData,
    FailedTaskData,
    GraphData,
    InterruptedTaskData,
    ResourceData,
    SampleData,
    TaskData,
    TransferData,
)
from ..reporting.naming import short_repr

__all__ = ["FORMAT", "VERSION", "DATA_ELEMENT_ID", "encode_run", "decode_run",
           "embedded_json", "encode_key", "decode_key", "task_text"]

FORMAT = "localsched-run"
VERSION = 1

#: Where a report page embeds the run's JSON.
DATA_ELEMENT_ID = "localsched-data"


def encode_run(run) -> dict:
    """The run (a ``RunData``) as one JSON-able dict (layout: the module docstring)."""
    keys, workers, reprs = _Table(encode_key), _Table(encode_key), _Table(task_text)
    out: dict = {"format": FORMAT, "version": VERSION, "meta": run.meta,
                 "cache_metric": run.cache_metric}
    out["tasks"] = {
        "key": keys.codes(r.key for r in run.tasks),
        "task": reprs.codes(r.task for r in run.tasks),
        "start": _floats(r.start_time for r in run.tasks),
        "end": _floats(r.end_time for r in run.tasks),
        "worker": workers.codes(r.worker_id for r in run.tasks),
    }
    out["failed"] = {
        "key": keys.codes(r.key for r in run.failed),
        "task": reprs.codes(r.task for r in run.failed),
        "start": _floats(r.start_time for r in run.failed),
        "end": _floats(r.end_time for r in run.failed),
        "worker": workers.codes(r.worker_id for r in run.failed),
        "exc_type": [r.exc_type for r in run.failed],
        "message": [r.message for r in run.failed],
    }
    out["interrupted"] = {
        "key": keys.codes(r.key for r in run.interrupted),
        "task": reprs.codes(r.task for r in run.interrupted),
        "start": _floats(r.start_time for r in run.interrupted),
        "stop": _floats(r.stop_time for r in run.interrupted),
        "worker": workers.codes(r.worker_id for r in run.interrupted),
    }
    out["transfers"] = {
        "key": keys.codes(r.key for r in run.transfers),
        "worker": workers.codes(r.worker_id for r in run.transfers),
        "send_start": _floats(r.send_start for r in run.transfers),
        "start": _floats(r.start_time for r in run.transfers),
        "end": _floats(r.end_time for r in run.transfers),
        "receive_end": _floats(r.receive_end for r in run.transfers),
    }
    out["resources"] = {
        "time": _floats(r.time for r in run.resources),
        "mem": _floats(r.mem for r in run.resources),
        "cpu": _floats(r.cpu for r in run.resources),
    }
    out["cache"] = {
        "key": keys.codes(r.key for r in run.cache),
        "task": reprs.codes(r.task for r in run.cache),
        "metric": _floats(r.metric for r in run.cache),
        "cache_time": _floats(r.cache_time for r in run.cache),
        "free_time": _floats(r.free_time for r in run.cache),
    }
    out["metrics"] = [[list(span), group, activity, unit, _float(value)]
                      for (span, group, activity, unit), value in run.metrics.items()]
    names = _Table(lambda name: name)
    out["activities"] = {
        "key": keys.codes(r.key for r in run.activities),
        "activity": names.codes(r.activity for r in run.activities),
        "start": _floats(r.start for r in run.activities),
        "stop": _floats(r.stop for r in run.activities),
        "worker": workers.codes(r.worker_id for r in run.activities),
    }
    out["activity_names"] = names.values
    frames = _Table(list)
    stacks = _Table(lambda stack: [frames.code(frame) for frame in stack])
    groups = _Table(lambda group: group)
    out["samples"] = {
        "time": _floats(r.time for r in run.samples),
        "worker": workers.codes(r.worker_id for r in run.samples),
        "group": groups.codes(r.group for r in run.samples),
        "stack": stacks.codes(tuple(r.stack) for r in run.samples),
        "seconds": _floats(r.seconds for r in run.samples),
    }
    out["sample_groups"] = groups.values
    out["stacks"] = stacks.values
    out["frames"] = frames.values
    out["walls"] = [_floats(w) for w in run.walls]
    out["graphs"] = [{"keys": keys.codes(g.keys), "deps": [list(d) for d in g.deps],
                      "order": None if g.order is None else list(g.order),
                      "started": _float(g.started), "finished": _float(g.finished),
                      "workers": g.workers, "submitted": _float(g.submitted),
                      "inputs": getattr(g, "inputs", None),
                      "stack": _stack(getattr(g, "stack", None))}
                     for g in getattr(run, "graphs", ())]
    out["budgets"] = encode_budgets(getattr(run, "budgets", []), keys.codes)
    out["keys"] = keys.values
    out["workers"] = workers.values
    out["task_reprs"] = reprs.values
    return out


def decode_run(data: dict) -> dict:
    """The ``RunData`` fields encoded in ``data`` (the inverse of ``encode_run``)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a localsched run: expected a JSON object with "
                         f"\"format\": \"{FORMAT}\"")
    if data.get("version", 0) > VERSION:
        raise ValueError(f"localsched run format version {data['version']} is newer than "
                         f"this localsched reads ({VERSION}); upgrade localsched")
    keys = [decode_key(k) for k in data["keys"]]
    workers = [decode_key(w) for w in data["workers"]]
    reprs = data["task_reprs"]

    def col(table, codes):
        return [table[c] for c in codes]

    floats = _unfloats

    t = data["tasks"]
    run: dict = {"meta": dict(data.get("meta") or {}),
                 "cache_metric": data.get("cache_metric", "tasks"), "metrics": {}}
    run["tasks"] = list(map(TaskData, col(keys, t["key"]), col(reprs, t["task"]),
                         floats(t["start"]), floats(t["end"]), col(workers, t["worker"])))
    t = data["failed"]
    run["failed"] = list(map(FailedTaskData, col(keys, t["key"]), col(reprs, t["task"]),
                          floats(t["start"]), floats(t["end"]), col(workers, t["worker"]),
                          t["exc_type"], t["message"]))
    t = data["interrupted"]
    run["interrupted"] = list(map(InterruptedTaskData, col(keys, t["key"]),
                               col(reprs, t["task"]), floats(t["start"]),
                               floats(t["stop"]), col(workers, t["worker"])))
    t = data["transfers"]
    run["transfers"] = list(map(TransferData, col(keys, t["key"]), col(workers, t["worker"]),
                             floats(t["send_start"]), floats(t["start"]),
                             floats(t["end"]), floats(t["receive_end"])))
    t = data["resources"]
    run["resources"] = list(map(ResourceData, floats(t["time"]), floats(t["mem"]),
                             floats(t["cpu"])))
    t = data["cache"]
    run["cache"] = list(map(CacheData, col(keys, t["key"]), col(reprs, t["task"]),
                         floats(t["metric"]), floats(t["cache_time"]),
                         floats(t["free_time"])))
    for span, group, activity, unit, value in data["metrics"]:
        run["metrics"][(tuple(span), group, activity, unit)] = _unfloat(value)
    t = data["activities"]
    run["activities"] = list(map(ActivityData, col(keys, t["key"]),
                              col(data["activity_names"], t["activity"]),
                              floats(t["start"]), floats(t["stop"]),
                              col(workers, t["worker"])))
    frames = [tuple(f) for f in data["frames"]]
    stacks = [tuple(frames[i] for i in stack) for stack in data["stacks"]]
    t = data["samples"]
    seconds = floats(t["seconds"]) if "seconds" in t else [None] * len(t["time"])
    run["samples"] = list(map(SampleData, floats(t["time"]), col(workers, t["worker"]),
                           col(data["sample_groups"], t["group"]),
                           col(stacks, t["stack"]), seconds))
    run["walls"] = [tuple(floats(w)) for w in data["walls"]]
    run["graphs"] = [_graph(g, keys) for g in data.get("graphs") or ()]
    run["budgets"] = decode_budgets(data.get("budgets"), keys)
    return run


def _graph(g: dict, keys: list) -> GraphData:
    """One computation's graph (absent in runs saved before graphs were kept:
    then the analysis says "not measured")."""
    order = g.get("order")
    return GraphData([keys[c] for c in g["keys"]], [tuple(d) for d in g["deps"]],
                     None if order is None else list(order), _unfloat(g.get("started")),
                     _unfloat(g.get("finished")), g.get("workers"),
                     _unfloat(g.get("submitted")), g.get("inputs"), _unstack(g.get("stack")))


def _stack(stack) -> list | None:
    """A computation's caller frames as JSON: ``[file, line, function]`` each."""
    return None if stack is None else [[str(f), int(n), str(name)] for f, n, name in stack]


def _unstack(stack) -> tuple | None:
    """``_stack`` read back; a malformed one (a hand-edited file) as none."""
    if not isinstance(stack, list):
        return None
    try:
        return tuple((str(f), int(n), str(name)) for f, n, name in stack)
    except (TypeError, ValueError):
        return None


def embedded_json(page: str, path) -> str:
    """The run's JSON embedded in a report page (``path`` names it in errors)."""
    marker = f'id="{DATA_ELEMENT_ID}">'
    start = page.find(marker)
    if start < 0:
        raise ValueError(f"{path}: neither a localsched run's JSON nor a report page "
                         "with one embedded")
    start += len(marker)
    end = page.find("</script>", start)
    if end < 0:
        raise ValueError(f"{path}: the run embedded in this report page is cut short")
    return page[start:end]


class _Table:
    """Interns values: each distinct one is encoded once, records hold its position."""

    def __init__(self, encode):
        self.encode = encode
        self.values: list = []
        self.index: dict = {}

    def code(self, value) -> int:
        try:
            return self.index[value]
        except KeyError:
            code = self.index[value] = len(self.values)
            self.values.append(self.encode(value))
            return code
        except TypeError:  # unhashable: not interned
            self.values.append(self.encode(value))
            return len(self.values) - 1

    def codes(self, values: Iterable) -> list:
        return [self.code(v) for v in values]


def encode_key(key):
    """A key (or worker id) as JSON: tuples become arrays, see the module docstring.

    >>> encode_key(('x-1', 0, (1, 'a'))), encode_key(b'k'), decode_key(encode_key(b'k'))
    (['x-1', 0, [1, 'a']], {'bytes': '6b'}, b'k')
    """
    if key is None or isinstance(key, (str, bool, int)):
        return key
    if isinstance(key, numbers.Integral):  # numpy's ints: equal, and hash alike, as ints
        return int(key)
    if isinstance(key, float):
        return _float(key)
    if isinstance(key, tuple):
        return [encode_key(k) for k in key]
    if isinstance(key, bytes):
        return {"bytes": key.hex()}
    return {"repr": repr(key)}


def decode_key(value):
    if isinstance(value, list):
        return tuple(decode_key(v) for v in value)
    if isinstance(value, dict):
        if "bytes" in value:
            return bytes.fromhex(value["bytes"])
        if "float" in value:
            return float(value["float"])
        return value["repr"]
    return value


def task_text(task):
    """What the JSON and the trace keep of a task: None, a string, or its short repr."""
    if task is None or isinstance(task, str):
        return task
    return short_repr(task)


def _float(x):
    if x is None or isinstance(x, int) and not isinstance(x, bool):
        return x
    x = float(x)
    return x if math.isfinite(x) else {"float": repr(x)}


def _unfloat(v):
    if isinstance(v, dict):
        return float(v["float"])
    return v


def _floats(values: Iterable):
    """A column of times or amounts: as ticks when that is exact, else as numbers."""
    out = []
    plain = True
    for x in values:
        if x is None or (isinstance(x, float) and math.isfinite(x)):
            out.append(x)
        else:
            plain = False
            out.append(_float(x))
    if plain and len(out) >= _TICKS_ABOVE:
        return _ticks(out) or out
    return out


#: Columns shorter than this are written as plain numbers.
_TICKS_ABOVE = 16


def _ticks(values: list):
    """``{"base", "q", "k"}`` with ``value == base + k * q`` exactly for every
    value, or None.  Epoch seconds of one run share their binary exponent,
    so they are all whole multiples of one power of two (their ulp) apart:
    a short integer each instead of 17 significant digits.  Checked value by
    value, so nothing is ever rounded.

    >>> col = _ticks([1.7e9 + i / 3 for i in range(20)])
    >>> [col['base'] + k * col['q'] for k in col['k']] == [1.7e9 + i / 3 for i in range(20)]
    True
    >>> _ticks([1.0 + 2 ** -52, 3.0] * 10) is None  # not whole steps of one ulp apart
    True
    """
    if any(type(x) is not float for x in values):
        return None
    import numpy as np

    a = np.asarray(values, dtype=float)
    base = float(a.min())
    top = float(np.abs(a).max())
    if top == 0:
        return None
    q = math.ldexp(1.0, math.frexp(top)[1] - 53)  # ulp of the largest value
    k = (a - base) / q
    if not np.all(np.abs(k) < 2.0 ** 53) or not np.array_equal(k, np.floor(k)):
        return None
    ki = k.astype(np.int64)
    if not np.array_equal(base + ki.astype(float) * q, a):
        return None
    return {"base": base, "q": q, "k": ki.tolist()}


def _unfloats(column) -> list:
    if isinstance(column, dict):
        base, q = column["base"], column["q"]
        return [base + k * q for k in column["k"]]
    return [_unfloat(v) for v in column]

