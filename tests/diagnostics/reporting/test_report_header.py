"""The report's header (issue #36, item 6): when, versions, cores, BLAS
threads, scheduler, the load during the run, the script -- in the run's JSON
and at the top of the page; older files without it still load and render."""

from __future__ import annotations

import os
import platform

import pytest

import localsched
from localsched.command import cli
from localsched.diagnostics.collectors.records import TaskData
from localsched.diagnostics.report import RunData, performance_report
from localsched.diagnostics.reporting.page import report_layout

HERE = os.path.dirname(__file__)


def _recorded(tmp_path):
    path = tmp_path / "run.json"
    with performance_report(None, samples=False, json=str(path)) as report:
        localsched.get({"a": (sum, [1, 2]), "b": (abs, "a")}, "b")
    return report, path


def test_a_recorded_run_carries_its_header_into_the_json(tmp_path):
    report, path = _recorded(tmp_path)
    header = report.data.meta["header"]
    assert header["date"][:2] == "20" and header["date"].endswith("+00:00")
    versions = header["versions"]
    assert versions["python"] == platform.python_version()
    assert versions["localsched"] and versions["dask"] and versions["numpy"]
    assert header["cores"] == os.cpu_count()
    assert header["blas_threads"]["threads"] >= 1  # (NumPy is imported: BLAS is loaded)
    assert header["scheduler"]
    load = header["load"]
    assert load["others_cores"] >= 0 and load["own_cores"] >= 0
    again = RunData.load_json(path)
    assert again.meta["header"] == header


def test_the_header_opens_the_report_page(tmp_path):
    report, path = _recorded(tmp_path)
    layout = report_layout(report.data)
    names = [getattr(c, "name", None) for c in layout.children]
    assert names.index("header") < names.index("findings")
    text = layout.select_one({"name": "header"}).text
    for word in ("date", "python", "numpy", "cores", "BLAS threads", "scheduler",
                 "load during the run"):
        assert word in text


def test_profile_keeps_the_script_name_and_source(tmp_path):
    script = tmp_path / "my_job.py"
    script.write_text("import localsched\n"
                      "print(localsched.compute(localsched.delayed(abs)(-3)))\n",
                      encoding="utf-8")
    out, data = tmp_path / "r.html", tmp_path / "r.json"
    assert cli.main(["profile", "--no-progress", "--no-samples", "-o", str(out),
                     "--json", str(data), str(script)]) == 0
    header = RunData.load_json(data).meta["header"]
    assert header["script"]["name"] == "my_job.py"
    assert "localsched.delayed(abs)" in header["script"]["source"]
    assert header["scheduler"].startswith("threads")
    assert header["status"] == 0
    assert "my_job.py" in out.read_text(encoding="utf-8")


def test_an_older_file_without_a_header_still_loads_and_renders():
    run = RunData.load_json(os.path.join(os.path.dirname(HERE), "data", "run-before-analysis.json"))
    assert "header" not in run.meta
    layout = report_layout(run)
    assert layout.select_one({"name": "header"}) is None


def test_a_malformed_header_does_not_break_the_page():
    run = RunData(tasks=[TaskData("a-1", None, 0.0, 1.0, 1)], walls=[(0.0, 1.0)],
                  meta={"header": {"versions": 5, "load": "busy", "blas_threads": [1],
                                   "script": "x.py", "cores": "many"}})
    layout = report_layout(run)
    assert "many" in layout.select_one({"name": "header"}).text


def test_merged_runs_keep_each_runs_header():
    a = RunData(tasks=[TaskData("a-1", None, 0.0, 1.0, 1)],
                meta={"header": {"date": "2026-01-01T00:00:00+00:00"}})
    b = RunData(tasks=[TaskData("a-1", None, 50.0, 51.0, 1)],
                meta={"header": {"date": "2026-02-01T00:00:00+00:00"}})
    merged = RunData.side_by_side([a, b], names=["jan", "feb"])
    assert [m["header"]["date"][:7] for m in merged.meta["runs"]] == ["2026-01", "2026-02"]
    text = report_layout(merged).select_one({"name": "header"}).text
    assert "2026-01-01" in text and "2026-02-01" in text and "feb" in text


