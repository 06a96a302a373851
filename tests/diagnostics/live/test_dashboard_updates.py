"""What one page update sends, and how often the pacer lets a page update.

No browser and no timing: a real computation's task records are replayed
into a Feed in two halves (as the scheduler appends them between two page
updates), the components of a real Bokeh document update, and the messages
Bokeh would write to the tab are built from the document's events and
looked at.  The pacer is driven by a fake clock.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from bokeh.document import Document
from bokeh.protocol import Protocol

from localsched.diagnostics.live.pages import CPU_SHARE, PER_TASK, Pacer
from localsched.diagnostics.live.summary import Summary
from localsched.diagnostics.live.taskstream import COLUMNS, TaskStream
from tests.support.replayed_runs import live_feed


@pytest.fixture
def page():
    """A Feed over a live-looking run (its records appended by the test),
    and a Bokeh document holding a task stream and a summary strip, whose
    events are collected as the session would send them."""
    done, run, clock, feed = live_feed(200)
    stream, summary = TaskStream(feed), Summary(feed)
    doc = Document()
    doc.add_root(stream.root)
    doc.add_root(summary.root)
    events: list = []
    doc.on_change(events.append)
    return done.ends, run, clock, feed, (stream, summary), doc, events


def _update(doc, components, clock, feed, events) -> list:
    """One page update as pages._schedule makes it; the messages it sends."""
    clock.t += 0.1
    feed.update()
    events.clear()
    doc.hold("combine")
    for c in components:
        c.update()
    doc.unhold()
    return [Protocol().create("PATCH-DOC", [e]) for e in events]


def _streamed(messages) -> list:
    return [e for m in messages for e in m.content["events"] if e["kind"] == "ColumnsStreamed"]


def _column(event, name):
    return dict(event["data"]["entries"])[name]


def test_an_update_streams_only_the_new_rows_in_one_small_message(page):
    records, run, clock, feed, (stream, summary), doc, events = page
    half = len(records) // 2
    run.ends.extend(records[:half])
    first = _update(doc, (stream, summary), clock, feed, events)
    rows_first = len(stream.source.data["left"])
    assert rows_first >= 1
    run.ends.extend(records[half:])
    second = _update(doc, (stream, summary), clock, feed, events)
    rows_second = len(stream.source.data["left"])
    [event] = _streamed(second)
    new = rows_second - rows_first
    assert new > 0
    # the browser receives the new rows only, in the glyph's columns...
    assert sorted(dict(event["data"]["entries"])) == sorted(COLUMNS)
    for name in COLUMNS:
        column = _column(event, name)
        assert column["shape"] == [new]
    assert list(stream.source.data["group"][-new:]) == _column(event, "group")["array"]
    # ...numbers inline (no binary buffers: no frames beyond the message's three)
    assert all(len(m.buffers) == 0 for m in second)
    assert _column(event, "left")["array"]["type"] == "bytes"
    # no colours as strings: the browser maps groups to colours
    assert "color" not in stream.source.data
    # every task is drawn once, merged or not, over the two updates
    assert int(np.sum(stream.source.data["count"])) == len(records)
    # a message per changed source or property (summary, stream, at most
    # the x range and the lanes), small
    # (the lanes change when a worker first shows in the second half: how
    # the run's tasks fell on its threads decides)
    kinds = [(e["kind"], e.get("attr")) for m in second for e in m.content["events"]]
    assert len(kinds) == len(set(kinds)), kinds  # (each change once)
    # (the summary's text: one row of its view-less source, see summary.py)
    assert set(kinds) <= {("ColumnsStreamed", "data"), ("ColumnDataChanged", "data"),
                          ("ModelChanged", "start"), ("ModelChanged", "end"),
                          ("ModelChanged", "ticks"),
                          ("ModelChanged", "major_label_overrides")}, kinds
    assert sum(len(json.dumps(m.content)) for m in second) < 200 * new + 4000
    # an update with nothing new streams nothing
    clock.t += 0.1
    third = _update(doc, (stream, summary), clock, feed, events)
    assert _streamed(third) == []
    assert first  # (the first update sent something too)


def test_the_x_range_is_widened_rarely_not_every_update(page):
    """The task stream's x range is the server's: widened when the stream
    reaches its end, by half, so a long run changes it a few times (an
    automatic range makes the browser send its bounds back every update)."""
    records, run, clock, feed, (stream, summary), doc, events = page
    changes = 0
    step = max(len(records) // 20, 1)
    for i in range(0, len(records), step):
        run.ends.extend(records[i:i + step])
        messages = _update(doc, (stream, summary), clock, feed, events)
        changes += sum(1 for m in messages for e in m.content["events"]
                       if e["kind"] == "ModelChanged" and e["model"]["id"] == stream.x_range.id)
    assert stream.x_range.end >= max(stream.source.data["right"])
    assert changes <= 8


def _run_fast(pacer, clock, *, seconds, tasks_per_second, per_task_cost, fixed_cost):
    """Ticks every 0.1 s of a run finishing ``tasks_per_second``, as a page
    ticks: an allowed update takes in the tasks finished since the last one
    (``per_task_cost`` each) and sends its messages (``fixed_cost``), and
    reports what it cost.  Returns the updates allowed."""
    updates, taken = 0, 0
    for _ in range(int(seconds * 10)):
        clock["wall"] += 0.1
        clock["tasks"] += tasks_per_second // 10
        if pacer.ready():
            updates += 1
            cost = per_task_cost * (clock["tasks"] - taken) + fixed_cost
            taken = clock["tasks"]
            clock["cpu"] += cost
            pacer.spent(cost)
    return updates


def test_a_fast_run_takes_in_its_tasks_within_the_budget():
    """The 50k-task tree runs at about 60k tasks a second with a tab open;
    taking in a task costs the feed about 0.45 µs and a full update's
    messages about 2.5 ms: the budget lets the heavy parts update a few
    times a second (the summary strip has its own rate: see
    test_dashboard_pacing), and the server thread stays within PER_TASK
    per task plus what it kept from before the run and the last update's
    debt.  (Updates a second = (PER_TASK - feed cost per task) * tasks a
    second / cost of an update.)"""
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    pacer = Pacer(clock=lambda: clock["wall"], cpu_clock=lambda: clock["cpu"],
                  tasks=lambda: clock["tasks"])
    updates = _run_fast(pacer, clock, seconds=10, tasks_per_second=60_000,
                        per_task_cost=0.45e-6, fixed_cost=0.0025)
    expected = (PER_TASK - 0.45e-6) * 60_000 / 0.0025 * 10
    assert 0.8 * expected <= updates <= 1.2 * expected + 2
    assert clock["cpu"] <= PER_TASK * clock["tasks"] + pacer.cap + 0.006
    assert PER_TASK < 1e-6  # (the bar: 1 µs per task with a tab open)


def test_the_old_costs_would_not_refresh_a_fast_run_often():
    """What the updates cost before (several buffers and messages each,
    about 8 ms) left a fast run a couple of updates a second: the pacer
    keeps the cost bar, the rate is what gives."""
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    pacer = Pacer(clock=lambda: clock["wall"], cpu_clock=lambda: clock["cpu"],
                  tasks=lambda: clock["tasks"])
    updates = _run_fast(pacer, clock, seconds=10, tasks_per_second=50_000,
                        per_task_cost=0.6e-6, fixed_cost=0.008)
    assert updates <= 30
    # (within the budget but for the debt of the last updates, each taking
    # in the tasks of the skipped looks before it: 8 ms + 0.6 µs * 20k,
    # owed at most twice over; and the floor of an update every MAX_GAP)
    assert clock["cpu"] <= PER_TASK * clock["tasks"] + pacer.cap + 2 * 0.020 + 0.1


def test_a_slow_run_refreshes_on_its_share_of_a_core():
    """Few tasks (long ones) earn little per task: the page's share of a
    core (CPU_SHARE) then pays for about ten cheap updates a second."""
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    pacer = Pacer(clock=lambda: clock["wall"], cpu_clock=lambda: clock["cpu"],
                  tasks=lambda: clock["tasks"])
    updates = _run_fast(pacer, clock, seconds=10, tasks_per_second=100,
                        per_task_cost=0.5e-6, fixed_cost=0.0025)
    assert updates >= 90
    assert clock["cpu"] <= CPU_SHARE * clock["wall"] + pacer.cap
