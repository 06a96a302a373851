"""A CI job's own steps, as it would run them (issue #36, item 4): a small
dask workload saved twice with ``localsched profile --json``, then
``localsched compare`` on the pairs -- each a real subprocess.

- the same workload twice: exit 0;
- one task group made 2x slower: exit 1, that group flagged;
- (either may be inconclusive, exit 3, where the machine was busy: so
  the verdict says);
- an after-run whose tasks fail (the script fails with them): exit 1, the
  failures named, never "no regression".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("dask")

#: The job: ``load`` (fixed) feeds ``parse`` (``steps`` per task, argv[1]);
#: argv[2] == "fail" makes every ``parse`` task raise.
JOB = textwrap.dedent("""
    import sys
    import dask

    def spin(i, n):
        s = 0
        for k in range(n):
            s += k * i
        return s

    def parse(x, n, fail):
        if fail:
            raise ValueError("bad input")
        return spin(1, n) + x

    steps, fail = int(sys.argv[1]), sys.argv[2:] == ["fail"]
    loaded = [dask.delayed(spin)(i, 60_000, dask_key_name=f"load-{i}") for i in range(8)]
    parsed = [dask.delayed(parse)(x, steps, fail, dask_key_name=f"parse-{i}")
              for i, x in enumerate(loaded)]
    print(sum(dask.compute(*parsed, num_workers=2)))
""")


def localsched_command(*args, cwd):
    return subprocess.run([sys.executable, "-m", "localsched", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def busy_unsure(proc) -> bool:
    """``compare`` exited 3 because the machine was busy, and said so."""
    return proc.returncode == 3 and "machine was busy" in proc.stdout


def profiled(tmp_path, name, *job_args):
    proc = localsched_command("profile", "--no-progress", "--no-samples", "--json",
                              f"{name}.json", "-o", f"{name}.html", "job.py", *job_args,
                              cwd=tmp_path)
    return proc, f"{name}.json"


def test_a_ci_job_compares_runs_saved_by_localsched_profile(tmp_path):
    (tmp_path / "job.py").write_text(JOB, encoding="utf-8")
    runs = {}
    for name, args in (("base", ("400000",)), ("again", ("400000",)),
                       ("slower", ("800000",))):
        proc, runs[name] = profiled(tmp_path, name, *args)
        assert proc.returncode == 0, proc.stderr
    proc, runs["failing"] = profiled(tmp_path, "failing", "400000", "fail")
    assert proc.returncode == 1 and "bad input" in proc.stderr

    # (on a machine other programs kept busy, one run a side may leave either
    # verdict inconclusive, exit 3, and say so: never the wrong one)
    same = localsched_command("compare", runs["base"], runs["again"], cwd=tmp_path)
    assert same.returncode == 0 or busy_unsure(same), same.stdout + same.stderr
    assert "no regression" in same.stdout or busy_unsure(same)

    slower = localsched_command("compare", runs["base"], runs["slower"], cwd=tmp_path)
    assert slower.returncode == 1 or busy_unsure(slower), slower.stdout + slower.stderr
    line = next(x for x in slower.stdout.splitlines() if x.startswith("parse"))
    assert ("REGRESSION" if slower.returncode == 1 else "inconclusive") in line, slower.stdout
    assert "CPU" in line, slower.stdout
    load = next(x for x in slower.stdout.splitlines() if x.startswith("load"))
    assert "REGRESSION" not in load, slower.stdout

    failing = localsched_command("compare", runs["base"], runs["failing"], cwd=tmp_path)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "failed" in failing.stdout and "no regression" not in failing.stdout
