"""The live counts follow tasks, not batches.

A worker hands its records over in lists (every millisecond or so, see
``localsched.worker.runtime``), and a batch of quick tasks may end in one that
takes long.  The page must still say what happened: every task that ended
is counted done, and "in flight" is what the workers run now -- one task
per busy worker, not every task of their batches.  The runs here are real,
on threads and on processes (whose workers say which task they run in their
task slot, ``localsched._pool.taskslot``); the tasks meet the test at gates
(``tests.support.gates``: they cross processes), so nothing depends on speed.
"""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from localsched import multiprocessing as _processes
from localsched import threaded as _threads
from tests.support.gates import Gate, notify, wait_for

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module

N = 40  # quick tasks before the one that blocks

SCHEDULERS = {"threads": _threads.get, "processes": _processes.get}


def _progress(dash) -> dict:
    url = dash.link.rsplit("/", 1)[0] + "/json/progress.json"
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def _step(x, i, blocked, release):
    """A quick step, but step ``N`` tells the test it runs (``blocked``)
    and waits for it (``release``)."""
    if i == N:
        notify(blocked)
        wait_for(release)
    return x + 1


def _chain(blocked: Gate, release: Gate) -> dict:
    """A chain of quick steps whose step ``N`` waits for the test: the
    planner puts quick steps of a chain in one batch, the blocking one
    among them."""
    gates = (blocked.address, release.address)
    graph = {("step", 0): (_step, 0, 0, *gates)}
    for i in range(1, N + 5):
        graph[("step", i)] = (_step, ("step", i - 1), i, *gates)
    return graph


class _Held:
    """A run of the chain in a thread of the test's, held at step ``N``
    while the ``with`` block reads the page."""

    def __init__(self, get):
        self.get = get
        self.result: list = []
        self.errors: list = []

    def __enter__(self):
        self.blocked, self.release = Gate(), Gate()
        graph = _chain(self.blocked, self.release)

        def run():
            try:
                self.result.append(self.get(graph, ("step", N + 4), num_workers=2))
            except BaseException as exc:  # noqa: BLE001 -- reported by the test
                self.errors.append(exc)

        self.thread = threading.Thread(target=run)
        self.thread.start()
        self.blocked.wait()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.release.open()
        finally:
            self.thread.join(120)
            self.blocked.close()
            self.release.close()
        assert not self.thread.is_alive() and self.errors == [] and self.result == [N + 5]


@pytest.mark.parametrize("scheduler", list(SCHEDULERS))
def test_tasks_that_ended_count_while_their_batch_still_runs(dash, scheduler):
    with dash, _Held(SCHEDULERS[scheduler]):
        during = _progress(dash)
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


@pytest.mark.parametrize("scheduler", list(SCHEDULERS))
def test_the_strip_and_the_groups_agree_while_records_are_on_their_way(dash, scheduler):
    """The strip's 'tasks done' is the sum of the groups' bars, also while a
    batch's ended tasks wait for its long one: a reader of the page sees one
    number of tasks done, not two (the gallery caught 854 against 853)."""
    with dash, _Held(SCHEDULERS[scheduler]):
        during = _progress(dash)  # (a take-in: the strip's numbers)
        shown = _groups_done(dash)
        # a summary-only refresh reads the workers again: the strip must
        # still agree with the bars the last take-in drew
        dash.feed.progress()
        summary = dash.feed.progress()["done"]
    assert during["done"] == N and shown == N and summary == N, (during, shown, summary)
    after = _progress(dash)["done"]  # (a take-in of the last records first)
    assert _groups_done(dash) == after == N + 5


def test_a_look_long_after_the_last_reads_the_rate_since_then(dash):
    """A first look more than the rate's window (3 s) after the run started
    (a process pool slow to start on a busy machine) reads the tasks done
    since the start, not 0.0; so does a look after a quiet spell."""
    from types import SimpleNamespace

    run = SimpleNamespace(started=100.0)
    assert dash.feed._rate(run, 105.0, 50) == 10.0
    assert dash.feed._rate(run, 110.0, 100) == 10.0
