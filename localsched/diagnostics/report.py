"""One run's records in one object: saved as JSON, rendered as one HTML page,
exported as a trace that Perfetto UI and chrome://tracing open.

:class:`RunData` holds every record a run produced -- tasks (finished, failed,
interrupted), transfers, resource samples, cache stays, the fine-metrics
mapping, activities and stack samples -- and nothing else: no profiler, no
scheduler.  Whatever ran the graph (localsched's schedulers, dask's, a
dask.distributed cluster) can fill one.

>>> from localsched.diagnostics.records import TaskData, MetricData
>>> run = RunData(tasks=[TaskData(('inc-1a2b', 0), None, 10.0, 10.5, 1)],
...               metrics={((), 'inc', 'thread-cpu', 'seconds'): 0.4})
>>> again = RunData.from_json(run.to_json())
>>> again.tasks == run.tasks and again.metrics == run.metrics
True
>>> list(again.metric_records())
[MetricData(span=(), group='inc', activity='thread-cpu', unit='seconds', value=0.4)]

``performance_report`` records a block of code with every diagnostic on and
writes the page when the block ends:

>>> import os, tempfile, localsched
>>> path = os.path.join(tempfile.mkdtemp(), 'report.html')
>>> with localsched.performance_report(path, samples=False) as report:
...     localsched.get({'a': (abs, -2), 'b': (abs, 'a')}, 'b')
2
>>> sorted(r.key for r in report.data.tasks), os.path.getsize(path) > 100_000
(['a', 'b'], True)

The JSON file
-------------
``save_json(path)`` writes one JSON object (``"format": "localsched-run"``)
whose record lists are *columnar*: one array per field (times as
``{"base", "q", "k"}``: ``base + k * q`` gives each value back exactly, see
``_ticks``), and keys, workers,
task reprs, activity names, groups, stack frames and stacks are each stored
once in a table and referenced by position.  Keys keep their type: a string,
number, boolean or None as itself, a tuple as a JSON array (a key is never a
list), bytes as ``{"bytes": hex}``; any other key becomes ``{"repr": ...}``
and loads back as that string.  Floats are written exactly (``repr``),
non-finite ones as ``{"float": "nan"}`` (or ``"inf"``, ``"-inf"``).  A record's
``task`` (the task spec, with its functions) is stored as its short repr: a
task that was None or a string loads back as itself, anything else as the
text the hovers show.  ``load_json`` also reads the data embedded in a page
written by ``to_html``.

The trace
---------
``to_chrome_trace(path)`` writes the Trace Event Format's JSON object form:
one process ("localsched"), one thread track per worker with a complete
(``"ph": "X"``) slice per task and its activities nested inside it, an extra
track per worker for what happened outside its tasks (process-pool
transfers, activities outside the task's run), and counters (``"ph": "C"``)
for CPU, memory and cached results; stack samples are instants (``"ph":
"i"``) on their worker's track, innermost frame first in ``args.stack``.
Timestamps are microseconds since the
run's first record (``otherData.t0`` holds that instant in epoch seconds).
Slices on a track always nest properly: one that would overlap the end of
an enclosing slice is cut at that end (its ``args`` keep the full duration).
"""

from __future__ import annotations

import json
import math
import numbers
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Iterable, Optional

from .records import (
    ActivityData,
    CacheData,
    FailedTaskData,
    InterruptedTaskData,
    MetricData,
    ResourceData,
    SampleData,
    TaskData,
    TransferData,
)
from .summary import Summary, groups_of, short_repr, summarize

__all__ = ["RunData", "performance_report", "to_chrome_trace", "load_json", "stack_tree",
           "FORMAT", "VERSION"]

FORMAT = "localsched-run"
VERSION = 1

#: Where ``to_html`` embeds the run's JSON in the page.
DATA_ELEMENT_ID = "localsched-data"


# --------------------------------------------------------------------------
# The data


