"""Results where people use them: pandas DataFrames and notebook tables."""

from __future__ import annotations

import time

import pytest

import localsched
from localsched.diagnostics import (
    CacheProfiler,
    FineMetrics,
    Profiler,
    ResourceProfiler,
    SampleProfiler,
)
from localsched.diagnostics.collectors.records import TaskData
from localsched.diagnostics.runs.rundata import RunData

pd = pytest.importorskip("pandas")


def spin(seconds, x):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return x


GRAPH = {**{f"load-{i}": (spin, 0.02, i) for i in range(6)},
         "total-1": (sum, [f"load-{i}" for i in range(6)])}


def test_every_profiler_hands_its_records_to_pandas():
    with Profiler() as prof, ResourceProfiler(dt=0.01) as rprof, CacheProfiler() as cprof, \
            FineMetrics() as fm, SampleProfiler(interval=0.002) as sp:
        assert localsched.get(GRAPH, "total-1") == 15
    tasks = prof.to_pandas()
    assert len(tasks) == 7
    assert sorted(tasks["group"].unique()) == ["load", "total"]
    assert (tasks["duration"] == tasks["end_time"] - tasks["start_time"]).all()
    assert tasks.loc[tasks["group"] == "load", "duration"].min() >= 0.019
    assert list(rprof.to_pandas().columns) == ["time", "mem", "cpu"]
    assert len(rprof.to_pandas()) == len(rprof.results) > 0
    cache = cprof.to_pandas()
    assert set(cache["group"]) == {"load", "total"} and cache["metric"].sum() == 7
    metrics = fm.to_pandas()
    assert {"span", "group", "activity", "unit", "value"} <= set(metrics.columns)
    load_seconds = metrics[(metrics.group == "load") & (metrics.unit == "seconds")].value.sum()
    assert load_seconds == pytest.approx(sum(fm.metrics[k] for k in fm.metrics
                                             if k[1] == "load" and k[3] == "seconds"))
    samples = sp.to_pandas()
    assert len(samples) == len(sp.results) and "function" in samples.columns
    assert "spin" in set(samples.loc[samples.group == "load", "function"])


def test_empty_profilers_give_empty_frames_with_their_columns():
    frame = Profiler().to_pandas()
    assert len(frame) == 0
    assert list(frame.columns) == ["key", "task", "start_time", "end_time", "worker_id",
                                   "group", "duration"]


def test_run_data_to_pandas_and_notebook_tables():
    run = RunData(tasks=[TaskData(("inc-1", 0), None, 1.0, 1.5, 7),
                         TaskData(("inc-1", 1), None, 1.5, 2.5, 8)],
                  metrics={((), "inc", "thread-cpu", "seconds"): 1.2},
                  meta={"title": "a <b> run"})
    frame = run.to_pandas()
    assert frame["duration"].tolist() == [0.5, 1.0] and set(frame["group"]) == {"inc"}
    assert run.to_pandas("metrics")["value"].tolist() == [1.2]
    with pytest.raises(ValueError, match="unknown record list 'nope'"):
        run.to_pandas("nope")
    page = run._repr_html_()
    assert "a &lt;b&gt; run" in page and "<table" in page and ">2<" in page
    summary = run.summary()._repr_html_()
    assert "parallel efficiency" in summary and ">inc<" in summary
