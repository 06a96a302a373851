"""A real dask session -- arrays, a bag, a dataframe -- recorded by performance_report.

What the report's layout is judged on: 20-40 task groups with dask's own
names (``random_sample``, ``sum-aggregate``, bag names such as
``flatten-from_sequence-...-frequencies-part``, dataframe groupbys), run on
localsched's threads scheduler with a chosen number of workers.
"""

from __future__ import annotations

from functools import partial


def run_session(num_workers: int, *, title: str, json_path=None, samples: bool = True):
    """Run the session under ``performance_report`` (no page); returns its RunData."""
    import dask
    import dask.array as da
    import dask.bag as db
    import numpy as np

    import localsched
    from localsched.delayed import get_scheduler

    get = partial(get_scheduler("threads"), num_workers=num_workers)
    report = localsched.performance_report(None, title=title, json=json_path, samples=samples,
                                           interval=0.005, dt=0.05)
    with report, dask.config.set(scheduler=get):
        x = da.random.random((1200, 1200), chunks=(200, 200))
        y = (x @ x.T + 1).sum(axis=0)
        (y / y.max()).mean().compute()
        da.linalg.qr(da.random.random((1200, 60), chunks=(200, 60)))[1].sum().compute()
        np.asarray((x[::2, ::3] - x.mean(axis=1)[::2, None]).std(axis=0).compute())
        x.rechunk((300, 100)).cumsum(axis=1).max().compute()

        words = "the quick brown fox jumps over the lazy dog and runs away".split()
        lines = [" ".join(words[(i + j) % len(words)] for j in range(12)) for i in range(400)]
        bag = db.from_sequence(lines, npartitions=8)
        bag.map(str.split).flatten().frequencies().topk(5, key=lambda kv: kv[1]).compute()
        bag.map(len).filter(lambda n: n > 10).sum().compute()

        _dataframe_part()
    return report.data


def _dataframe_part() -> None:
    try:
        import dask.dataframe as dd
        import pandas as pd
    except ImportError:  # no pyarrow: the session has arrays and a bag only
        return
    import numpy as np

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"k": rng.integers(0, 20, 20_000), "v": rng.random(20_000),
                          "w": rng.random(20_000)})
    df = dd.from_pandas(frame, npartitions=8)
    df.groupby("k").v.mean().compute()
    (df.v * df.w).sum().compute()
    df[df.v > 0.5].w.describe().compute()