@dataclass
class RunData:
    """Every record of one run (or of several, merged), independent of what ran it.

    Fields are plain lists of the records of ``localsched.diagnostics.records``
    plus ``metrics`` (the fine-metrics mapping ``(span, group, activity,
    unit) -> value``), ``walls`` (``(start, finish)`` epoch seconds per
    computation), ``cache_metric`` (the unit of ``CacheData.metric``) and
    ``meta`` (a JSON-able dict: title, scheduler, ...).

    >>> RunData().tasks, RunData().cache_metric
    ([], 'tasks')
    """

    tasks: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    interrupted: list = field(default_factory=list)
    transfers: list = field(default_factory=list)
    resources: list = field(default_factory=list)
    cache: list = field(default_factory=list)
    cache_metric: str = "tasks"
    metrics: dict = field(default_factory=dict)
    activities: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    walls: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    # -- building ----------------------------------------------------------

    @classmethod
    def from_profilers(cls, profilers, **meta) -> RunData:
        """Gather the records of finished profilers (any mix of Profiler,
        ResourceProfiler, CacheProfiler, FineMetrics, SampleProfiler, or
        RunData objects to merge) into one RunData.

        >>> from localsched.diagnostics import Profiler
        >>> from localsched.local import get_sync
        >>> with Profiler() as prof:
        ...     get_sync({'x': (len, 'ab')}, 'x')
        2
        >>> [r.key for r in RunData.from_profilers([prof]).tasks]
        ['x']
        """
        run = cls(meta=dict(meta))
        if not isinstance(profilers, (list, tuple)):
            profilers = [profilers]
        for p in profilers:
            if isinstance(p, RunData):
                run.merge(p)
                continue
            kind = getattr(p, "record_type", None)
            if kind is TaskData:
                run.tasks += p.results
                run.failed += list(getattr(p, "failed", ()))
                run.interrupted += list(getattr(p, "interrupted", ()))
                run.transfers += list(getattr(p, "transfers", ()))
                run.walls += [tuple(w) for w in getattr(p, "walls", ()) or ()]
                if getattr(p, "dashboard", None):
                    run.meta.setdefault("dashboard", p.dashboard)
            elif kind is ResourceData:
                run.resources += p.results
            elif kind is CacheData:
                run.cache += p.results
                run.cache_metric = getattr(p, "metric_name", "tasks")
            elif isinstance(getattr(p, "metrics", None), Mapping):  # FineMetrics
                _add_metrics(run.metrics, p.metrics)
                run.activities += list(getattr(p, "results", ()))
            elif kind is SampleData or kind is None and _all_samples(p):
                run.samples += p.results
            else:
                raise TypeError(f"cannot take records from {type(p).__name__}: expected a "
                                "Profiler, ResourceProfiler, CacheProfiler, FineMetrics, "
                                "SampleProfiler or RunData")
        return run

    def merge(self, other: RunData) -> RunData:
        """Add ``other``'s records to this one's (metrics are summed); returns self."""
        for name in ("tasks", "failed", "interrupted", "transfers", "resources", "cache",
                     "activities", "samples", "walls"):
            getattr(self, name).extend(getattr(other, name))
        if other.cache:
            self.cache_metric = other.cache_metric
        _add_metrics(self.metrics, other.metrics)
        for k, v in other.meta.items():
            self.meta.setdefault(k, v)
        return self

    # -- reading -----------------------------------------------------------

    def metric_records(self) -> Iterable[MetricData]:
        """The fine-metrics mapping as ``MetricData`` rows."""
        for (span, group, activity, unit), value in self.metrics.items():
            yield MetricData(span, group, activity, unit, value)

    def summary(self, top: int = 10) -> Summary:
        """The same numbers ``Profiler.summary()`` gives, over this run's records."""
        return summarize(self.tasks, self.failed, self.interrupted, walls=self.walls or None,
                         dashboard=self.meta.get("dashboard"),
                         top=top)

    def bounds(self) -> Optional[tuple]:
        """(earliest, latest) epoch seconds over every timed record, or None."""
        lows, highs = [], []

        def add(values_lo, values_hi):
            lo = [v for v in values_lo if v is not None]
            hi = [v for v in values_hi if v is not None]
            if lo:
                lows.append(min(lo))
            if hi:
                highs.append(max(hi))

        add((r.start_time for r in self.tasks), (r.end_time for r in self.tasks))
        add((r.start_time for r in self.failed), (r.end_time for r in self.failed))
        add((r.start_time for r in self.interrupted), (r.stop_time for r in self.interrupted))
        add((r.send_start for r in self.transfers), (r.receive_end for r in self.transfers))
        add((r.time for r in self.resources), (r.time for r in self.resources))
        add((r.cache_time for r in self.cache), (r.free_time for r in self.cache))
        add((r.start for r in self.activities), (r.stop for r in self.activities))
        add((r.time for r in self.samples), (r.time for r in self.samples))
        if not lows:
            return None
        return min(lows), max(highs) if highs else max(lows)

    def stack_tree(self, group=None, start=None, stop=None) -> dict:
        """The samples as a call tree (see :func:`stack_tree`)."""
        return stack_tree(self.samples, group=group, start=start, stop=stop)

    # -- JSON --------------------------------------------------------------

    def to_dict(self) -> dict:
        """The run as one JSON-able dict (the layout is in the module docstring)."""
        keys, workers, reprs = _Table(_encode_key), _Table(_encode_key), _Table(_task_text)
        out: dict = {"format": FORMAT, "version": VERSION, "meta": self.meta,
                     "cache_metric": self.cache_metric}
        out["tasks"] = {
            "key": keys.codes(r.key for r in self.tasks),
            "task": reprs.codes(r.task for r in self.tasks),
            "start": _floats(r.start_time for r in self.tasks),
            "end": _floats(r.end_time for r in self.tasks),
            "worker": workers.codes(r.worker_id for r in self.tasks),
        }
        out["failed"] = {
            "key": keys.codes(r.key for r in self.failed),
            "task": reprs.codes(r.task for r in self.failed),
            "start": _floats(r.start_time for r in self.failed),
            "end": _floats(r.end_time for r in self.failed),
            "worker": workers.codes(r.worker_id for r in self.failed),
            "exc_type": [r.exc_type for r in self.failed],
            "message": [r.message for r in self.failed],
        }
        out["interrupted"] = {
            "key": keys.codes(r.key for r in self.interrupted),
            "task": reprs.codes(r.task for r in self.interrupted),
            "start": _floats(r.start_time for r in self.interrupted),
            "stop": _floats(r.stop_time for r in self.interrupted),
            "worker": workers.codes(r.worker_id for r in self.interrupted),
        }
        out["transfers"] = {
            "key": keys.codes(r.key for r in self.transfers),
            "worker": workers.codes(r.worker_id for r in self.transfers),
            "send_start": _floats(r.send_start for r in self.transfers),
            "start": _floats(r.start_time for r in self.transfers),
            "end": _floats(r.end_time for r in self.transfers),
            "receive_end": _floats(r.receive_end for r in self.transfers),
        }
        out["resources"] = {
            "time": _floats(r.time for r in self.resources),
            "mem": _floats(r.mem for r in self.resources),
            "cpu": _floats(r.cpu for r in self.resources),
        }
        out["cache"] = {
            "key": keys.codes(r.key for r in self.cache),
            "task": reprs.codes(r.task for r in self.cache),
            "metric": _floats(r.metric for r in self.cache),
            "cache_time": _floats(r.cache_time for r in self.cache),
            "free_time": _floats(r.free_time for r in self.cache),
        }
        out["metrics"] = [[list(span), group, activity, unit, _float(value)]
                          for (span, group, activity, unit), value in self.metrics.items()]
        names = _Table(lambda name: name)
        out["activities"] = {
            "key": keys.codes(r.key for r in self.activities),
            "activity": names.codes(r.activity for r in self.activities),
            "start": _floats(r.start for r in self.activities),
            "stop": _floats(r.stop for r in self.activities),
            "worker": workers.codes(r.worker_id for r in self.activities),
        }
        out["activity_names"] = names.values
        frames = _Table(list)
        stacks = _Table(lambda stack: [frames.code(frame) for frame in stack])
        groups = _Table(lambda group: group)
        out["samples"] = {
            "time": _floats(r.time for r in self.samples),
            "worker": workers.codes(r.worker_id for r in self.samples),
            "group": groups.codes(r.group for r in self.samples),
            "stack": stacks.codes(tuple(r.stack) for r in self.samples),
        }
        out["sample_groups"] = groups.values
        out["stacks"] = stacks.values
        out["frames"] = frames.values
        out["walls"] = [_floats(w) for w in self.walls]
        out["keys"] = keys.values
        out["workers"] = workers.values
        out["task_reprs"] = reprs.values
        return out

    @classmethod
    def from_dict(cls, data: dict) -> RunData:
        """The inverse of :meth:`to_dict`."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a localsched run: expected a JSON object with "
                             f"\"format\": \"{FORMAT}\"")
        if data.get("version", 0) > VERSION:
            raise ValueError(f"localsched run format version {data['version']} is newer than "
                             f"this localsched reads ({VERSION}); upgrade localsched")
        keys = [_decode_key(k) for k in data["keys"]]
        workers = [_decode_key(w) for w in data["workers"]]
        reprs = data["task_reprs"]

        def col(table, codes):
            return [table[c] for c in codes]

        floats = _unfloats

        t = data["tasks"]
        run = cls(meta=dict(data.get("meta") or {}), cache_metric=data.get("cache_metric", "tasks"))
        run.tasks = list(map(TaskData, col(keys, t["key"]), col(reprs, t["task"]),
                             floats(t["start"]), floats(t["end"]), col(workers, t["worker"])))
        t = data["failed"]
        run.failed = list(map(FailedTaskData, col(keys, t["key"]), col(reprs, t["task"]),
                              floats(t["start"]), floats(t["end"]), col(workers, t["worker"]),
                              t["exc_type"], t["message"]))
        t = data["interrupted"]
        run.interrupted = list(map(InterruptedTaskData, col(keys, t["key"]),
                                   col(reprs, t["task"]), floats(t["start"]),
                                   floats(t["stop"]), col(workers, t["worker"])))
        t = data["transfers"]
        run.transfers = list(map(TransferData, col(keys, t["key"]), col(workers, t["worker"]),
                                 floats(t["send_start"]), floats(t["start"]),
                                 floats(t["end"]), floats(t["receive_end"])))
        t = data["resources"]
        run.resources = list(map(ResourceData, floats(t["time"]), floats(t["mem"]),
                                 floats(t["cpu"])))
        t = data["cache"]
        run.cache = list(map(CacheData, col(keys, t["key"]), col(reprs, t["task"]),
                             floats(t["metric"]), floats(t["cache_time"]),
                             floats(t["free_time"])))
        for span, group, activity, unit, value in data["metrics"]:
            run.metrics[(tuple(span), group, activity, unit)] = _unfloat(value)
        t = data["activities"]
        run.activities = list(map(ActivityData, col(keys, t["key"]),
                                  col(data["activity_names"], t["activity"]),
                                  floats(t["start"]), floats(t["stop"]),
                                  col(workers, t["worker"])))
        frames = [tuple(f) for f in data["frames"]]
        stacks = [tuple(frames[i] for i in stack) for stack in data["stacks"]]
        t = data["samples"]
        run.samples = list(map(SampleData, floats(t["time"]), col(workers, t["worker"]),
                               col(data["sample_groups"], t["group"]),
                               col(stacks, t["stack"])))
        run.walls = [tuple(floats(w)) for w in data["walls"]]
        return run

    def to_json(self) -> str:
        """The run as JSON text (strict JSON: no NaN; ``<`` escaped so the
        text can sit inside an HTML ``<script>`` element)."""
        text = json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)
        return text.replace("<", "\\u003c")

    @classmethod
    def from_json(cls, text: str) -> RunData:
        """The inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    def save_json(self, path) -> None:
        """Write the run to ``path`` as JSON (``load_json`` reads it back)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @classmethod
    def load_json(cls, path) -> RunData:
        """Read a run saved by ``save_json`` -- or embedded in a page ``to_html`` wrote."""
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text.lstrip()[:1] != "{":
            text = _embedded_json(text, path)
        try:
            return cls.from_json(text)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"{path}: not a readable localsched run ({exc})") from exc

    # -- outputs -----------------------------------------------------------

    def to_html(self, path, title: Optional[str] = None, mode: Optional[str] = None) -> None:
        """Write the performance report: one self-contained HTML page (bokeh
        is embedded, so it opens offline) with this run's JSON inside.
        ``mode="cdn"`` makes it smaller but needs the internet."""
        from .plots import report_html

        page = report_html(self, title=title or self.meta.get("title") or "localsched report",
                           mode=mode)
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)

    def to_chrome_trace(self, path=None) -> dict:
        """Write (with ``path``) and return the run as a Trace Event Format object."""
        trace = _chrome_trace(self)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(trace, f, separators=(",", ":"), allow_nan=False)
        return trace


def load_json(path) -> RunData:
    """Read a run saved with ``RunData.save_json`` (or embedded in a report page)."""
    return RunData.load_json(path)


def to_chrome_trace(path, profilers_or_data) -> dict:
    """Export profilers' records (or a RunData) to ``path`` as a Chrome/Perfetto trace.

    >>> import json, os, tempfile
    >>> from localsched.diagnostics.records import TaskData
    >>> path = os.path.join(tempfile.mkdtemp(), 'trace.json')
    >>> trace = to_chrome_trace(path, RunData(tasks=[TaskData('a-1', None, 5.0, 5.5, 9)]))
    >>> [(e['ph'], e['name'], e.get('dur')) for e in trace['traceEvents'] if e['ph'] == 'X']
    [('X', 'a-1', 500000.0)]
    >>> json.load(open(path)) == trace
    True
    """
    data = profilers_or_data if isinstance(profilers_or_data, RunData) \
        else RunData.from_profilers(profilers_or_data)
    return data.to_chrome_trace(path)


def _add_metrics(into: dict, metrics: dict) -> None:
    for key, value in metrics.items():
        into[key] = into.get(key, 0) + value


def _all_samples(p) -> bool:
    results = getattr(p, "results", None)
    return isinstance(results, list) and all(isinstance(r, SampleData) for r in results)


def _embedded_json(page: str, path) -> str:
    marker = f'id="{DATA_ELEMENT_ID}">'
    start = page.find(marker)
    if start < 0:
        raise ValueError(f"{path}: neither a localsched run's JSON nor a report page "
                         "with one embedded")
    start += len(marker)
    return page[start:page.index("</script>", start)]


# --------------------------------------------------------------------------
# JSON encoding helpers


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


def _encode_key(key):
    """A key (or worker id) as JSON: tuples become arrays, see the module docstring.

    >>> _encode_key(('x-1', 0, (1, 'a'))), _encode_key(b'k'), _decode_key(_encode_key(b'k'))
    (['x-1', 0, [1, 'a']], {'bytes': '6b'}, b'k')
    """
    if key is None or isinstance(key, (str, bool, int)):
        return key
    if isinstance(key, numbers.Integral):  # numpy's ints: equal, and hash alike, as ints
        return int(key)
    if isinstance(key, float):
        return _float(key)
    if isinstance(key, tuple):
        return [_encode_key(k) for k in key]
    if isinstance(key, bytes):
        return {"bytes": key.hex()}
    return {"repr": repr(key)}


def _decode_key(value):
    if isinstance(value, list):
        return tuple(_decode_key(v) for v in value)
    if isinstance(value, dict):
        if "bytes" in value:
            return bytes.fromhex(value["bytes"])
        if "float" in value:
            return float(value["float"])
        return value["repr"]
    return value


def _task_text(task):
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


# --------------------------------------------------------------------------
# Stack samples as a tree


def stack_tree(samples: Iterable[SampleData], group=None, start=None, stop=None) -> dict:
    """Count stack samples into a call tree, the flame graph's input.

    Nodes are ``{"name", "filename", "line", "count", "children"}``; the root
    is ``"all"`` and counts every sample taken; a node's count is the samples
    whose stack passes through it; children are sorted by count, most first.
    ``group`` keeps the samples of one task group; ``start``/``stop`` (epoch
    seconds) the window ``start <= time < stop``.  The same tree as
    ``SampleProfiler.tree()`` (``localsched.diagnostics.sampler.tree``), built
    from plain records whatever took them (a cluster's samples too), and
    without recursion, so stacks of any depth work.

    >>> f, g = ('m.py', 1, 'f'), ('m.py', 9, 'g')
    >>> tree = stack_tree([SampleData(0.0, 1, 'x', (f, g)), SampleData(0.1, 1, 'x', (f,))])
    >>> tree['count'], [(c['name'], c['count'], c['children'][0]['name'])
    ...                 for c in tree['children']]
    (2, [('f', 2, 'g')])
    """
    root = {"name": "all", "filename": "", "line": 0, "count": 0, "children": {}}
    for s in samples:
        if group is not None and s.group != group:
            continue
        if start is not None and s.time < start or stop is not None and s.time >= stop:
            continue
        node = root
        node["count"] += 1
        for frame in s.stack:
            children = node["children"]
            child = children.get(frame)
            if child is None:
                filename, line, name = frame
                child = children[frame] = {"name": name, "filename": filename, "line": line,
                                           "count": 0, "children": {}}
            child["count"] += 1
            node = child
    return _listed(root)


def _listed(root: dict) -> dict:
    """Children dicts to sorted lists, in place; a loop, not recursion, since a
    deeply recursive program's stacks can be deeper than Python's recursion limit."""
    todo = [root]
    while todo:
        node = todo.pop()
        node["children"] = sorted(node["children"].values(),
                                  key=lambda c: (-c["count"], c["name"]))
        todo.extend(node["children"])
    return root


# --------------------------------------------------------------------------
# Trace Event Format


def _chrome_trace(run: RunData) -> dict:
    bounds = run.bounds()
    t0 = bounds[0] if bounds else 0.0
    pid = 1
    rows = _worker_rows(run)
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
               {"group": _group(r.key), "task": _task_text(r.task),
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
            slice_(tid, r.activity, "activity", max(r.start, lo), min(r.stop, hi), args)
        else:
            slice_(2 * rows[r.worker_id] + 2, r.activity, "activity", r.start, r.stop, args)
    for r in run.transfers:
        tid = 2 * rows[r.worker_id] + 2
        if r.start_time > r.send_start:
            slice_(tid, "send inputs", "transfer", r.send_start, r.start_time,
                   {"key": _name(r.key), "duration_s": r.send})
        if r.receive_end > r.end_time:
            slice_(tid, "receive result", "transfer", r.end_time, r.receive_end,
                   {"key": _name(r.key), "duration_s": r.receive})

    for worker, row in rows.items():
        label = "unknown worker" if worker is None else f"worker {row}"
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
    for r in run.samples:
        row = rows.get(r.worker_id)
        if row is None or r.worker_id is None or 2 * row + 1 not in tracks:
            continue
        where = [f"{name} ({filename}:{line})" for filename, line, name in r.stack]
        events.append({"ph": "i", "s": "t", "name": r.stack[-1][2] if r.stack else "(idle)",
                       "cat": "sample", "pid": pid, "tid": 2 * row + 1,
                       "ts": ns(r.time) / 1000,
                       "args": {"group": r.group, "stack": where[::-1]}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "localsched", "t0": t0,
                          "clock": "microseconds since t0 (epoch seconds)"}}


def _cache_counters(run: RunData, pid: int, ns) -> list:
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


def _worker_rows(run: RunData) -> dict:
    ids = set()
    for records in (run.tasks, run.failed, run.interrupted, run.transfers, run.activities):
        ids.update(r.worker_id for r in records)
    known = [w for w in ids if w is not None]
    try:
        known.sort()
    except TypeError:
        known.sort(key=repr)
    rows = {w: i for i, w in enumerate(known)}
    rows[None] = len(known)
    return rows



def _group(key) -> str:
    return groups_of([key])[0]


def _name(key) -> str:
    return key if isinstance(key, str) else str(key)


# --------------------------------------------------------------------------
# The context manager


def _nbytes(value) -> int:
    """Bytes a result holds: dask's ``sizeof`` when dask is loaded, else
    ``nbytes`` (NumPy, pandas) or ``sys.getsizeof``."""
    dask_sizeof = sys.modules.get("dask.sizeof")
    if dask_sizeof is not None:
        return int(dask_sizeof.sizeof(value))
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    try:
        return sys.getsizeof(value)
    except TypeError:
        return 0


class performance_report:
    """Record everything the computations inside a ``with`` block do, and write
    the performance report when it ends.

    Turns on a Profiler, a ResourceProfiler (every ``dt`` seconds), a
    CacheProfiler measuring results in bytes, and -- when they are available
    -- the fine metrics (``FineMetrics``) and a stack sampler
    (``SampleProfiler``, every ``interval`` seconds; ``samples=False`` turns
    it off).  After the block, ``report.data`` is the :class:`RunData`; the
    page goes to ``filename`` (None: no page), the JSON to ``json`` and the
    trace to ``trace`` when given.  The page is written even when the block
    raises.

    >>> import localsched
    >>> with localsched.performance_report(None, samples=False) as report:
    ...     localsched.get({'a': (sum, [1, 2])}, 'a')
    3
    >>> [r.key for r in report.data.tasks], report.data.cache_metric
    (['a'], 'bytes')
    """

    def __init__(self, filename: Optional[str] = "report.html", *, title: Optional[str] = None,
                 dt: float = 0.25, samples: bool = True, interval: float = 0.01,
                 metrics: bool = True, json: Optional[str] = None,
                 trace: Optional[str] = None, mode: Optional[str] = None):
        self.filename = filename
        self.title = title
        self.json_path = json
        self.trace_path = trace
        self.mode = mode
        self._dt = dt
        self._samples = samples
        self._interval = interval
        self._metrics = metrics
        self.data: Optional[RunData] = None
        self.profilers: list = []
        self._stack: Optional[ExitStack] = None

    def _make_profilers(self) -> list:
        from .. import diagnostics
        from . import CacheProfiler, Profiler, ResourceProfiler

        # (metric="nbytes": the same sizes as _nbytes, and on a cluster, where
        # callbacks get no results, the sizes the cluster measured)
        profilers = [ResourceProfiler(dt=self._dt), Profiler(),
                     CacheProfiler(metric="nbytes", metric_name="bytes")]
        fine = getattr(diagnostics, "FineMetrics", None) if self._metrics else None
        if fine is not None:
            profilers.append(fine())
        sampler = getattr(diagnostics, "SampleProfiler", None) if self._samples else None
        if sampler is not None:
            profilers.append(sampler(interval=self._interval))
        return profilers

    def __enter__(self) -> performance_report:
        self.profilers = self._make_profilers()
        self._started = time.time()
        with ExitStack() as stack:
            for p in self.profilers:
                stack.enter_context(p)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc) -> None:
        stack, self._stack = self._stack, None
        stack.__exit__(*exc)
        self.data = RunData.from_profilers(
            self.profilers, title=self.title or "localsched performance report",
            started=self._started, finished=time.time())
        if self.json_path:
            self.data.save_json(self.json_path)
        if self.trace_path:
            self.data.to_chrome_trace(self.trace_path)
        if self.filename:
            self.data.to_html(self.filename, mode=self.mode)

    def save_json(self, path) -> None:
        """Save the recorded run (after the block) as JSON."""
        self._finished().save_json(path)

    def to_chrome_trace(self, path) -> dict:
        """Export the recorded run (after the block) as a trace."""
        return self._finished().to_chrome_trace(path)

    def _finished(self) -> RunData:
        if self.data is None:
            raise RuntimeError("performance_report: the data exists once the with block ended")
        return self.data
