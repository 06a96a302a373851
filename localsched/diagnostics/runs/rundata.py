"""One run's records in one object, independent of what ran it.

:class:`RunData` holds every record a run produced -- tasks (finished, failed,
interrupted), transfers, resource samples, cache stays, the fine-metrics
mapping, activities and stack samples -- and nothing else: no profiler, no
scheduler.  Whatever ran the graph (localsched's schedulers, dask's, a
dask.distributed cluster) can fill one.  It is saved as JSON
(``localsched.diagnostics.runs.codec``), rendered as the report page
(``localsched.diagnostics.reporting.page``, bokeh loaded then), exported as a trace
(``localsched.diagnostics.runs.trace``), shown as tables in a notebook
(``_repr_html_``) and handed to pandas (``to_pandas``).

>>> from localsched.diagnostics.collectors.records import TaskData, MetricData
>>> run = RunData(tasks=[TaskData(('inc-1a2b', 0), None, 10.0, 10.5, 1)],
...               metrics={((), 'inc', 'thread-cpu', 'seconds'): 0.4})
>>> again = RunData.from_json(run.to_json())
>>> again.tasks == run.tasks and again.metrics == run.metrics
True
>>> list(again.metric_records())
[MetricData(span=(), group='inc', activity='thread-cpu', unit='seconds', value=0.4)]
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..collectors.budgets import shifted
from ..collectors.records import (
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
from ..collectors.stacks import stack_tree
from ..reporting.aggregate import gapless_offsets
from ..reporting.summary import Summary, summarize
from .codec import decode_run, embedded_json, encode_run
from .outputs import write_text
from .runcheck import RunFileError, check_run
from .trace import chrome_trace

__all__ = ["RunData", "RunFileError", "load_json", "to_chrome_trace"]


@dataclass
class RunData:
    """Every record of one run (or of several, merged), independent of what ran it.

    Fields are plain lists of the records of ``localsched.diagnostics.collectors.records``
    plus ``metrics`` (the fine-metrics mapping ``(span, group, activity,
    unit) -> value``), ``walls`` (``(start, finish)`` epoch seconds per
    computation), ``cache_metric`` (the unit of ``CacheData.metric``) and
    ``meta`` (a JSON-able dict: title, scheduler, ...) and ``budgets``
    (a :class:`~localsched.run.budget_record.BudgetRecord` per computation run
    within a memory budget).

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
    graphs: list = field(default_factory=list)
    budgets: list = field(default_factory=list)

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
                run.graphs += list(getattr(p, "graphs", ()) or ())
                run.budgets += list(getattr(p, "budgets", ()) or ())
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
                samples = p.results
                run.samples += samples
                if getattr(p, "interval", None):
                    run.meta.setdefault("sample_interval", float(p.interval))
                looks = getattr(p, "gil_waits", None)
                if looks:
                    from ..collectors.sampler import gil_waits_by_group

                    run.meta.setdefault("gil_waits", gil_waits_by_group(samples, looks))
            else:
                raise TypeError(f"cannot take records from {type(p).__name__}: expected a "
                                "Profiler, ResourceProfiler, CacheProfiler, FineMetrics, "
                                "SampleProfiler or RunData")
        return run

    def merge(self, other: RunData) -> RunData:
        """Add ``other``'s records to this one's (metrics are summed); returns self."""
        for name in ("tasks", "failed", "interrupted", "transfers", "resources", "cache",
                     "activities", "samples", "walls", "graphs", "budgets"):
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
                         top=top, dashboard=self.meta.get("dashboard"))

    def bounds(self) -> tuple | None:
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

    def recorded_span(self) -> tuple | None:
        """(start, finish) of the recording: ``bounds()`` widened to the
        block's own ``meta["started"]``/``["finished"]`` where recorded."""
        span = self.bounds()
        ends = [float(t) for t in (self.meta.get("started"), self.meta.get("finished"))
                if isinstance(t, (int, float)) and not isinstance(t, bool)]
        if not ends:
            return span
        lo, hi = min(ends), max(ends)
        return (lo, hi) if span is None else (min(span[0], lo), max(span[1], hi))

    def stack_tree(self, group=None, start=None, stop=None) -> dict:
        """The samples as a call tree (see :func:`stack_tree`)."""
        return stack_tree(self.samples, group=group, start=start, stop=stop)

    # -- what to change (localsched.diagnostics.analysis) ---------------------

    def findings(self) -> list:
        """What the records say to change: a list of ``Finding`` (``kind``,
        ``title``, ``seconds``, ``groups``, ``fix``), most seconds first; see
        ``localsched.diagnostics.analysis.findings`` for the rules."""
        from ..analysis import findings

        return findings(self)

    def critical_path(self):
        """The longest chain of dependent tasks: ``CriticalPath(seconds,
        keys)``, or None when the dependencies were not recorded."""
        from ..analysis import critical_path

        return critical_path(self)

    def memory_peak(self):
        """The peak of result bytes held: ``MemoryPeak(time, bytes,
        by_group)``, or None when sizes were not measured."""
        from ..analysis import memory_peak

        return memory_peak(self)

    def simulate(self, workers: int) -> float | None:
        """The predicted wall-clock seconds of this run on ``workers``
        workers, replaying the measured durations with localsched's policy;
        None when the dependencies were not recorded."""
        from ..analysis import simulate

        return simulate(self, workers)

    def compare(self, other, rel: float | None = None, min_seconds: float = 0.05):
        """This run (before) against ``other`` (after; a RunData or a list of
        repeats), group by group: a ``Comparison`` with ``groups``,
        ``regressions``, ``status`` and ``table()`` (``analysis.comparison``)."""
        from ..analysis import compare

        return compare(self, other, rel=rel, min_seconds=min_seconds)

    def analysis(self) -> dict:
        """All of the above as one JSON-able dict (what the JSON carries)."""
        from ..analysis import overview

        return overview(self)

    # -- JSON --------------------------------------------------------------

    def to_dict(self, analysis: dict | None = None) -> dict:
        """The run as one JSON-able dict (the layout: ``localsched.diagnostics.runs.codec``),
        with the analysis beside the records (``"analysis"``, never read back;
        ``analysis``: ``self.analysis()`` if already computed)."""
        out = encode_run(self)
        out["analysis"] = self.analysis() if analysis is None else analysis
        return out

    @classmethod
    def from_dict(cls, data: dict) -> RunData:
        """The inverse of :meth:`to_dict` (a malformed ``data``: ``RunFileError``)."""
        return _decoded(cls, data, "run data", None)


    def to_json(self, analysis: dict | None = None) -> str:
        """The run as JSON text (strict JSON: no NaN; ``<`` escaped so the
        text can sit inside an HTML ``<script>`` element)."""
        text = json.dumps(self.to_dict(analysis), separators=(",", ":"), allow_nan=False)
        return text.replace("<", "\\u003c")

    @classmethod
    def from_json(cls, text: str, source: str = "JSON text") -> RunData:
        """The inverse of :meth:`to_json`; a malformed text raises
        ``RunFileError`` naming ``source``."""
        return _decoded(cls, _parsed(text, source), source, len(text))

    def save_json(self, path, analysis: dict | None = None) -> None:
        """Write the run to ``path`` as JSON (``load_json`` reads it back;
        ``analysis``: ``self.analysis()`` if already computed)."""
        write_text(path, self.to_json(analysis))

    @classmethod
    def load_json(cls, path) -> RunData:
        """Read a run saved by ``save_json`` -- or embedded in a page ``to_html``
        wrote.  A file that is not a readable run raises ``RunFileError`` (a
        ValueError) naming it and what is wrong (``runcheck``)."""
        source = os.fsdecode(path)
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RunFileError(f"{source}: not UTF-8 text (byte {exc.start} is "
                               f"{raw[exc.start]:#04x})") from None
        if text.lstrip()[:1] != "{":
            try:
                text = embedded_json(text, source)
            except ValueError as exc:
                raise RunFileError(str(exc)) from None
        return cls.from_json(text, source)

    # -- outputs -----------------------------------------------------------

    def to_html(self, path, title: str | None = None, mode: str | None = None,
                analysis: dict | None = None) -> None:
        """Write the performance report: one self-contained HTML page (bokeh
        is embedded, so it opens offline) with this run's JSON inside.
        ``mode="cdn"`` makes it smaller but needs the internet;
        ``analysis``: ``self.analysis()`` if already computed."""
        from ..reporting.page import report_html

        page = report_html(self, title=title or self.meta.get("title") or "localsched report",
                           mode=mode, analysis=analysis)
        write_text(path, page)

    def to_chrome_trace(self, path=None) -> dict:
        """Write (with ``path``) and return the run as a Trace Event Format object."""
        trace = chrome_trace(self)
        if path is not None:
            write_text(path, json.dumps(trace, separators=(",", ":"), allow_nan=False))
        return trace

    # -- merging runs recorded apart ---------------------------------------

    @classmethod
    def side_by_side(cls, runs: list, names: list | None = None,
                     gap: float | None = None) -> RunData:
        """Merge runs recorded at different times onto one time axis without
        the time between them: each run is shifted to start ``gap`` seconds
        (default: 2% of the runs' total length) after the previous one ends.
        ``meta["runs"]`` says where each begins (the page marks it), with
        each run's header, speed probe and CPU seconds per task group (what
        ``analysis.comparison.split_side_by_side`` gives back to ``compare``).

        >>> a = RunData(tasks=[TaskData('x-1', None, 100.0, 101.0, 1)])
        >>> b = RunData(tasks=[TaskData('x-2', None, 600.0, 602.0, 1)])
        >>> [(r.start_time, r.end_time) for r in RunData.side_by_side([a, b], gap=0.5).tasks]
        [(100.0, 101.0), (101.5, 103.5)]
        """
        names = list(names or [r.meta.get("title") or f"run {i + 1}"
                               for i, r in enumerate(runs)])
        spans = [r.recorded_span() or (0.0, 0.0) for r in runs]
        if gap is None:
            gap = 0.02 * sum(b - a for a, b in spans)
        merged = cls()
        marks = []
        offsets = gapless_offsets(spans, gap)
        from ..analysis.comparison import cpu_by_group

        for run, name, offset, span in zip(runs, names, offsets, spans, strict=True):
            run = run.shifted(offset)
            if not run.walls and (bounds := run.bounds()) is not None:
                run.walls = [bounds]  # (its own window: efficiency never spans the gaps)
            merged.merge(run)
            # (what ``compare`` and the findings read of each run that the
            # merge sums or drops: its header's load and status, its speed
            # probe, its groups' CPU, its window and its load meter's reading)
            marks.append({"name": str(name), "start": span[0] + offset,
                          "finish": span[1] + offset, "header": run.meta.get("header"),
                          "speed": run.meta.get("speed"), "cpu": cpu_by_group(run),
                          "load": run.meta.get("load")})
        merged.meta["runs"] = sorted(marks, key=lambda m: m["start"])
        merged.meta.pop("header", None)  # (each run's is in its mark, as its speed)
        merged.meta.pop("speed", None)
        merged.meta.pop("load", None)  # (the first run's: every run's instead)
        load = summed_load([r.meta.get("load") for r in runs])
        if load is not None:
            merged.meta["load"] = load
        # The recording is all of them (not the first's alone: shares of it
        # would pass 100 %), from the first's start to the last's finish.
        if any(isinstance(r.meta.get("started"), (int, float)) for r in runs):
            merged.meta["started"] = min(a + o for (a, _b), o in zip(spans, offsets, strict=True))
            merged.meta["finished"] = max(b + o for (_a, b), o in zip(spans, offsets, strict=True))
        return merged

    def shifted(self, seconds: float) -> RunData:
        """A copy with every time moved by ``seconds``."""
        if not seconds:
            return RunData(**{f: _copied(getattr(self, f)) for f in _FIELDS})

        def move(t):
            return None if t is None else t + seconds

        return RunData(
            tasks=[r._replace(start_time=r.start_time + seconds, end_time=r.end_time + seconds)
                   for r in self.tasks],
            failed=[r._replace(start_time=r.start_time + seconds, end_time=r.end_time + seconds)
                    for r in self.failed],
            interrupted=[r._replace(start_time=r.start_time + seconds,
                                    stop_time=r.stop_time + seconds) for r in self.interrupted],
            transfers=[r._replace(send_start=r.send_start + seconds,
                                  start_time=r.start_time + seconds,
                                  end_time=r.end_time + seconds,
                                  receive_end=r.receive_end + seconds) for r in self.transfers],
            resources=[r._replace(time=r.time + seconds) for r in self.resources],
            cache=[r._replace(cache_time=r.cache_time + seconds, free_time=move(r.free_time))
                   for r in self.cache],
            cache_metric=self.cache_metric,
            metrics=dict(self.metrics),
            activities=[r._replace(start=r.start + seconds, stop=r.stop + seconds)
                        for r in self.activities],
            samples=[r._replace(time=r.time + seconds) for r in self.samples],
            walls=[(a + seconds, b + seconds) for a, b in self.walls],
            meta=_shifted_meta(self.meta, seconds),
            graphs=[g._replace(started=g.started + seconds, finished=g.finished + seconds,
                               submitted=move(g.submitted)) for g in self.graphs],
            budgets=[shifted(b, seconds) for b in self.budgets],
        )

    # -- tables ------------------------------------------------------------

    def to_pandas(self, records: str = "tasks"):
        """One record list (``"tasks"``, ``"failed"``, ``"interrupted"``,
        ``"transfers"``, ``"resources"``, ``"cache"``, ``"activities"``,
        ``"samples"``, ``"metrics"``) as a pandas DataFrame, one column per
        field; ``tasks`` also gets ``group`` and ``duration``.  pandas is
        imported here."""
        from ..reporting.tables import records_frame

        if records == "metrics":
            return records_frame(list(self.metric_records()), MetricData)
        if records not in _RECORD_TYPES:
            raise ValueError(f"unknown record list {records!r}; one of "
                             f"{', '.join([*_RECORD_TYPES, 'metrics'])}")
        return records_frame(getattr(self, records), _RECORD_TYPES[records])

    def _repr_html_(self) -> str:
        """A notebook shows a run as its summary and a table of what it holds."""
        from ..reporting.tables import run_html

        return run_html(self)


