"""Run dask's own tests of its local schedulers against localsched.

See ``harness.py`` (the swap and how a run is judged), ``localsched_swap.py``
(the pytest plugin loaded into the run) and ``run_dask_suites.py`` (a one-off,
slow run of dask's collection test suites with localsched as the default
scheduler).
"""
