"""A delayed pandas pipeline: load, clean and summarize each small frame, then
one combine (``benchmarks/bench_real.py``'s "delayed pandas pipeline",
smaller).  Each step is pandas' own Python under the GIL; in many small
frames its fixed cost per call is most of the run."""

from __future__ import annotations


def pipeline_load(i: int, rows: int = 2000):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(i)
    return pd.DataFrame({"k": rng.integers(0, 20, rows), "v": rng.random(rows)})


def pipeline_clean(df):
    return df[df.v > 0.1].assign(w=lambda d: d.v * 2)


def pipeline_summarize(df):
    return df.groupby("k").w.sum()


def pipeline_combine(parts):
    import pandas as pd

    return pd.concat(parts, axis=1).sum(axis=1)


def delayed_pipeline(pieces: int, rows: int):
    """The pipeline over ``pieces`` frames of ``rows`` rows, as one dask Delayed."""
    from dask import delayed

    parts = [delayed(pipeline_summarize)(delayed(pipeline_clean)(
        delayed(pipeline_load)(i, rows))) for i in range(pieces)]
    return delayed(pipeline_combine)(parts)
