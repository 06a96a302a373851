"""What a recorded run says to change: pure functions of a ``RunData``'s records.

Nothing here runs a scheduler or draws: every function reads the plain
records of one run (``localsched.diagnostics.collectors.records``) and returns plain
values, so the same answers come out of a run just recorded, one loaded from
JSON (an older one too: what it lacks is "not measured", None, never an
error), and one recorded on a dask.distributed cluster.  ``RunData`` has a
thin method for each; the report, the dashboard's summary of a finished run
and the saved JSON show them.

One module an idea, imports pointing down only::

    digest       everything below as one JSON-able dict (the JSON, the page)
    rules        the findings: what to change, one Finding per cause (the
                 rules and their thresholds are documented there)
    causes       the findings around the tasks: a busy machine, BLAS
                 threads, a cold pool's start-up, waits for I/O
    finding      the Finding record and its shared phrasings
    usercode     the user's function and line behind a group (the stacks)
    crossing     what would cross between worker processes, and its price
    facts        what the rules read, measured once per run
    comparison   two runs side by side: per-group differences, regressions
    replay       the what-if: the measured durations replayed on N workers
    critical     the longest chain of dependent tasks
    memory       the bytes held at the peak, by task group
    graphs       each computation's tasks, durations and dependencies, from
                 the records (shared by the three above)
    groups       per task group: counts, durations, result sizes (numpy)

>>> from localsched.diagnostics.collectors.records import TaskData, GraphData
>>> from localsched.diagnostics.runs.rundata import RunData
>>> run = RunData(tasks=[TaskData('a', None, 0.0, 1.0, 1), TaskData('b', None, 1.0, 3.0, 1)],
...               graphs=[GraphData(['a', 'b'], [(), (0,)], [0, 1], 0.0, 3.0, 1)],
...               walls=[(0.0, 3.0)])
>>> critical_path(run).keys, critical_path(run).seconds
(['a', 'b'], 3.0)
>>> round(simulate(run, workers=4), 6)
3.0
"""

from __future__ import annotations

from .comparison import Comparison, compare
from .critical import CriticalPath, critical_path
from .digest import overview
from .memory import MemoryPeak, memory_peak
from .replay import simulate, what_if
from .rules import Finding, findings

__all__ = ["Finding", "findings", "CriticalPath", "critical_path", "MemoryPeak",
           "memory_peak", "simulate", "what_if", "Comparison", "compare", "overview"]
