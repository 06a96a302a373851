"""A 100,000-task performance report stays small: at most 25 MB (issue 20's bar).

Its time (at most 10 s) is measured in ``benchmarks/bench_report.py``, not here.
"""

from __future__ import annotations

import numpy as np
import pytest

from localsched.diagnostics.collectors.records import CacheData, ResourceData, SampleData, TaskData
from localsched.diagnostics.reporting.page import report_html
from localsched.diagnostics.runs.rundata import RunData

T0 = 1_700_000_000.0
GROUPS = [f"group_{i}-part" for i in range(30)]  # a real session's count of groups


def hundred_thousand_task_run(n: int = 100_000, seed: int = 0) -> RunData:
    rng = np.random.default_rng(seed)
    durations = rng.exponential(2e-4, n)
    durations[::997] = 0.05
    workers = np.arange(n) % 8
    starts = np.empty(n)
    for w in range(8):
        mine = workers == w
        starts[mine] = T0 + np.r_[0.0, np.cumsum(durations[mine] + 2e-6)[:-1]]
    ends = starts + durations
    freed = ends + rng.exponential(0.02, n)
    tasks, cache = [], []
    for i in range(n):
        key = (f"{GROUPS[i % 30]}-{i % 30:08x}abcdef00112233", i)
        tasks.append(TaskData(key, (max, i, [i] * 20), float(starts[i]), float(ends[i]),
                              140_000_000_000 + int(workers[i])))
        cache.append(CacheData(key, None, float(rng.integers(1, 1 << 20)), float(ends[i]),
                               float(freed[i])))
    end = float(freed.max())
    resources = [ResourceData(T0 + k * (end - T0) / 400, 100.0 + k, float(k % 90))
                 for k in range(401)]
    frames = [("lib.py", i, f"f{i}") for i in range(40)]
    samples = [SampleData(T0 + k * 0.005, 140_000_000_000 + k % 8, GROUPS[k % 30].split("-")[0],
                          tuple(frames[: 5 + k % 30])) for k in range(5000)]
    metrics = {((), g.split("-")[0], a, "seconds"): 1.0 for g in GROUPS
               for a in ("thread-cpu", "thread-noncpu")}
    return RunData(tasks=tasks, cache=cache, cache_metric="bytes", resources=resources,
                   samples=samples, metrics=metrics, walls=[(T0, end)],
                   meta={"title": "100k tasks"})


@pytest.mark.timeout(900)
def test_a_hundred_thousand_task_report_is_at_most_25_mb():
    page = report_html(hundred_thousand_task_run())
    size = len(page.encode())
    print(f"100,000-task report: {size / 1e6:.1f} MB")
    assert size <= 25e6