def load_json(path) -> RunData:
    """Read a run saved with ``RunData.save_json`` (or embedded in a report page)."""
    return RunData.load_json(path)


def to_chrome_trace(path, profilers_or_data) -> dict:
    """Export profilers' records (or a RunData) to ``path`` as a Chrome/Perfetto trace.

    >>> import json, os, tempfile
    >>> from localsched.diagnostics.collectors.records import TaskData
    >>> path = os.path.join(tempfile.mkdtemp(), 'trace.json')
    >>> trace = to_chrome_trace(path, RunData(tasks=[TaskData('a-1', None, 5.0, 5.5, 9)]))
    >>> [(e['ph'], e['name'], e.get('dur')) for e in trace['traceEvents'] if e['ph'] == 'X']
    [('X', 'a-1', 500000.0)]
    >>> with open(path, encoding='utf-8') as f:
    ...     json.load(f) == trace
    True
    """
    data = profilers_or_data if isinstance(profilers_or_data, RunData) \
        else RunData.from_profilers(profilers_or_data)
    return data.to_chrome_trace(path)


def _parsed(text: str, source: str):
    """The JSON value of ``text``; bad JSON is a ``RunFileError`` naming ``source``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise RunFileError(f"{source}: nested too deeply to be a localsched run") from None
    except ValueError as exc:  # (JSONDecodeError: where; also too-long integers)
        cut = " (cut short?)" if isinstance(exc, json.JSONDecodeError) \
            and exc.pos >= len(text.rstrip()) else ""
        raise RunFileError(f"{source}: not valid JSON{cut}: {exc}") from None


def _decoded(cls, data, source: str, size: int | None):
    """``cls(**decode_run(data))`` once ``data`` passed ``check_run``."""
    check_run(data, source, size)
    try:
        return cls(**decode_run(data))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError,
            OverflowError) as exc:  # (a gap in check_run: still one line naming the file)
        raise RunFileError(f"{source}: not a readable localsched run "
                           f"({type(exc).__name__}: {exc})") from None


def _add_metrics(into: dict, metrics: dict) -> None:
    for key, value in metrics.items():
        into[key] = into.get(key, 0) + value


def _all_samples(p) -> bool:
    results = getattr(p, "results", None)
    return isinstance(results, list) and all(isinstance(r, SampleData) for r in results)


def _shifted_meta(meta: dict, seconds: float) -> dict:
    """``meta`` with the recording's own times moved too (and the speed
    probe's timeline)."""
    out = dict(meta)
    for name in ("started", "finished"):
        t = out.get(name)
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            out[name] = t + seconds
    speed = out.get("speed")
    line = speed.get("timeline") if isinstance(speed, dict) else None
    if isinstance(speed, dict) and isinstance(line, dict) \
            and isinstance(line.get("start"), (int, float)):
        out["speed"] = {**speed, "timeline": {**line, "start": line["start"] + seconds}}
    return out


