"""``localsched compare BEFORE.json AFTER.json``: the table, and the exit
status a CI job can gate on."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import localsched
from localsched.command.cli import main
from localsched.diagnostics.collectors.records import TaskData
from localsched.diagnostics.report import RunData, performance_report


def nap(x, seconds):
    time.sleep(seconds)
    return x


def record(path, slow_seconds):
    dsk = {("load", i): (nap, i, 0.02) for i in range(6)}
    dsk.update({("parse", i): (nap, i, slow_seconds) for i in range(6)})
    with performance_report(None, samples=False, json=str(path)):
        localsched.get(dsk, list(dsk), num_workers=2)
    return path


def test_one_group_slowed_three_times_exits_1_and_names_it(tmp_path, capsys):
    # (sleeping tasks: their waits are judged with repeats, or on a quiet machine)
    before = [str(record(tmp_path / f"before{i}.json", 0.03)) for i in range(2)]
    after = [str(record(tmp_path / f"after{i}.json", 0.09)) for i in range(2)]
    assert main(["compare", "--repeats", "2", *before, *after]) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("parse"))
    assert "REGRESSION" in line
    assert not any("REGRESSION" in x for x in out.splitlines() if x.startswith("load"))
    assert "2 regression(s): (wall time), parse" in out


def test_a_run_compared_with_itself_exits_0(tmp_path, capsys):
    before = record(tmp_path / "run.json", 0.03)
    assert main(["compare", str(before), str(before)]) == 0
    assert "no regression" in capsys.readouterr().out


def synthetic(path, seconds):
    RunData(tasks=[TaskData(("work", i), None, 0.0, seconds, 1) for i in range(10)]
            ).save_json(str(path))
    return str(path)


def test_the_thresholds_are_settable(tmp_path, capsys):
    a = synthetic(tmp_path / "a.json", 0.10)  # 1.0 s in all
    b = synthetic(tmp_path / "b.json", 0.12)  # +20 %, +0.2 s
    assert main(["compare", a, b]) == 0  # (default: +50 %)
    assert main(["compare", a, b, "--threshold", "0.1"]) == 1
    assert main(["compare", a, b, "--threshold", "10%"]) == 1
    assert main(["compare", a, b, "--threshold", "0.1", "--min-seconds", "0.5"]) == 0
    assert main(["compare", a, b, "--threshold", "0.25"]) == 0
    assert main(["compare", a, b, "--threshold", "25%"]) == 0
    assert main(["compare", a, b, "--min-seconds", "0.5"]) == 0
    assert main(["compare", b, a]) == 0  # faster is no regression
    capsys.readouterr()


def test_an_unreadable_file_is_named_and_exits_2(tmp_path, capsys):
    a = synthetic(tmp_path / "a.json", 0.1)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something else"}), encoding="utf-8")
    assert main(["compare", a, str(bad)]) == 2
    assert "not a localsched run" in capsys.readouterr().err
    assert main(["compare", a, str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_the_command_line_entry_point(tmp_path):
    a = synthetic(tmp_path / "a.json", 0.1)
    b = synthetic(tmp_path / "b.json", 0.3)
    done = subprocess.run([sys.executable, "-m", "localsched", "compare", a, b],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "work" in done.stdout


@pytest.mark.parametrize("bad", ["-1", "x"])
def test_a_bad_threshold_is_refused(tmp_path, bad, capsys):
    a = synthetic(tmp_path / "a.json", 0.1)
    with pytest.raises(SystemExit) as exc:
        main(["compare", a, a, "--threshold", bad])
    assert exc.value.code == 2
    assert "threshold" in capsys.readouterr().err
