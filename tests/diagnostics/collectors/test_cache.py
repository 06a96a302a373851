"""CacheProfiler: when each task result entered and left the scheduler's cache."""

import time
from operator import add, truediv

import pytest

from localsched.diagnostics.collectors.cache import CacheProfiler
from localsched.diagnostics.collectors.records import CacheData
from localsched.diagnostics.profile import Profiler

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module


def inc(x):
    return x + 1


def make_list(n):
    return list(range(n))


def concat(*lists):
    return [x for lst in lists for x in lst]


# x is data; a is used by b and c, and c (which also needs b) finishes last.
DSK = {"x": 1, "a": (inc, "x"), "b": (inc, "a"), "c": (add, "a", "b"), "d": (inc, "c")}


def test_cache_lifetimes(scheduler):
    _, get = scheduler
    with CacheProfiler() as cprof, Profiler() as prof:
        t0 = time.time()
        assert get(DSK, "d") == 6
        t1 = time.time()
    cache = {r.key: r for r in cprof.results}
    ran = {r.key: r for r in prof.results}
    assert len(cprof.results) == 4
    assert sorted(cache) == ["a", "b", "c", "d"]  # tasks only, each once
    for key, r in cache.items():
        assert type(r) is CacheData
        assert r.task == DSK[key]
        assert r.metric == 1
        # Enters the cache when its task ends (same worker clock as Profiler).
        assert r.cache_time == ran[key].end_time
        assert t0 <= r.cache_time <= r.free_time <= t1
    # Freed when the last dependent has finished: exactly its end time.
    assert cache["a"].free_time == ran["c"].end_time
    assert cache["b"].free_time == ran["c"].end_time
    assert cache["c"].free_time == ran["d"].end_time
    # The output stays until the computation ends.
    assert cache["d"].free_time >= ran["d"].end_time


def test_requested_intermediate_stays_until_finish(scheduler):
    _, get = scheduler
    with CacheProfiler() as cprof, Profiler() as prof:
        assert list(get(DSK, ["d", "b"])) == [6, 3]
        t1 = time.time()
    cache = {r.key: r for r in cprof.results}
    ran = {r.key: r for r in prof.results}
    assert cache["a"].free_time == ran["c"].end_time
    # b is an output: not freed when c ends, only at the end with d.
    assert cache["b"].free_time > ran["c"].end_time
    assert cache["b"].free_time >= ran["d"].end_time
    assert cache["b"].free_time == cache["d"].free_time <= t1


def test_custom_metric_len(scheduler):
    _, get = scheduler
    dsk = {"a": (make_list, 3), "b": (make_list, 5), "c": (concat, "a", "b")}
    with CacheProfiler(metric=len) as cprof:
        assert get(dsk, "c") == [0, 1, 2, 0, 1, 2, 3, 4]
    assert cprof.metric_name == "len"
    assert {r.key: r.metric for r in cprof.results} == {"a": 3, "b": 5, "c": 8}


def test_cachey_nbytes_metric():
    np = pytest.importorskip("numpy")
    cachey = pytest.importorskip("cachey")
    from localsched.local import get_sync

    dsk = {"a": (np.ones, 1000), "b": (np.sum, "a")}
    with CacheProfiler(metric=cachey.nbytes) as cprof:
        assert get_sync(dsk, "b") == 1000
    assert cprof.metric_name == "nbytes"
    metrics = {r.key: r.metric for r in cprof.results}
    assert metrics["a"] == 8000
    assert metrics["b"] == cachey.nbytes(np.float64(1000))


def test_metric_name():
    assert CacheProfiler().metric_name == "tasks"
    assert CacheProfiler(metric=len, metric_name="items").metric_name == "items"
    with pytest.raises(TypeError, match="metric"):
        CacheProfiler(metric=3)


def test_accumulates_clears_and_reenters():
    from localsched.local import get_sync

    with CacheProfiler() as cprof:
        get_sync({"a": (inc, 1)}, "a")
        get_sync({"b": (inc, 1)}, "b")
        assert sorted(r.key for r in cprof.results) == ["a", "b"]
        cprof.clear()
        assert cprof.results == []
    with cprof:
        get_sync({"c": (inc, 1)}, "c")
    assert [r.key for r in cprof.results] == ["c"]
    get_sync({"d": (inc, 1)}, "d")  # not registered any more
    assert [r.key for r in cprof.results] == ["c"]