def summed_load(loads: list) -> dict | None:
    """The load meters' readings of runs merged side by side as one
    (``machine_load.LoadMeter.stop``'s dict): seconds and CPU seconds summed,
    so that shares of them are every run's (a run without a reading adds
    nothing; ``cpu_wait`` None if any run's is); None without any reading."""
    loads = [x for x in loads if isinstance(x, dict)]
    if not loads:
        return None
    out: dict = {"cores": max((x.get("cores") for x in loads
                               if isinstance(x.get("cores"), (int, float))), default=None)}
    for name in ("seconds", "machine_cpu", "own_cpu", "caller_cpu", "native_cpu", "cpu_wait",
                 "steal"):
        values = [x.get(name) for x in loads]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[name] = sum(numbers) if len(numbers) == len(values) else None
    return out


def _copied(value):
    return dict(value) if isinstance(value, dict) else list(value) \
        if isinstance(value, list) else value


_FIELDS = ("tasks", "failed", "interrupted", "transfers", "resources", "cache",
           "cache_metric", "metrics", "activities", "samples", "walls", "meta", "graphs",
           "budgets")

_RECORD_TYPES = {
    "tasks": TaskData, "failed": FailedTaskData, "interrupted": InterruptedTaskData,
    "transfers": TransferData, "resources": ResourceData, "cache": CacheData,
    "activities": ActivityData, "samples": SampleData,
}
