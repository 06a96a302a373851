"""The bundled demo workload: blocked NumPy arithmetic built with ``delayed``.

``C = A @ B`` over a grid of blocks (each block product is a task, summed
pairwise), then an element-wise identity (sin² + cos² = 1) on every block of
C, then tree reductions.  Matrix products release the GIL, so the threads
scheduler keeps every core busy -- with one BLAS thread per task
(``one_blas_thread``, which ``localsched demo`` calls before NumPy is
imported): a BLAS running a thread per core inside each of the workers
makes them fight for the cores (the ``blas`` finding).

>>> from localsched import compute
>>> total, ok = blocked_workload(blocks=2, block_size=8)
>>> result, holds = compute(total, ok, scheduler="sync")
>>> holds
True
"""

from __future__ import annotations

import os
import sys

from ..delayed import delayed

BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread() -> bool:
    """Make BLAS run one thread per call, so that the workers' tasks are the
    only parallelism.  Before NumPy is imported, the environment variables
    BLAS reads when loaded (those already set are kept); after, only
    threadpoolctl can still change it (if installed).  Whether BLAS is
    limited now."""
    if "numpy" not in sys.modules:
        for var in BLAS_VARIABLES:
            os.environ.setdefault(var, "1")
        return True
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return False
    threadpool_limits(1)  # (for the rest of the process, as the variables would)
    return True


def random_block(seed: int, n: int):
    import numpy as np

    return np.random.default_rng(seed).random((n, n))


def matmul(a, b):
    return a @ b


def add(a, b):
    return a + b


def identity_error(c):
    import numpy as np

    return float(np.abs(np.sin(c) ** 2 + np.cos(c) ** 2 - 1.0).max())


def block_sum(c) -> float:
    return float(c.sum())


def all_small(errors) -> bool:
    return max(errors) < 1e-9


def tree_sum(values: list, func=add, name="add"):
    """Pairwise reduction of lazy values, a tree of depth log2(len(values))."""
    level = list(values)
    while len(level) > 1:
        nxt = [delayed(func, name=name)(level[i], level[i + 1])
               for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def blocked_workload(blocks: int = 6, block_size: int = 400):
    """Lazy ``(total, ok)``: the sum of all entries of A @ B, and whether the
    element-wise identity held on every block."""
    make = delayed(random_block, name="random_block")
    a = [[make(2 * (i * blocks + k), block_size) for k in range(blocks)] for i in range(blocks)]
    b = [[make(2 * (k * blocks + j) + 1, block_size) for j in range(blocks)]
         for k in range(blocks)]
    mm = delayed(matmul, name="matmul")
    c = [[tree_sum([mm(a[i][k], b[k][j]) for k in range(blocks)]) for j in range(blocks)]
         for i in range(blocks)]
    errors = [delayed(identity_error, name="identity")(c[i][j])
              for i in range(blocks) for j in range(blocks)]
    sums = [delayed(block_sum, name="block_sum")(c[i][j])
            for i in range(blocks) for j in range(blocks)]
    total = tree_sum(sums, name="total")
    return total, delayed(all_small, name="check")(errors)
