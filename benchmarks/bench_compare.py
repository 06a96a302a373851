"""``localsched compare`` on a loaded machine: how far apart identical reruns
read, and how a doubled group reads, raw and at the same machine speed.

Records the workloads of ``tests/command/test_compare_ci.py``: two groups
(``load`` fixed, ``parse`` 1,200,000 or 2,400,000 steps a task: doubled)
and one group (1,000,000 or 2,000,000), ``--reps`` times each
alternating, beside nothing, three CPU hogs or three bursty processes
(detached: other programs to the load meter), then compares every pair:
identical (before against before) and doubled (before against after).
Prints, per workload and load, the range of ``parse``'s CPU ratio raw and
at the same machine speed, and the exit statuses.  Then the speed probe's
cost: the CPU seconds of 20,000 tiny pure-Python tasks on 2 threads under
``performance_report``, with the probe and with it stubbed out, alternating.

    python benchmarks/bench_compare.py [--reps 6] [--loads quiet,hogs,bursty]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shlex
import subprocess
import sys
import tempfile
import time

import localsched
from localsched.diagnostics.analysis.comparison import compare
from localsched.diagnostics.collectors import machine_speed
from localsched.diagnostics.report import RunData, performance_report

BURSTS = """import random, time
while True:
    t, burst = time.monotonic(), random.uniform(0.01, 0.15)
    while time.monotonic() - t < burst:
        pass
    time.sleep(random.uniform(0.01, 0.15))
"""
LOADS = {"quiet": None, "hogs": "while True: pass", "bursty": BURSTS}


def spin(i, n):
    s = 0
    for k in range(n):
        s += k * i
    return s


def parse(x, n):
    return spin(1, n) + x


def recorded(dsk, path):
    with performance_report(None, samples=False, json=path):
        localsched.get(dsk, list(dsk), num_workers=2)
    return RunData.load_json(path)


#: Steps a task, as in the tests: (two groups' ``parse``, one group's).
STEPS = {"two groups": 1_200_000, "one group": 1_000_000}


def two_groups(path, n):
    dsk = {("load", i): (spin, i, STEPS["two groups"] // 7) for i in range(8)}
    dsk.update({("parse", i): (parse, ("load", i), n) for i in range(8)})
    return recorded(dsk, path)


def one_group(path, n):
    return recorded({("parse", i): (spin, i, n) for i in range(8)}, path)


def detached(code, n):
    """``n`` processes running ``code``, not descendants of this one."""
    pids = []
    for _ in range(n):
        out = subprocess.run(["sh", "-c", f"{shlex.quote(sys.executable)} -c "
                              f"{shlex.quote(code)} >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout
        pids.append(int(out.split()[0]))
    return pids


def parse_cpu(run):
    return sum(v for (_s, g, a, u), v in run.metrics.items()
               if g == "parse" and a == "thread-cpu" and u == "seconds")


def probe_us(run):
    """The speed probe's mean timing, over the recording and while the tasks
    ran (what ``compare`` divides by), in microseconds."""
    spans = sorted((t.start_time, t.end_time) for t in run.tasks)
    while_tasks = machine_speed.speed_while(run.meta["speed"], [(spans[0][0], spans[-1][1])])
    return run.meta["speed"]["seconds"] * 1e6, (while_tasks or float("nan")) * 1e6


def pairs_summary(pairs):
    raw = [parse_cpu(y) / parse_cpu(x) for x, y in pairs]
    results = [compare(x, y) for x, y in pairs]
    rows = [next(r for r in c.groups if r.group == "parse") for c in results]
    same = [r.after / r.before for r in rows]
    statuses = [c.status for c in results]
    for (x, y), c, r in zip(pairs, results, rows, strict=True):
        if c.status == 3:  # (the figures of an inconclusive pair)
            busy = "-" if c.busy is None else f"{c.busy:.1f}"
            print(f"  inconclusive (others' cores {busy}): parse CPU "
                  "{:.3f} -> {:.3f} s, probe (mean, while the "
                  "tasks ran) {:.1f}/{:.1f} -> {:.1f}/{:.1f} us, at the same speed "
                  "{:.2f}".format(parse_cpu(x), parse_cpu(y), *probe_us(x), *probe_us(y),
                                  r.after / r.before))
    return (f"raw {min(raw):.2f}-{max(raw):.2f}, same speed {min(same):.2f}-{max(same):.2f}, "
            f"exit {dict(sorted((s, statuses.count(s)) for s in set(statuses)))}")


def spread(load, reps, where):
    code = LOADS[load]
    pids = detached(code, 3) if code else []
    try:
        for name, workload in (("two groups", two_groups), ("one group", one_group)):
            before, after = [], []
            for _ in range(reps):
                before.append(workload(where, STEPS[name]))
                after.append(workload(where, 2 * STEPS[name]))
            same = list(itertools.permutations(before, 2))
            doubled = [(x, y) for x in before for y in after]
            print(f"{load:7} {name:10} identical: {pairs_summary(same)}")
            print(f"{load:7} {name:10} doubled:   {pairs_summary(doubled)}", flush=True)
    finally:
        for pid in pids:
            os.kill(pid, 9)


class _NoProbe:
    def __init__(self, *args):
        pass

    def start(self):
        return self

    def stop(self):
        return {}


def probe_cost(rounds=5):
    dsk = {("t", i): (spin, 1, 200) for i in range(20_000)}
    real = machine_speed.SpeedProbe
    out: dict = {"probe": [], "none": []}
    try:
        for _ in range(rounds):
            for name, cls in (("probe", real), ("none", _NoProbe)):
                machine_speed.SpeedProbe = cls
                c = time.process_time()
                with performance_report(None, samples=False):
                    localsched.get(dsk, list(dsk), num_workers=2)
                out[name].append(time.process_time() - c)
    finally:
        machine_speed.SpeedProbe = real
    print("probe cost, CPU s of 20,000 tiny tasks under performance_report: "
          + ", ".join(f"{k} {min(v):.3f}-{max(v):.3f}" for k, v in out.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--loads", default="quiet,hogs,bursty")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for load in args.loads.split(","):
            spread(load, args.reps, os.path.join(tmp, "run.json"))
    probe_cost()


if __name__ == "__main__":
    main()
