"""How many threads BLAS and OpenMP run per call in each worker process.

NumPy's BLAS (OpenBLAS, MKL, Accelerate) and OpenMP start one thread per
core for each call, in every process.  A pool of one worker per core then
runs cores x cores threads: they fight for the cores, and a matrix product
on 2 workers and 2 cores took 2.4x as long as with one thread per worker
(figures in ``benchmarks/README.md``).  So each worker of localsched's process pools
starts with ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``,
``VECLIB_MAXIMUM_THREADS`` and ``NUMEXPR_NUM_THREADS`` set to its share of
the cores (``worker_threads``), as dask.distributed's nanny does for its
workers.  A user who set any of them chose: their environment stands.

The variables count only where the library is loaded after they are set: a
spawned worker or a fork server's child.  A forked worker inherits its
parent's loaded BLAS, and only threadpoolctl can change it there (when it
is installed: ``apply_in_worker``).

>>> worker_threads(2, 2), worker_threads(2, 8), worker_threads(16, 4)
(1, 4, 1)
>>> worker_environment(2, 8, environ={})["OPENBLAS_NUM_THREADS"]
'4'
>>> worker_environment(2, 8, environ={"OMP_NUM_THREADS": "8"})
{}
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

__all__ = ["VARIABLES", "worker_threads", "worker_environment", "apply_in_worker"]

#: The variables BLAS and OpenMP libraries read for their threads per call.
VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")

#: Modules that load a BLAS or OpenMP library when imported: loaded in a
#: worker as it starts (a forked one), their threads are already set.
_LOADERS = ("numpy", "scipy", "torch", "numexpr", "sklearn")


def worker_threads(workers: int, cores: int | None) -> int:
    """Threads per call for each of ``workers`` processes sharing ``cores``
    (at least one)."""
    return max(1, (cores or 1) // max(1, workers))


def worker_environment(workers: int, cores: int | None,
                       environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables each of ``workers`` worker processes starts with: every
    one of ``VARIABLES`` at ``worker_threads``, or none when ``environ`` (the
    caller's) sets any of them."""
    if any(name in environ for name in VARIABLES):
        return {}
    threads = str(worker_threads(workers, cores))
    return dict.fromkeys(VARIABLES, threads)


def apply_in_worker(env: Mapping[str, str], environ: MutableMapping[str, str] = os.environ,
                    modules: Mapping[str, object] = sys.modules) -> None:
    """In a worker process as it starts, before anything of the caller's
    runs: set ``env`` (``worker_environment``'s), and where a library that
    reads it is already loaded (a forked worker), limit it through
    threadpoolctl if that is installed."""
    if not env:
        return
    environ.update(env)
    if not any(name in modules for name in _LOADERS):
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # (an optional library: the parent's threads stay)
        return
    try:
        threadpool_limits(int(env.get("OPENBLAS_NUM_THREADS") or next(iter(env.values()))))
    except Exception:  # noqa: BLE001 -- a library threadpoolctl cannot handle: as it was
        pass
