"""One naming rule for task groups: dask's ``key_split``, without importing dask.

The corpus holds the keys dask's collections, delayed and hand-written
graphs produce; every one must land in the group dask puts it in, so the
same computation is grouped alike locally, on a cluster and on dask's
dashboard.
"""

from __future__ import annotations

import uuid

import pytest

from localsched.utils import key_split

dask_utils = pytest.importorskip("dask.utils")

CORPUS = [
    # hand-written graphs
    "x", "x-1", "x-1-2-3", "inc-12", "load-1", "load_data-1", "hello-world-1",
    "add-9f8e7d6c5b4a", "sum-aggregate-4c2a9b1e00ff", "a", "b1", "x3", "_(x)", "-x", "",
    "ae05086432ca935f6eba409a8ecd4896", "x-abcdefab", "x-abcdefgh", "x-database",
    "x-ABCDEFGH", "finalize-0", "total", "x_y-z",
    # tuple keys and stringified tuple keys
    ("inc-12", 1), ("x-2", 1), ("sum-aggregate-4c2a9b1e00ff", 3, 1), ("x",),
    "('x-2', 1)", "('x', 1)", ((1, 2), 3),
    # bytes, numbers, None, odd objects
    b"x-1", b"hello-world-1", 7, 7.5, None, True,
    "<module.submodule.myclass object at 0xdaf372>", "<>", "<foo.Bar>",
    # tokens and UUID-suffixed names
    # (fixed ones: each process of a parallel run collects the same tests)
    f"custom-{uuid.uuid5(uuid.NAMESPACE_DNS, 'a')}", f"{uuid.uuid5(uuid.NAMESPACE_DNS, 'b')}",
    f"name-{uuid.uuid5(uuid.NAMESPACE_DNS, 'c').hex}",
    "random_sample-4f1a9d8e2b3c4d5e6f708192a3b4c5d6",
    # dask.array
    ("matmul-7b9ac9a3d4cfbf8a8d8e1f6e5f3a2b1c", 0, 1),
    ("random_sample-4f1a9d8e2b3c4d5e6f708192a3b4c5d6", 2, 2),
    ("sum-partial-4f1a9d8e2b3c4d5e6f708192a3b4c5d6", 0),
    ("rechunk-merge-4f1a9d8e2b3c4d5e6f708192a3b4c5d6", 1, 0),
    ("mean_chunk-abc123", 0), ("mean_agg-aggregate-abc123",),
    # dask.bag
    ("from_sequence-6f4f3a0c8b1d2e3f4a5b6c7d8e9f0a1b", 0),
    ("flatten-from_sequence-operator.methodcaller('split')-frequencies-part-1d2e", 3),
    ("frequencies-aggregate-1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a", 0),
    ("str-lower-map-1d2e3f", 1), ("lambda-1d2e3f", 0), ("<lambda>-1d2e3f", 0),
    # dask.dataframe
    ("from_pandas-0ab1c2d3e4f5", 0), ("assign-1234abcd", 3),
    ("getitem-f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8", 1),
    ("series-groupby-sum-chunk-ab12cd34ef56", 0, 1),
    ("dataframe-groupby-sum-agg-ab12cd34ef56", 0),
    ("truediv-9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", 0),
    ("operation-abcdefabcdef", 0), ("repartition-split-abc", 1),
]


@pytest.mark.parametrize("key", CORPUS, ids=repr)
def test_key_split_agrees_with_dask(key):
    assert key_split(key) == dask_utils.key_split(key)


def test_numbered_keys_share_one_group():
    assert {key_split(f"load-{i}") for i in range(50)} == {"load"}
    assert {key_split((f"inc-{i}", i)) for i in range(50)} == {"inc"}


def test_keys_dask_rejects_get_a_group_not_an_error():
    # dask raises here (IndexError, and TypeError from its cache); a
    # diagnostic must not fail a computation over a key's name
    assert key_split(()) == "Other"
    assert key_split(["x-1", 0]) == "Other"
    assert key_split(b"\xff\xfe") == "Other"


def test_every_group_consumer_uses_the_one_rule():
    """Summary, FineMetrics and SampleProfiler group ``load-1`` .. as dask does."""
    import localsched
    from localsched.diagnostics import FineMetrics, Profiler

    graph = {f"load-{i}": (sum, [i, 1]) for i in range(4)}
    graph["total-1"] = (sum, list(graph))
    with Profiler() as prof, FineMetrics() as fm:
        localsched.get(graph, "total-1")
    assert {g.name for g in prof.summary().groups} == {"load", "total"}
    assert {group for (_, group, _, _) in fm.metrics if group is not None} == {"load", "total"}
