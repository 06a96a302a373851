"""The batch planner on the shapes people build (issue 17).

Each shape is planned as a pool would: every function timed (1 µs a task),
batches handed to idle workers, the oldest batch finishing first.  The
figures: how many tasks a batch takes, and how many results the run holds
against a sequential run in the same order (the synchronous scheduler's).
"""

from __future__ import annotations

import operator
import sys
import threading

import pytest

from localsched import threaded
from localsched.callbacks import Callback
from localsched.local import get_sync
from localsched.plan.graph import CALL
from localsched.run.batching import CHAIN_FACTOR, MAX_LIVE, RUNNING, Planner
from localsched.run.machine import RunState
from localsched.worker import runtime


def _run(dsk, keys):
    return RunState(dsk, keys)


def sequential_peak(dsk, keys, counts=None) -> int:
    """Most results held at once by a sequential run (the ready rule);
    ``counts(key)``: whether a result counts (default: all)."""
    run = _run(dsk, keys)
    complete = run.mover()
    peak = 0
    while run.ready:
        i = run.ready.pop()
        run.status[i] = RUNNING
        complete(i, None)
        peak = max(peak, len(run.cache) if counts is None else sum(map(counts, run.cache)))
    return peak


def pool_run(dsk, keys, workers=2, limit=256, result=None, max_inputs=None, counts=None):
    """Plan the whole graph as ``workers`` workers would run it, each batch
    finishing whole, the oldest first: (batch sizes, most results held).

    ``result``: what every task returns, as the planner sees it (None: its
    size unknown to the planner, as a result that did not travel back), or
    a function of the key that says it.  ``counts(key)``: whether a result
    counts towards what is held (default: all)."""
    run = _run(dsk, keys)
    complete = run.mover()
    planner = Planner(run, limit=limit, max_inputs=max_inputs)
    for i in range(len(run.keys)):
        planner.observe(i, 1e-6, result(run.keys[i]) if callable(result) else result)
    running, sizes, peak = [], [], 0
    while run.remaining:
        while len(running) < workers and planner.has_ready():
            batch = planner.next_batch(workers - 1 - len(running))
            sizes.append(len(batch))
            running.append(batch)
        for i in running.pop(0):
            complete(i, result)
        peak = max(peak, len(run.cache) if counts is None else sum(map(counts, run.cache)))
    return sizes, peak


# -- the shapes (tiny tasks; the benchmark's, smaller) ----------------------------


def fan_in(n=2000):
    dsk = {("x", i): (operator.neg, i) for i in range(n)}
    dsk["total"] = (sum, [("x", i) for i in range(n)])
    return dsk, ["total"]


def outputs(n=2000):
    dsk = {("x", i): (operator.neg, i) for i in range(n)}
    return dsk, list(dsk)


def shuffle(n=16, stages=2):
    dsk = {("p", 0, i): (operator.neg, i) for i in range(n)}
    for s in range(1, stages + 1):
        for i in range(n):
            for j in range(n):
                dsk[("split", s, i, j)] = (operator.neg, ("p", s - 1, i))
        for j in range(n):
            dsk[("p", s, j)] = (max, *[("split", s, i, j) for i in range(n)])
    return dsk, [("p", stages, j) for j in range(n)]