def test_others_cores_leaves_out_what_the_hypervisor_stole():
    # ``machine_cpu`` holds the hypervisor's steal (no process's: other
    # machines', or its own on this one's behalf): 2 CPU seconds busy in 1 s,
    # 0.5 of them ours and 0.5 stolen: other processes used 1 core, not 1.5
    from localsched.diagnostics.reporting.header import _cores

    load = _cores({"seconds": 1.0, "machine_cpu": 2.0, "own_cpu": 0.5, "steal": 0.5})
    assert load["others_cores"] == 1.0 and load["own_cores"] == 0.5
    # (an older reading without steal is read as before)
    assert _cores({"seconds": 1.0, "machine_cpu": 2.0, "own_cpu": 0.5})["others_cores"] == 1.5


def _spin(i, n):
    s = 0
    for k in range(n):
        s += k * i
    return s


HOG = "import sys\nprint('ready', flush=True)\nsys.stdout.close()\nwhile True: pass\n"


def _detached_hog():
    """A process spinning on the CPU that is not this one's descendant (the
    load meter counts those as the run's workers): started by a shell that
    exits at once; returns its psutil handle once it says it runs."""
    import shlex
    import subprocess
    import sys

    import psutil

    shell = subprocess.Popen(["sh", "-c", f"{shlex.quote(sys.executable)} -c "
                              f"{shlex.quote(HOG)} & echo $!"], stdout=subprocess.PIPE,
                             text=True)
    try:
        lines = [shell.stdout.readline().strip() for _ in range(2)]  # the pid and 'ready'
    finally:
        shell.stdout.close()
        shell.wait()
    assert "ready" in lines, lines
    return psutil.Process(int(next(x for x in lines if x.isdigit())))



@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_others_cores_are_what_a_cpu_hog_beside_the_run_used(tmp_path, scheduler):
    # a real hog beside a run: the header's others_cores over the run's
    # seconds hold at least the CPU the hog burnt meanwhile (other programs
    # on this machine add to it), and the run's own CPU holds its tasks'
    # (on its workers, processes too), not the hog's
    import psutil

    import localsched.multiprocessing

    hog = _detached_hog()
    try:
        get = localsched.get if scheduler == "threads" else localsched.multiprocessing.get
        dsk = {("spin", i): (_spin, i, 1_500_000) for i in range(8)}
        before = hog.cpu_times()
        with performance_report(None, samples=False) as report:
            get(dsk, list(dsk), num_workers=2)
        after = hog.cpu_times()
    finally:
        hog.kill()
        psutil.wait_procs([hog], timeout=60)
    burnt = (after.user + after.system) - (before.user + before.system)
    load, meter = report.data.meta["header"]["load"], report.data.meta["load"]
    seconds = meter["seconds"]
    assert burnt > 0.05, (burnt, meter)  # (the hog ran beside the run)
    assert load["others_cores"] * seconds >= 0.8 * burnt - 0.05, (load, meter, burnt)
    # the run's own CPU is its tasks' (on its workers, processes or threads)
    tasks_cpu = sum(v for k, v in report.data.metrics.items() if k[2] == "thread-cpu")
    assert tasks_cpu > 0 and meter["own_cpu"] >= 0.8 * tasks_cpu - 0.05, (meter, tasks_cpu)


def test_the_blas_variables_are_those_recorded_with_the_run(monkeypatch):
    # (the variables the run's workers started with, not those of whoever
    # writes the page later: machine_load.blas_threads records them)
    from localsched.diagnostics.reporting.header import run_header

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    blas = {"threads": 2, "source": "threadpoolctl", "libraries": ["openblas"],
            "environment": {"OPENBLAS_NUM_THREADS": "2"}}
    header = run_header(started=None, finished=None, blas=blas)
    assert header["blas_threads"] == {"threads": 2, "source": "threadpoolctl",
                                      "libraries": ["openblas"],
                                      "env": {"OPENBLAS_NUM_THREADS": "2"}}
