"""Nothing is held after return: a computation's outputs, its graph and its
intermediate results are freed as soon as the caller drops them, with the
cyclic garbage collector disabled, on every scheduler.

(A reference cycle between the run, its state, its loop or its result
builder would keep them until a collection: 8 computations of 200 MB each
then held 1.6 GB.)
"""

from __future__ import annotations

import gc
import weakref
from functools import partial

import pytest

np = pytest.importorskip("numpy")

from localsched.callbacks import Callback  # noqa: E402
from localsched.local import get_sync  # noqa: E402
from localsched.multiprocessing import get as get_processes  # noqa: E402
from localsched.threaded import get as get_threads  # noqa: E402

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module

SCHEDULERS = {
    "sync": get_sync,
    "threads": get_threads,
    "processes": partial(get_processes, num_workers=2),
}

# Weak references to the intermediates made in this process (sync, threads).
made: list = []


def grow(a):
    b = a + 1
    made.append(weakref.ref(b))
    return b


def join(a, b):
    out = np.concatenate([a, b])
    made.append(weakref.ref(out))
    return out


def broken(a):
    raise ValueError("broken on purpose")


def _graph(source):
    return {"src": source, "a": (grow, "src"), "b": (grow, "a"), "c": (grow, "b"),
            "d": (grow, "c"), "out": (join, "b", "d")}


def _listening():
    """A callback on every hook, reading the state as dask's callbacks do."""
    def start_state(dsk, state):
        len(state["waiting"]), list(state["dependencies"])

    def posttask(key, result, dsk, state, worker_id):
        state["cache"], state["ready"], state["running"], state.timing

    def finish(dsk, state, errored):
        state["finished"], state["released"]

    return Callback(start=lambda dsk: None, start_state=start_state,
                    pretask=lambda key, dsk, state: state["running"],
                    posttask=posttask, finish=finish)


@pytest.fixture
def no_gc():
    gc.collect()
    made.clear()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        made.clear()


@pytest.mark.parametrize("listen", [False, True], ids=["bare", "callbacks"])
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_outputs_graph_and_intermediates_are_freed_once_dropped(name, listen, no_gc):
    get = SCHEDULERS[name]
    source = np.arange(200_000.0)  # 1.6 MB: on processes, through shared memory
    dsk = _graph(source)
    callbacks = [_listening()] if listen else None
    result = get(dsk, ["out", ["a"]], callbacks=callbacks)
    assert result[0][200_000] == 4 and result[1][0][0] == 1
    refs = [weakref.ref(source), weakref.ref(result[0]), weakref.ref(result[1][0])]
    del result, dsk, source
    alive = [r for r in refs if r() is not None]
    assert not alive, f"{len(alive)} of the source and outputs still alive without gc"
    kept = [r for r in made if r() is not None]
    assert not kept, f"{len(kept)} intermediates still alive without gc"


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_repeated_computations_hold_only_the_last_output(name, no_gc):
    get = SCHEDULERS[name]
    refs = []
    for i in range(4):
        out = get({"x": (np.full, 100_000, float(i)), "y": (grow, "x")}, "y")
        refs.append(weakref.ref(out))
        del out
    assert [r() is None for r in refs] == [True] * 4


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_a_failed_computation_frees_its_graph_once_the_error_is_dropped(name, no_gc):
    get = SCHEDULERS[name]
    source = np.arange(100_000.0)
    dsk = {"src": source, "a": (grow, "src"), "b": (broken, "a")}
    try:
        get(dsk, "b", callbacks=[_listening()])
    except ValueError:
        pass
    else:
        raise AssertionError("the task did not fail")
    ref = weakref.ref(source)
    del dsk, source
    assert ref() is None
    assert [r for r in made if r() is not None] == []
