"""The live counts follow tasks, not batches.

A worker hands its records over in lists (every millisecond or so, see
``localsched.worker.runtime``), and a batch of quick tasks may end in one that
takes long.  The page must still say what happened: every task that ended
is counted done, and "in flight" is what the workers run now -- one task
per busy worker, not every task of their batches.  The runs here are real
(threads); the tasks meet the test at events, so nothing depends on speed.
"""

from __future__ import annotations

import json
import threading
import urllib.request

import localsched

N = 40  # quick tasks before the one that blocks


def _progress(dash) -> dict:
    url = dash.link.rsplit("/", 1)[0] + "/json/progress.json"
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def _chain(blocked: threading.Event, release: threading.Event) -> dict:
    """A chain of quick steps whose step ``N`` waits for the test: the
    planner puts quick steps of a chain in one batch, the blocking one
    among them."""
    def step(x, i):
        if i == N:
            blocked.set()
            assert release.wait(60)
        return x + 1

    graph = {("step", 0): (step, 0, 0)}
    for i in range(1, N + 5):
        graph[("step", i)] = (step, ("step", i - 1), i)
    return graph


def test_tasks_that_ended_count_while_their_batch_still_runs(dash):
    blocked, release = threading.Event(), threading.Event()
    graph = _chain(blocked, release)
    result: list = []
    errors: list = []

    def run():
        try:
            result.append(localsched.get(graph, ("step", N + 4), num_workers=2))
        except BaseException as exc:  # noqa: BLE001 -- reported by the test
            errors.append(exc)

    with dash:
        worker = threading.Thread(target=run)
        worker.start()
        try:
            assert blocked.wait(60)
            during = _progress(dash)
        finally:
            release.set()
            worker.join(60)
    assert not worker.is_alive() and errors == [] and result == [N + 5]
    assert during["status"] == "running"
    # every step before the blocking one ended: counted, whatever the batches
    assert during["done"] == N, during
    # one task runs (the blocking one), not the rest of its batch
    assert during["running"] == 1 and during["busy"] == 1, during
    assert during["rate"] > 0, during
    after = _progress(dash)
    assert (after["status"], after["done"], after["running"]) == ("finished", N + 5, 0)


def _groups_done(dash) -> int:
    """Tasks done as the page's progress-per-group bars label them."""
    from localsched.diagnostics.live.groups import GroupProgress

    labels = GroupProgress(dash.feed)._data()["label"]
    return sum(int(label.split()[-1].split("/")[0]) for label in labels)


def test_the_strip_and_the_groups_agree_while_records_are_on_their_way(dash):
    """The strip's 'tasks done' is the sum of the groups' bars, also while a
    batch's ended tasks wait for its long one: a reader of the page sees one
    number of tasks done, not two (the gallery caught 854 against 853)."""
    blocked, release = threading.Event(), threading.Event()
    graph = _chain(blocked, release)
    with dash:
        worker = threading.Thread(
            target=lambda: localsched.get(graph, ("step", N + 4), num_workers=2))
        worker.start()
        try:
            assert blocked.wait(60)
            during = _progress(dash)  # (a take-in: the strip's numbers)
            shown = _groups_done(dash)
            # a summary-only refresh reads the workers again: the strip must
            # still agree with the bars the last take-in drew
            dash.feed.progress()
            summary = dash.feed.progress()["done"]
        finally:
            release.set()
            worker.join(60)
    assert not worker.is_alive()
    assert during["done"] == N and shown == N and summary == N, (during, shown, summary)
    after = _progress(dash)["done"]  # (a take-in of the last records first)
    assert _groups_done(dash) == after == N + 5
