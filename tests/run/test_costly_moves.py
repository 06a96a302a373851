"""Results costly to move stay where they were made (processes,
``localsched.run.batch_weighed``): a pandas frame or a list of dicts crosses
between workers through the pipe, pickled and unpickled twice on the way
(0.3 ms a hop for a small frame), so a chain of such tasks runs in one
worker once its groups are weighed, as chains of large results do; cheap
results (numbers, small arrays) keep the usual budget."""

from __future__ import annotations

import time

import numpy as np
import pytest

from localsched import multiprocessing as lmp
from localsched.callbacks import Callback
from localsched.run import batching
from localsched.run.batch_weighed import MOVE_COST, WEIGHED, Weigher

# -- the weigher --------------------------------------------------------------------


def decide(values) -> list:
    w = Weigher()
    return [w.weigh("g", v) for v in values]


def test_a_number_or_a_short_string_is_cheap_at_once():
    assert decide([3]) == [False]
    assert decide(["abc"]) == [False]


def test_a_small_array_is_cheap_to_move():
    # (pickled in band: a memory copy, 14-16 µs here, quiet or beside CPU
    # hogs.  A weighing is a timing: both samples over ``MOVE_COST`` happen
    # now and then on a loaded machine -- 0-3 in 3,000 beside three hogs,
    # once in a CI run beside other work -- and cost only the placement of
    # large results; so most weighings, not every one)
    cheap = [False in decide([np.ones(1000)] * WEIGHED) for _ in range(5)]
    assert cheap.count(True) >= 4, cheap


def records(n: int = 2000) -> list:
    return [{"id": i, "name": f"r{i}", "tags": ["a", "b"]} for i in range(n)]


def test_a_list_of_dicts_is_costly_to_move_after_two_samples():
    assert decide([records()] * WEIGHED) == [None] * (WEIGHED - 1) + [True]


def test_a_megabyte_is_costly_to_move_without_pickling_it():
    # (a result of at least ``MOVE_BYTES``: no copy of it is made to see)
    class Unpicklable(bytes):
        def __reduce__(self):
            raise AssertionError("pickled to be weighed")

    assert decide([Unpicklable(2 << 20)] * WEIGHED)[-1] is True


def test_a_pandas_frame_is_costly_to_move():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"k": np.arange(2000) % 20, "v": np.random.default_rng(0).random(2000),
                          "s": [f"s{i % 7}" for i in range(2000)]})
    assert decide([frame] * WEIGHED)[-1] is True, MOVE_COST


# -- a real process run -------------------------------------------------------------


def load(i: int) -> list:
    time.sleep(0.004)  # (longer than a batch's budget: each task would go alone)
    return records(1500)


def clean(rows: list) -> list:
    time.sleep(0.004)
    return [r for r in rows if r["id"] % 3]


def summarize(rows: list) -> int:
    time.sleep(0.004)
    return len(rows)


@pytest.fixture
def shared():
    pools = lmp.SharedPools()
    try:
        yield pools
    finally:
        pools.shutdown()


def test_a_chain_of_costly_results_runs_in_one_worker(shared):
    # 24 chains load -> clean -> summarize, each task longer than a batch's
    # budget, each result (a list of 1,500 dicts) costly to move: once the
    # groups are weighed, each chain runs where its load ran, and the lists
    # never cross to another worker (before: each task went alone, and about
    # half the chains' steps ran on the other worker)
    batching.forget()
    ran: dict = {}

    def where(key, result, dsk, state, worker_id):
        ran[key] = worker_id

    n = 24
    dsk: dict = {}
    for i in range(n):
        dsk[f"load-{i}"] = (load, i)
        dsk[f"clean-{i}"] = (clean, f"load-{i}")
        dsk[f"summarize-{i}"] = (summarize, f"clean-{i}")
    dsk["total"] = (sum, [f"summarize-{i}" for i in range(n)])
    assert shared.get(dsk, "total", num_workers=2,
                      callbacks=[Callback(posttask=where)]) == n * 1000
    together = sum(ran[f"load-{i}"] == ran[f"clean-{i}"] == ran[f"summarize-{i}"]
                   for i in range(n))
    # (the first chains run before their groups are timed and weighed)
    assert together >= n - 4, ran