def tree(n=2048):
    dsk = {("leaf", i): (operator.neg, i) for i in range(n)}
    level = list(dsk)
    d = 0
    while len(level) > 1:
        d += 1
        level = [_put(dsk, ("sum", d, j), (operator.add, level[2 * j], level[2 * j + 1]))
                 for j in range(len(level) // 2)]
    return dsk, level


def chain(n=1000):
    dsk = {("c", 0): (operator.neg, 0)}
    for i in range(1, n):
        dsk[("c", i)] = (operator.neg, ("c", i - 1))
    return dsk, [("c", n - 1)]


def bag(partitions=512, arity=8):
    dsk, level = {}, []
    for i in range(partitions):
        dsk[("part", i)] = (operator.neg, i)
        level.append(_put(dsk, ("map", i), (operator.neg, ("part", i))))
    d = 0
    while len(level) > 1:
        d += 1
        level = [_put(dsk, ("agg", d, j), (max, *level[j * arity:(j + 1) * arity]))
                 for j in range(len(level) // arity)]
    return dsk, level


def stencil(width=32, steps=24):
    dsk = {("s", 0, i): (operator.neg, i) for i in range(width)}
    for t in range(1, steps):
        for i in range(width):
            ins = [("s", t - 1, j) for j in range(max(0, i - 1), min(width, i + 2))]
            dsk[("s", t, i)] = (max, *ins)
    dsk["total"] = (sum, [("s", steps - 1, i) for i in range(width)])
    return dsk, ["total"]


def _put(dsk, key, task):
    dsk[key] = task
    return key


SHAPES = {"fan-in": fan_in, "outputs": outputs, "shuffle": shuffle, "tree": tree,
          "chain": chain, "bag": bag, "stencil": stencil}


# -- batch sizes -----------------------------------------------------------------


@pytest.mark.parametrize("shape", ["fan-in", "outputs", "chain"])
def test_independent_tasks_share_batches_as_a_chain_does(shape):
    dsk, keys = SHAPES[shape]()
    sizes, _ = pool_run(dsk, keys)
    # ~2000 tasks in batches of up to 256: 8 full ones, and the tails.
    assert sum(sizes) == len(dsk)
    assert len(sizes) <= 12
    assert max(sizes) == 256


def test_a_shuffle_batches_the_pieces_its_gathers_wait_for():
    # Each gather waits for 16 pieces: more than a batch may hold, so the
    # pieces are held by any order, and batches take many of them.
    dsk, keys = shuffle()
    sizes, _ = pool_run(dsk, keys)
    assert sum(sizes) / len(sizes) >= 10
    assert len(sizes) <= len(dsk) // 10


def test_a_tree_is_cut_at_the_end_of_its_subtrees():
    dsk, keys = tree()
    sizes, _ = pool_run(dsk, keys)
    assert sum(sizes) / len(sizes) >= 100  # (4,095 tasks)


@pytest.mark.parametrize("shape", ["bag", "stencil"])
def test_results_waited_for_by_near_users_still_count(shape):
    # A bag's 8-ary reduction or a stencil's 3-input users: a batch holds at
    # most MAX_LIVE of them, then stops at the end of a region.
    dsk, keys = SHAPES[shape]()
    sizes, _ = pool_run(dsk, keys)
    assert max(sizes) <= 3 * MAX_LIVE
    assert sum(sizes) == len(dsk)


# -- tiny results: no memory at stake ---------------------------------------------


class Opaque:
    """A result whose size the planner cannot tell (so it counts)."""


def test_a_stencil_of_tiny_results_batches_like_a_chain():
    # Every stencil result is wanted by three tasks that wait for two more
    # inputs: counted, a batch stops at one task or a few.  Ints put no
    # memory at stake, so batches run to their size.
    dsk, keys = stencil()  # 769 tasks
    counted, _ = pool_run(dsk, keys, result=Opaque())
    tiny, _ = pool_run(dsk, keys, result=7)
    assert sum(tiny) == sum(counted) == len(dsk)
    assert len(tiny) <= len(dsk) // 15  # (45, the lattice's narrowing end in small ones)
    assert len(counted) >= 10 * len(tiny)  # (743)


def test_tiny_inputs_do_not_count_against_a_process_batchs_inputs():
    dsk, keys = stencil()
    sizes, _ = pool_run(dsk, keys, result=7, max_inputs=4)
    assert len(sizes) <= len(dsk) // 15
    sizes, _ = pool_run(dsk, keys, result=Opaque(), max_inputs=4)
    assert max(sizes) <= 3 * MAX_LIVE


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_tiny_results_hold_at_most_a_batch_of_ints_more(shape):
    # The bytes at stake: a pool holds no more than the sequential run plus
    # what its batches make, a few KB of ints at most.
    dsk, keys = SHAPES[shape]()
    _, peak = pool_run(dsk, keys, result=7)
    extra_bytes = (peak - sequential_peak(dsk, keys)) * sys.getsizeof(7)
    assert extra_bytes <= 2 * 256 * sys.getsizeof(7)  # two workers' batches: < 16 KB


@pytest.mark.parametrize("later", ["x" * 100_000, Opaque()])
def test_a_group_that_returns_something_else_counts_again(later):
    # Judged by each result, not the first one only.
    dsk, keys = stencil()
    planner = _timed_planner(dsk, keys, 7)
    assert len(planner.next_batch(0)) > 3 * MAX_LIVE
    planner = _timed_planner(dsk, keys, 7)
    for i in range(len(planner.run.keys)):
        planner.observe(i, 1e-6, later)
    assert len(planner.next_batch(0)) <= 3 * MAX_LIVE


# -- held results against the sequential order -------------------------------------


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_pool_holds_no_more_than_the_sequential_run(shape):
    dsk, keys = SHAPES[shape]()
    _, peak = pool_run(dsk, keys)
    assert peak <= sequential_peak(dsk, keys) + 1


def test_a_batch_of_tiny_results_counts_from_its_first_that_may_be_large():
    # A tree whose leaves make ints and whose sums make something of unknown
    # size: a batch starts with leaves (nothing to count) and counts from its
    # first sum on, so it still ends where its sub-tree does.
    dsk, keys = tree()
    is_sum = lambda key: key[0] == "sum"  # noqa: E731
    sizes, peak = pool_run(dsk, keys, result=lambda key: 7 if key[0] == "leaf" else None,
                           counts=is_sum)
    # (the sums held; each of the two workers' batches, cut where it holds
    # the fewest, at most one more than the sequential run)
    assert peak <= sequential_peak(dsk, keys, is_sum) + 2
    assert sum(sizes) == len(dsk) and len(sizes) < len(dsk) / 2  # (leaves share batches)


@pytest.mark.parametrize("result, tiny", [(7, True), ([7], False), (None, False)])
def test_a_batch_of_tiny_results_is_handed_over_without_a_last_use_walk(result, tiny):
    # Ints, with the worker writing the shared cache (``direct``): it stores
    # each result some task uses and sends each back; the scheduler frees
    # them.  Lists, results of unknown size, or a worker on an overlay:
    # each is dropped after its last use in the batch, and sent back only
    # when something outside the batch uses it.
    dsk, keys = tree(64)
    planner = _timed_planner(dsk, keys, result)
    batch = planner.next_batch(0)
    assert len(batch) > 3 and planner.tiny_batch is tiny
    walked, _ = planner.items(batch, keep_all=False, pack_data=False)
    items, data = planner.items(batch, keep_all=False, pack_data=False, direct=tiny)
    assert data is None and [it[0] for it in items] == batch
    stores = [it[3] for it in items]
    drops = [k for it in items for k in it[4]]
    sends = [it[5] for it in items]
    if tiny:  # (the root alone has no user to keep its result for)
        assert stores == [it[1] not in keys for it in items] and drops == [] and all(sends)
    else:
        assert items == walked
    walked_drops = [k for it in walked for k in it[4]]
    assert not all(it[3] for it in walked) and len(walked_drops) == sum(it[3] for it in walked)
    assert not all(it[5] for it in walked)


def test_threads_results_on_every_shape_are_sequential_ones():
    # Nobody watching (the worker writes a tiny batch's results into the
    # shared cache itself), a posttask hook (an overlay per batch), and a
    # cache of the caller's (an overlay too): the same results, and that
    # cache holds the outputs alone at the end.
    seen: list = []
    hook = Callback(posttask=lambda key, result, dsk, state, worker: seen.append(key))
    for name, make in SHAPES.items():
        dsk, keys = make()
        expected = get_sync(dsk, keys)
        assert threaded.get(dsk, keys, num_workers=2) == expected, name
        with hook:
            assert threaded.get(dsk, keys, num_workers=2) == expected, name
        assert len(seen) == len(dsk), name
        seen.clear()
        cache: dict = {}
        assert threaded.get(dsk, keys, num_workers=2, cache=cache) == expected, name
        assert set(cache) == set(keys), name


class _WritersSeen(dict):
    """A ``cache=`` that notes which threads write it."""

    def __init__(self):
        super().__init__()
        self.writers: set = set()

    def __setitem__(self, key, value):
        self.writers.add(threading.get_ident())
        super().__setitem__(key, value)


@pytest.mark.parametrize("fails", [False, True])
def test_only_the_scheduler_thread_writes_a_cache_the_caller_passed(fails):
    # A worker that wrote the caller's dict itself would go on writing it
    # after a failure, until it saw the stop: after ``get`` raised.
    dsk, keys = chain(3000)
    if fails:
        dsk["boom"] = (operator.truediv, ("c", 2000), 0)
        keys = ["boom"]
    cache = _WritersSeen()
    if fails:
        with pytest.raises(ZeroDivisionError):
            threaded.get(dsk, keys, num_workers=2, cache=cache)
    else:
        assert threaded.get(dsk, keys, num_workers=2, cache=cache) == get_sync(dsk, keys)
    assert cache.writers == {threading.get_ident()}


# -- work spreads over the workers -------------------------------------------------


def _timed_planner(dsk, keys, result=None):
    run = _run(dsk, keys)
    planner = Planner(run)
    for i in range(len(run.keys)):
        planner.observe(i, 1e-6, result)
    return planner


@pytest.mark.parametrize("idle", [1, 2])
def test_a_batch_leaves_a_ready_task_to_each_other_idle_worker(idle):
    planner = _timed_planner(*fan_in(20))
    assert len(planner.next_batch(idle)) == 20 - idle  # the others' share stays
    assert len(planner.run.ready) == idle


def test_with_no_other_idle_worker_a_batch_takes_every_ready_task():
    planner = _timed_planner(*fan_in(20))
    assert len(planner.next_batch(0)) == 20


def test_a_small_fan_in_counts_like_a_tree_node():
    # Four results for a sum that waits for four: a batch could close it, so
    # they count, and a batch that cannot close it (another worker runs a
    # task of it) stops at the first: the rest goes to that worker.
    planner = _timed_planner(*fan_in(4))
    assert len(planner.next_batch(1)) == 1


def test_threads_hand_independent_tasks_out_in_few_batches(monkeypatch):
    sizes = []
    plan = Planner.next_batch

    def counting(self, *args):
        batch = plan(self, *args)
        sizes.append(len(batch))
        return batch

    monkeypatch.setattr(Planner, "next_batch", counting)
    dsk, keys = fan_in(3000)
    total = (-sum(range(3000)),)
    # (A watched run: threads nobody watches plan no batches at all, their
    # workers schedule themselves: see test_threads_inplace.)
    watched = [Callback(posttask=lambda *_: None)]
    assert threaded.get(dsk, keys, num_workers=2, callbacks=watched) == total
    sizes.clear()
    # A second run of the same graph: the functions were timed in the first
    # run only (threads keep nothing), so the first tasks go alone again,
    # then batches form.
    assert threaded.get(dsk, keys, num_workers=2, callbacks=watched) == total
    assert sum(sizes) == 3001
    assert len(sizes) < 100  # (3,001 batches of one task before)


@pytest.mark.parametrize("make, handoffs",
                         [(int, 1), (lambda i: [i], 50 // runtime.FLUSH_RESULTS + 1)])
def test_a_worker_hands_many_number_results_over_at_once(monkeypatch, make, handoffs):
    # Results in flight between a worker and the scheduler stay few
    # (FLUSH_RESULTS), but numbers put no memory at stake: 50 int outputs
    # of one batch travel in one list (each hand-off wakes the scheduler).
    monkeypatch.setattr(runtime, "FLUSH_INTERVAL", 3600.0)  # (no hand-off by time)
    items = [(i, f"x-{i}", (CALL, make, (i,), ()), False, (), True) for i in range(50)]
    lists: list = []
    runtime.run_batch(items, {}, [], emit=lists.append)
    assert [r[2] for hand_off in lists for r in hand_off] == [make(i) for i in range(50)]
    assert len(lists) == handoffs


# -- chains: nothing for anyone else ------------------------------------------------


def _planner(dsk, keys, seconds, **kwargs):
    run = _run(dsk, keys)
    planner = Planner(run, **kwargs)
    for i in range(len(run.keys)):
        planner.observe(i, seconds, 7)
    return planner


def test_a_batch_continuing_a_chain_grows_past_its_budget_while_nothing_else_is_ready():
    # Every hand-off on a chain is a round trip through the scheduler while
    # no other work runs: a chain batch may take CHAIN_FACTOR budgets.
    planner = _planner(*chain(1000), 1e-4)
    assert len(planner.next_batch(0)) in (CHAIN_FACTOR * 20 - 1, CHAIN_FACTOR * 20)
    # Tiny tasks: past the usual limit of tasks too, up to CHAIN_LIMIT.
    assert len(_planner(*chain(1000), 1e-6).next_batch(0)) == 1000
    # A limit asked for (chunksize) holds.
    assert len(_planner(*chain(1000), 1e-6, limit=50).next_batch(0)) == 50


def test_a_chain_batch_keeps_its_budget_while_other_work_is_ready():
    dsk, _ = chain(1000)
    dsk.update({("d", i): (operator.neg, i) for i in range(5)})
    planner = _planner(dsk, [("c", 999), *[("d", i) for i in range(5)]], 1e-4)
    batch = planner.next_batch(0)  # (the chain's first task is on top)
    assert {planner.run.keys[i][0] for i in batch} == {"c"}
    assert len(batch) in (19, 20)  # (BATCH_BUDGET: 2 ms of 0.1 ms tasks)


def test_a_batch_that_forks_keeps_its_budget():
    # Two tasks ready inside the batch: either could go to another worker
    # once the batch reports, so the batch is no longer a chain.
    dsk, _ = chain(10)
    for branch in "xy":
        dsk[(branch, 0)] = (operator.neg, ("c", 9))
        dsk.update({(branch, i): (operator.neg, (branch, i - 1)) for i in range(1, 100)})
    planner = _planner(dsk, [("x", 99), ("y", 99)], 1e-4)
    assert len(planner.next_batch(0)) in (19, 20)
