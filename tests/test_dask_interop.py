"""Real dask collections on localsched's schedulers (dask is a test extra)."""

from __future__ import annotations

import pytest

dask = pytest.importorskip("dask")
np = pytest.importorskip("numpy")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")

import localsched  # noqa: E402
from localsched import multiprocessing as lmp  # noqa: E402
from localsched import threaded  # noqa: E402
from localsched.callbacks import Callback, Needs  # noqa: E402
from localsched.local import get_sync  # noqa: E402

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module

GETS = {
    "sync": get_sync,
    "threads": threaded.get,
    "processes": lmp.get,
}


@pytest.fixture(params=list(GETS))
def get(request):
    return GETS[request.param]


def test_dask_array_matches_numpy(get):
    rng = np.random.default_rng(0)
    a_np = rng.random((60, 40))
    a = da.from_array(a_np, chunks=(15, 10))
    expr = (a + a.T[:40, :60].T * 2).sum(axis=0) - a.mean()
    (got,) = dask.compute(expr, scheduler=get)
    np.testing.assert_allclose(got, (a_np + a_np * 2).sum(axis=0) - a_np.mean())


def test_dask_qr_roundtrip(get):
    rng = np.random.default_rng(1)
    a = da.from_array(rng.random((200, 20)), chunks=(50, 20))
    q, r = da.linalg.qr(a)
    a2 = q.dot(r)
    np.testing.assert_allclose(a2.compute(scheduler=get), a.compute(scheduler="sync"))


def test_dask_delayed_and_bag(get):
    @dask.delayed
    def inc(x):
        return x + 1

    total = dask.delayed(sum)([inc(i) for i in range(10)])
    assert total.compute(scheduler=get) == 55
    b = db.from_sequence(range(20), npartitions=4).map(lambda x: x * 2).filter(lambda x: x % 3)
    assert sorted(b.compute(scheduler=get)) == sorted(x * 2 for x in range(20) if (x * 2) % 3)


def test_dask_config_scheduler():
    x = da.arange(100, chunks=10).sum()
    with dask.config.set(scheduler=localsched.get):
        assert x.compute() == 4950
    with dask.config.set(scheduler=localsched.multiprocessing.get):
        assert x.compute() == 4950


def test_localsched_callbacks_see_dask_tasks():
    keys = []
    x = da.ones((10, 10), chunks=5).sum()
    with Callback(posttask=lambda key, res, dsk, state, wid: keys.append(key)):
        assert dask.compute(x, scheduler=localsched.get) == (100.0,)
    assert keys and any(isinstance(k, tuple) for k in keys)


def test_existing_dask_callbacks_keep_working(get, capsys):
    from dask.diagnostics import CacheProfiler, Profiler, ProgressBar

    x = da.ones((40, 40), chunks=10).dot(da.ones((40, 40), chunks=10)).sum()
    with Profiler() as prof, CacheProfiler() as cprof, ProgressBar(out=None):
        assert x.compute(scheduler=get) == 40 * 40 * 40
    assert len(prof.results) > 10
    assert len({r.key for r in prof.results}) == len(prof.results)
    assert all(r.start_time <= r.end_time for r in prof.results)
    assert cprof.results
    assert "100% Completed" in capsys.readouterr().out


def test_a_dask_callback_passed_per_call():
    from dask.callbacks import Callback as DaskCallback

    seen = []

    class Mine(DaskCallback):
        def _pretask(self, key, dsk, state):
            seen.append(key)

    x = da.ones(10, chunks=5).sum()
    assert dask.compute(x, scheduler=localsched.get, callbacks=[Mine()]) == (10.0,)
    assert seen


class _LateStarts(Callback):
    """Needs each task's pretask before its posttask, not at its start."""

    needs = Needs(exact_start=False)

    def __init__(self, log):
        super().__init__()
        self.log = log

    def _pretask(self, key, dsk, state):
        self.log.append(("pre", key))

    def _posttask(self, key, result, dsk, state, worker_id):
        self.log.append(("post", key))


@pytest.mark.parametrize("name", ["threads", "processes"])
def test_hooks_that_need_no_exact_start_hear_each_task_once_pretask_first(name):
    from localsched.callbacks import merge_needs

    log = []
    from dask.diagnostics import ProgressBar

    bar = ProgressBar(out=None)
    late = _LateStarts(log)
    # dask's own ProgressBar only keeps the state in its pretask: no worker
    # need announce each start for it (nor for a hook that says so).
    assert not merge_needs([bar._callback, late._callback]).exact_start
    plain = (None, None, lambda key, dsk, state: None, None, None)
    assert merge_needs([bar._callback, late._callback, plain]).exact_start
    dsk = {("x", i): (sum, [i, 1]) for i in range(200)}
    dsk["total"] = (sum, [("x", i) for i in range(200)])
    with bar, late:
        assert GETS[name](dsk, "total", num_workers=2) == sum(range(1, 201))
    assert len(log) == 2 * len(dsk)
    seen = set()
    for what, key in log:
        if what == "pre":
            assert key not in seen
            seen.add(key)
        else:
            assert key in seen  # its pretask came first
    assert seen == set(dsk)
