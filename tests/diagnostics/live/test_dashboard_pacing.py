"""A page's two rates: the summary strip on its own (every 100 ms, cheap: no
take-in of the finished tasks: its clock and countdown move, its counts are
the last take-in's), the heavy parts (take-in, task stream, progress per
group, ETA) within the CPU budget.

No browser, no sleeping, no timing: a real run's task records are replayed
into a Feed, and the page's cadence is driven by fake clocks.
"""

from __future__ import annotations

import pytest

from localsched.diagnostics.live.feed import Feed
from localsched.diagnostics.live.pages import PER_TASK, Cadence, Pacer
from localsched.diagnostics.live.recorder import Recorder, RunLog
from localsched.diagnostics.live.summary import Summary
from tests.support.replayed_runs import Clock, live_feed


@pytest.fixture
def live():
    """A Feed over a run whose records the test appends, as a scheduler would."""
    return live_feed(300)


def test_the_summary_shows_the_take_in_the_groups_show(live):
    """The summary strip's counts are those of the last take-in, the
    snapshot progress per group is drawn from: a summary refresh between
    two take-ins (every 100 ms, cheap: no task looked at) moves the clock,
    not the counts, so the strip never disagrees with the groups."""
    from localsched.diagnostics.live.groups import GroupProgress

    done, run, clock, feed = live
    summary, groups = Summary(feed), GroupProgress(feed)
    third = len(done.ends) // 3
    run.ends.extend(done.ends[:third])
    clock.t += 0.1
    summary.update()  # (before any take-in: the run's lengths)
    assert f"{third:,} / {len(done.keys):,}" in summary.text
    assert feed.done == 0
    groups.update()  # a full update: take-in, then every part
    summary.update()
    shown = sum(int(label.split()[-1].split("/")[0]) for label in groups.source.data["label"])
    assert shown == third and f"{third:,} / {len(done.keys):,}" in summary.text
    before = summary.text
    run.ends.extend(done.ends[third:])
    clock.t += 0.25
    summary.tick()  # a summary refresh: the clock moves, the counts wait
    assert summary.text != before and f"{third:,} / {len(done.keys):,}" in summary.text
    feed.update(force=True)  # (a probe taking the tasks in between)
    summary.tick()  # (still the counts the groups show)
    assert f"{third:,} / {len(done.keys):,}" in summary.text
    clock.t += 0.1
    groups.update()
    summary.update()
    assert f"{len(done.ends):,} / {len(done.keys):,}" in summary.text
    assert feed.progress()["done"] == len(done.ends)


def test_counts_are_exact_at_the_end(live):
    """After the run, once an update took its last tasks in: the summary's
    done/total and the groups' counts are exact, and only then "finished"."""
    done, run, clock, feed = live
    run.ends.extend(done.ends[:100])
    clock.t += 0.1
    feed.update()
    run.ends.extend(done.ends[100:])
    run.finished = clock.t = clock.t + 0.5
    p = feed.progress()
    assert p["done"] == 100 and p["status"] == "running"  # (the snapshot: not yet its end)
    feed.update()
    p = feed.progress()
    assert p["done"] == p["total"] == len(done.keys) and p["status"] == "finished"
    assert p["eta"] == 0.0
    assert {g: (c.done, c.total) for g, c in feed.groups.items()} == {
        "inc": (300, 300), "double": (300, 300), "total": (1, 1)}
    assert feed.done == len(done.keys)


