"""Properties of the bokeh-free aggregation behind the figures (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest

from localsched.diagnostics.reporting.aggregate import (
    cache_steps,
    duration_bins,
    gapless_offsets,
    occupancy_bars,
    step_max,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

durations = st.floats(min_value=1e-6, max_value=5.0, allow_nan=False)
gaps = st.floats(min_value=0.0, max_value=3.0, allow_nan=False)


@st.composite
def worker_intervals(draw):
    """Non-overlapping intervals on a few worker rows, as one worker runs tasks."""
    starts, ends, rows = [], [], []
    for row in range(draw(st.integers(1, 4))):
        t = draw(gaps)
        for _ in range(draw(st.integers(0, 40))):
            d = draw(durations)
            starts.append(t)
            ends.append(t + d)
            rows.append(row)
            t += d + draw(gaps)
    return np.array(starts, float), np.array(ends, float), np.array(rows, np.int64)


@settings(max_examples=200, deadline=None)
@given(worker_intervals(), st.floats(min_value=0.01, max_value=2.0))
def test_occupancy_bars_paint_exactly_the_busy_time_of_each_row(intervals, px):
    start, end, rows = intervals
    bars = occupancy_bars(start, end, rows, px, 0.8)
    assert bars["count"].sum() >= len(start)  # an interval may touch two columns
    assert np.all(bars["height"] > 0) and np.all(bars["height"] <= 0.8 + 1e-12)
    painted = bars["height"] / 0.8 * (bars["right"] - bars["left"])
    for row in set(rows.tolist()):
        busy = float((end - start)[rows == row].sum())
        assert painted[bars["row"] == row].sum() == pytest.approx(busy, rel=1e-6, abs=1e-9)
    # every interval is a member of some bar, and bars stay on their rows
    members = np.concatenate(bars["members"]) if len(bars["members"]) else np.empty(0)
    assert set(members.tolist()) == set(range(len(start)))
    assert set(bars["row"].tolist()) <= set(rows.tolist())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), durations, st.floats(0, 1e6)), min_size=1,
                max_size=60), st.floats(min_value=0.05, max_value=10.0))
def test_cache_level_and_its_pixel_resampling_keep_the_peak(stays, px):
    cached = np.array([s[0] for s in stays])
    freed = cached + np.array([s[1] for s in stays])
    metric = np.array([s[2] for s in stays])
    time, level = cache_steps(cached, freed, metric)
    assert level[0] == 0 and level[-1] == pytest.approx(0, abs=1e-6 * max(metric.sum(), 1))
    # the peak is the largest sum of stays held at one instant (frees first at ties)
    peak = max(metric[(cached <= t) & (freed > t)].sum() for t in cached)
    assert level.max() == pytest.approx(peak, rel=1e-9, abs=1e-6)
    xs, ys = step_max(time, level, px)
    assert ys.max() == pytest.approx(level.max(), rel=1e-9, abs=1e-6)
    assert ys[-1] == pytest.approx(level[-1], abs=1e-6 * max(metric.sum(), 1))
    assert np.all(np.diff(xs) >= 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.just(0.0), durations), min_size=1, max_size=200),
       st.integers(1, 40))
def test_duration_bins_count_every_task_once(values, bins):
    counts, edges = duration_bins(np.array(values), bins)
    assert counts.sum() == len(values)
    assert len(edges) == bins + 1 and np.all(np.diff(edges) > 0) and edges[0] > 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 100)), min_size=1, max_size=12),
       st.floats(min_value=0.0, max_value=5.0))
def test_runs_recorded_apart_follow_one_another(runs, gap):
    spans = [(a, a + d) for a, d in runs]
    offsets = gapless_offsets(spans, gap)
    moved = sorted((a + o, b + o) for (a, b), o in zip(spans, offsets, strict=True))
    end = moved[0][1]
    for a, b in moved[1:]:
        assert a <= end + gap + 1e-6 * max(1.0, abs(end))  # no gap wider than `gap`
        end = max(end, b)
    # runs keep their order and their lengths
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    shifted = [spans[i][0] + offsets[i] for i in order]
    assert all(b >= a - 1e-9 * max(1.0, abs(a)) for a, b in zip(shifted, shifted[1:], strict=False))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.just(0.0), durations), min_size=1, max_size=50))
def test_histogram_ticks_are_few_and_on_the_axis(values):
    from localsched.diagnostics.figures.durations import duration_ticks

    _, edges = duration_bins(np.array(values), 30)
    ticks = duration_ticks(edges[0], edges[-1])
    assert 1 <= len(ticks) <= 4
    assert all(edges[0] * 0.99 <= t <= edges[-1] * 1.01 for t in ticks)