def test_error_frees_everything_at_finish(scheduler):
    _, get = scheduler
    dsk = {"a": (inc, 1), "b": (truediv, "a", 0), "c": (inc, "b")}
    with CacheProfiler() as cprof:
        t0 = time.time()
        with pytest.raises(ZeroDivisionError):
            get(dsk, "c")
        t1 = time.time()
    [a] = cprof.results
    assert a.key == "a" and t0 <= a.cache_time <= a.free_time <= t1
    assert not cprof._live  # nothing kept for the failed computation


def test_nested_computation_does_not_mix_with_outer():
    """A get inside a task fires its own callbacks between the outer ones."""
    from localsched.local import get_sync

    cprof = CacheProfiler()
    prof = Profiler()

    def run_inner(x):
        inner = {"i1": (inc, x), "i2": (inc, "i1")}
        return get_sync(inner, "i2", callbacks=[cprof, prof])

    outer = {"o1": (inc, 1), "o2": (run_inner, "o1"), "o3": (inc, "o2")}
    with cprof, prof:
        assert get_sync(outer, "o3") == 5
    cache = {r.key: r for r in cprof.results}
    ran = {r.key: r for r in prof.results}
    assert sorted(cache) == ["i1", "i2", "o1", "o2", "o3"]
    assert cache["o1"].free_time == ran["o2"].end_time
    assert cache["o2"].free_time == ran["o3"].end_time
    assert cache["i1"].free_time == ran["i2"].end_time
    assert cache["i1"].task == (inc, 2)
    # The inner output is freed when the inner computation ends, before o2 ends.
    assert ran["i2"].end_time <= cache["i2"].free_time <= ran["o2"].end_time
    assert not cprof._live


# -- observing does not change the run (issue 20, item 3) -------------------------


class Payload:
    """A result that notes in ``log`` each time it is unpickled in the
    process that created the log: every time it travelled back to the caller."""

    def __init__(self, log, caller, n):
        self.log, self.caller, self.nbytes = log, caller, n

    def __getstate__(self):
        return (self.log, self.caller, self.nbytes)

    def __setstate__(self, state):
        self.log, self.caller, self.nbytes = state
        import os

        if os.getpid() == self.caller:
            with open(self.log, "a", encoding="utf-8") as f:
                f.write("x\n")


def make_payload(log, caller, n):
    return Payload(log, caller, n)


def size_of(payload):
    return payload.nbytes


def _handed_back(tmp_path, name, callbacks):
    import os

    from localsched.multiprocessing import get

    log = tmp_path / f"{name}.log"
    log.touch()
    caller = os.getpid()
    dsk = {("p", i): (make_payload, str(log), caller, 1000 + i) for i in range(12)}
    dsk.update({("q", i): (size_of, ("p", i)) for i in range(12)})
    out = get(dsk, [("q", i) for i in range(12)], num_workers=1, chunksize=2, callbacks=callbacks)
    assert out == tuple(1000 + i for i in range(12))
    return len(log.read_text(encoding="utf-8").splitlines())


def test_nbytes_is_measured_where_the_result_lives(tmp_path):
    # Warm the planner and the pool: both runs below get the same batches.
    _handed_back(tmp_path, "warm", [])
    baseline = _handed_back(tmp_path, "plain", [])
    cprof = CacheProfiler(metric="nbytes")
    observed = _handed_back(tmp_path, "observed", [cprof])
    assert observed == baseline  # no result travelled back to be measured
    sizes = {r.key: r.metric for r in cprof.results}
    # measured in the worker: cachey.nbytes, i.e. the result's own nbytes
    assert sizes == {**{("p", i): 1000 + i for i in range(12)},
                     **{("q", i): sizes[("q", i)] for i in range(12)}}
    import cachey

    assert sizes[("q", 0)] == cachey.nbytes(1000)


def test_cache_profiler_nbytes_on_every_scheduler_counts_what_results_hold(scheduler):
    """``metric="nbytes"``: an array's bytes, a number's, and a list's with
    its items (``metrics.sizeof``; cachey's ``nbytes`` counts a list's
    header alone), the same on every scheduler."""
    np = pytest.importorskip("numpy")
    import cachey

    from localsched.metrics import sizeof

    _, get = scheduler
    dsk = {"a": (np.ones, 1000), "b": (np.sum, "a"), "c": (make_list, 30)}
    with CacheProfiler(metric="nbytes") as cprof:
        get(dsk, ["b", "c"])
    sizes = {r.key: r.metric for r in cprof.results}
    assert sizes == {"a": 8000, "b": cachey.nbytes(np.float64(1000)),
                     "c": sizeof(list(range(30)))}
    assert sizes["c"] > cachey.nbytes(list(range(30)))