def test_the_eta_counts_down_between_heavy_updates():
    """The ETA is estimated when tasks are taken in (per-group means), and
    counted down by the summary between: 40 one-second tasks left on two
    workers, then a quarter second later a quarter second less."""
    keys = [("inc", i) for i in range(60)]
    run = RunLog(keys)
    run.started = 1000.0
    run.ends.extend((k, 1000.0 + i // 2, 1001.0 + i // 2, i % 2) for i, k in enumerate(keys[:20]))
    recorder = Recorder()
    recorder.runs.append(run)
    clock = Clock(1010.0)
    feed = Feed(recorder, clock=clock)
    p = feed.progress()
    assert p["eta"] is None and p["eta_note"]  # (nothing taken in: no estimate yet)
    feed.update()
    assert feed.progress()["eta"] == pytest.approx(20.0)
    clock.t += 0.25
    assert feed.progress()["eta"] == pytest.approx(19.75)
    assert feed.progress()["done"] == 20
    # a next run, not taken in yet: the strip still shows the run the groups
    # show; once taken in, the next has no estimate (not this one's, counted down)
    recorder.runs.append(RunLog(keys))
    assert feed.progress()["run"] == run.number
    feed.update(force=True)
    p = feed.progress()
    assert p["run"] == recorder.runs[-1].number and p["done"] == 0 and p["eta"] is None
    assert p["eta_note"] == "after the first tasks finish"


def _fast_run(cadence, clock, *, seconds, tasks_per_second, per_task_cost, heavy_cost,
              summary_cost) -> dict:
    """Ticks every 0.1 s of a run finishing ``tasks_per_second``, as a page
    ticks: a full update takes in the tasks finished since the last one
    (``per_task_cost`` each) and sends the heavy parts (``heavy_cost``); a
    summary update costs ``summary_cost``.  Counts of each kind."""
    made = {"full": 0, "summary": 0}
    taken = 0
    for _ in range(int(seconds * 10)):
        clock["wall"] += 0.1
        clock["tasks"] += tasks_per_second // 10
        kind = cadence.next()
        if kind is None:
            continue
        made[kind] += 1
        if kind == "full":
            cost = per_task_cost * (clock["tasks"] - taken) + heavy_cost + summary_cost
            taken = clock["tasks"]
        else:
            cost = summary_cost
        clock["cpu"] += cost
        cadence.spent(kind, cost)
    return made


def _cadence(clock) -> Cadence:
    def wall():
        return clock["wall"]

    pacer = Pacer(clock=wall, cpu_clock=lambda: clock["cpu"], tasks=lambda: clock["tasks"])
    return Cadence(pacer, clock=wall)


def test_the_summary_keeps_its_rate_when_heavy_updates_are_not_affordable():
    """Heavy updates costing more than the budget allows every tick (10 ms
    each, and 0.45 µs a task to take in at 50k tasks a second) are spaced out;
    the summary strip still refreshes every tick, and the whole page stays
    within its budget."""
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    cadence = _cadence(clock)
    made = _fast_run(cadence, clock, seconds=10, tasks_per_second=50_000,
                     per_task_cost=0.45e-6, heavy_cost=0.010, summary_cost=0.001)
    assert made["full"] + made["summary"] >= 95  # about every 100 ms
    assert 3 <= made["full"] <= 30  # the heavy parts on their own, slower rate
    assert clock["cpu"] <= PER_TASK * clock["tasks"] + cadence.pacer.cap + 0.1


def test_heavy_parts_redraw_twice_a_second_while_tasks_finish_fast():
    """However cheap for the server, a run of 50k tasks a second gets a full
    update (the browser redraws its task stream and groups) at most every
    FAST_PERIOD; the strip ticks every 100 ms between.  A slow run (100
    tasks a second) gets a full update every tick."""
    from localsched.diagnostics.live.pages import FAST_PERIOD

    for rate, fulls in ((50_000, (10 / FAST_PERIOD * 0.8, 10 / FAST_PERIOD + 1)), (100, (90, 100))):
        clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
        wall, cpu, tasks = (clock.__getitem__ for _ in range(3))
        pacer = Pacer(clock=lambda w=wall: w("wall"), cpu_clock=lambda c=cpu: c("cpu"),
                      tasks=lambda t=tasks: t("tasks"), per_task=1e-3)  # (the server: no limit)
        cadence = Cadence(pacer, clock=lambda w=wall: w("wall"),
                          tasks=lambda t=tasks: t("tasks"))
        made = _fast_run(cadence, clock, seconds=10, tasks_per_second=rate,
                         per_task_cost=0.0, heavy_cost=0.0, summary_cost=0.0)
        assert fulls[0] <= made["full"] <= fulls[1], (rate, made)
        assert made["full"] + made["summary"] >= 95, (rate, made)


def test_cheap_heavy_updates_run_every_tick():
    """A slow run (few tasks) whose updates are cheap: every tick is a full one."""
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    cadence = _cadence(clock)
    made = _fast_run(cadence, clock, seconds=10, tasks_per_second=100,
                     per_task_cost=0.5e-6, heavy_cost=0.0015, summary_cost=0.0005)
    assert made["full"] >= 90


def test_a_costly_summary_slows_to_its_share_of_a_core():
    """Even the summary strip is paced: at 10 ms an update (a loaded machine)
    it keeps within its share of a core rather than run every tick."""
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    cadence = _cadence(clock)
    made = _fast_run(cadence, clock, seconds=20, tasks_per_second=0, per_task_cost=0.0,
                     heavy_cost=0.010, summary_cost=0.010)
    used = clock["cpu"] / clock["wall"]
    assert used <= cadence.pacer.share + cadence.summary_share + 0.01
    assert made["full"] + made["summary"] >= 20  # (slower, never frozen)


def test_one_message_names_only_the_models_its_events_touch(live):
    """The page's message (patch.py) says what bokeh's own PATCH-DOC
    message says, without a reference built for every model of the page;
    a model new to the browser is still sent whole."""
    from bokeh.document import Document
    from bokeh.models import Title
    from bokeh.protocol import Protocol

    from localsched.diagnostics.live.patch import patch_message
    from localsched.diagnostics.live.taskstream import TaskStream

    done, run, clock, feed = live
    stream, summary = TaskStream(feed), Summary(feed)
    doc = Document()
    doc.add_root(stream.root)
    doc.add_root(summary.root)
    doc.models.flush_synced()  # (as after the page's first message: all in the browser)
    events: list = []
    doc.on_change(events.append)
    run.ends.extend(done.ends)
    clock.t += 0.1
    feed.update()
    stream.update()
    summary.update()
    assert {type(e).__name__ for e in events} >= {"ColumnsStreamedEvent", "ModelChangedEvent"}
    ours = patch_message(doc, events)
    theirs = Protocol().create("PATCH-DOC", events)
    assert ours.content == theirs.content
    assert len(ours.buffers) == len(theirs.buffers)
    # a model the browser has not seen goes whole, then counts as sent
    events.clear()
    stream.root.title = Title(text="new")
    message = patch_message(doc, events)
    [event] = message.content["events"]
    assert event["new"]["type"] == "object" and event["new"]["id"] == stream.root.title.id
    assert stream.root.title not in doc.models._new_models


@pytest.mark.parametrize("many", [False, True])
def test_lanes_are_numbered_as_their_workers_first_show(many):
    """A task's lane is its worker's, workers numbered in the order they
    first finish a task, the same across take-ins (thread idents and pids
    in numpy; any other worker ids, or many workers, by a dict)."""
    feed = Feed(Recorder())
    if many:  # more workers than numpy's pass per worker is for
        wids = [100 + i % 20 for i in range(60)][::-1]
        first = list(dict.fromkeys(wids))
        assert feed._lanes(wids).tolist() == [first.index(w) for w in wids]
        return
    assert feed._lanes([7, 7, 9, 7, 3, 9]).tolist() == [0, 0, 1, 0, 2, 1]
    assert feed._lanes([3, 11, 7, 11]).tolist() == [2, 3, 0, 3]
    assert feed._lanes(["tcp://a", 7]).tolist() == [4, 0]


@pytest.mark.parametrize("few_bins", [True, False])
def test_groups_merged_in_one_bin_sit_side_by_side(few_bins):
    """Tiny tasks of two groups interleaved on one worker merge into one
    rectangle per group and bin; drawn over the same span the later one
    would hide the other (a tree's leaves vanished under its sums), so they
    share the bin's span side by side, each as wide as its busy seconds."""
    import numpy as np

    from localsched.diagnostics.live.bins import merge_tiny

    # lane 0: group 0 busy 2 s, group 1 busy 6 s, interleaved in [0, 8];
    # lane 1: group 1 alone, at 10 s (or, for the sorting path of many
    # possible bins, at 10^7 s)
    far = 10.0 if few_bins else 1e7
    starts = np.array([0.0, 1.0, 2.0, 3.0, far])
    ends = np.array([1.0, 2.0, 3.0, 8.0, far + 1])
    lane = np.array([0, 0, 0, 0, 1])
    gids = np.array([0, 1, 0, 1, 1])
    at, lo, hi, count = merge_tiny(np.arange(5), starts, ends, lane, gids, 100.0, 100)
    rects = sorted(zip(lane[at].tolist(), gids[at].tolist(), lo, hi, count, strict=True))
    assert rects == [(0, 0, 0.0, 2.0, 2), (0, 1, 2.0, 8.0, 2), (1, 1, far, far + 1, 1)]
