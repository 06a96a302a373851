"""The machine's speed, measured beside a recording (``machine_speed``): saved
with the run, for ``compare`` to tell a slower machine from slower code."""

from __future__ import annotations

import threading

import pytest

import localsched
from localsched.diagnostics.collectors.machine_speed import SpeedProbe
from localsched.diagnostics.report import RunData, performance_report


def spin(n):
    s = 0
    for k in range(n):
        s += k
    return s


def probes_alive() -> list:
    return [t for t in threading.enumerate() if t.name == "localsched-speed-probe"]


def test_a_performance_report_saves_the_machines_speed(tmp_path):
    path = tmp_path / "run.json"
    dsk = {("spin", i): (spin, 200_000) for i in range(8)}
    with performance_report(None, samples=False, json=str(path)):
        localsched.get(dsk, list(dsk), num_workers=2)
    speed = RunData.load_json(str(path)).meta["speed"]
    assert speed["probe"] and speed["seconds"] > 0 and speed["samples"] >= 6, speed
    assert not probes_alive()


def test_the_probe_ends_when_the_computation_fails(tmp_path):
    def boom():
        raise ValueError("x")

    with pytest.raises(ValueError), performance_report(None, samples=False):
        localsched.get({"x": (boom,)}, "x")
    assert not probes_alive()


def test_the_probe_times_a_fixed_piece_of_work():
    probe = SpeedProbe(interval=0.001).start()
    assert probes_alive()
    spin(300_000)
    out = probe.stop()
    assert not probes_alive()
    assert out["samples"] >= 6 and 0 < out["seconds"] < 0.1, out
    assert probe.stop() == out  # (stopping twice gives the same reading)


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_the_timeline_keeps_each_timing_in_its_slice_and_stays_small():
    from localsched.diagnostics.collectors import machine_speed

    clock = FakeClock()
    probe = SpeedProbe(clock=clock)
    probe._start = clock.now
    for k in range(3 * machine_speed.SLICES):  # (a timing per slice, then fewer, wider)
        probe._slot(clock.now + k * machine_speed.SLICE, 1e-4)
    line = {"start": probe._start, "width": probe._width, "sums": probe._sums,
            "counts": probe._counts}
    assert len(line["sums"]) <= machine_speed.SLICES
    assert line["width"] == 4 * machine_speed.SLICE  # (3x the slices: twice doubled)
    assert sum(line["counts"]) == 3 * machine_speed.SLICES
    assert machine_speed.speed_while({"timeline": line}, [(1000.0, 1010.0)]) \
        == pytest.approx(1e-4)


def test_a_recording_saves_the_timeline_of_its_timings(tmp_path):
    path = tmp_path / "run.json"
    dsk = {("spin", i): (spin, 300_000) for i in range(8)}
    with performance_report(None, samples=False, json=str(path)):
        localsched.get(dsk, list(dsk), num_workers=2)
    run = RunData.load_json(str(path))
    line = run.meta["speed"]["timeline"]
    assert sum(line["counts"]) >= 1 and len(line["sums"]) == len(line["counts"])
    t0, t1 = min(t.start_time for t in run.tasks), max(t.end_time for t in run.tasks)
    assert line["start"] <= t0 + line["width"] and line["start"] + \
        line["width"] * len(line["sums"]) >= t1 - line["width"]


@pytest.mark.parametrize("line", [None, "x", {}, {"start": 0.0, "width": 0.0, "sums": [1.0],
                                                     "counts": [1]},
                                  {"start": 0.0, "width": 1.0, "sums": ["x"], "counts": [1]},
                                  {"start": 0.0, "width": 1.0, "sums": [1.0], "counts": ["1"]},
                                  {"start": 0.0, "width": 1.0, "sums": [1.0, 2.0],
                                   "counts": [1]},
                                  {"start": "a", "width": 1.0, "sums": [], "counts": []}])
def test_a_malformed_saved_timeline_is_no_timeline(line):
    from localsched.diagnostics.collectors.machine_speed import speed_while

    assert speed_while({"timeline": line}, [(0.0, 1.0)]) is None
