"""The analysis of a run recorded by companion mode on a dask.distributed
cluster: the same findings, critical path, memory peak, what-if and JSON as
locally."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("distributed")

import localsched
import localsched.distributed as ld
from localsched.diagnostics.report import RunData


def nap(x, seconds):
    time.sleep(seconds)
    return x


def nap_after(x, _before, seconds):
    time.sleep(seconds)
    return x


def test_a_cluster_run_has_its_critical_path_memory_peak_what_if_and_findings(
        cluster_client, tmp_path):
    # The side tasks end before the chain's second step starts (it waits
    # for them), and each step is long beside a cluster's hand-off (tens of
    # ms beside CPU hogs), so the chain is most of the tasks' span however
    # busy the machine is.
    dsk = {("step", 0): (nap, 0, 0.25)}
    dsk.update({("side", i): (nap, i, 0.01) for i in range(4)})
    dsk[("step", 1)] = (nap_after, ("step", 0), [("side", i) for i in range(4)], 0.25)
    for i in range(2, 6):
        dsk[("step", i)] = (nap, ("step", i - 1), 0.25)
    keys = [("step", 5), *[("side", i) for i in range(4)]]
    path = tmp_path / "cluster.json"
    with localsched.performance_report(None, samples=False, json=str(path)) as report:
        ld.get(dsk, keys, client=cluster_client)
    run = report.data
    assert run.graphs and run.graphs[0].order is None  # (no localsched order there)
    cp = run.critical_path()
    assert cp.keys == [("step", i) for i in range(6)]
    durations = {r.key: r.end_time - r.start_time for r in run.tasks}
    assert cp.seconds == pytest.approx(sum(durations[k] for k in cp.keys))
    assert run.simulate(workers=2) >= cp.seconds
    peak = run.memory_peak()
    assert peak is not None and set(peak.by_group) <= {"step", "side"}
    found = {f.kind: f for f in run.findings()}
    assert "critical-path" in found and found["critical-path"].groups[0] == "step"
    again = RunData.load_json(str(path))
    assert again.critical_path() == cp
    assert again.simulate(workers=2) == pytest.approx(run.simulate(workers=2))
