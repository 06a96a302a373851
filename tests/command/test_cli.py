"""The ``localsched`` command, end to end, in a real subprocess."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from localsched.command.cli import build_parser


def run_cli(*args, cwd, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "localsched.command.cli", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )


SCRIPT = textwrap.dedent("""
    import sys
    from operator import add
    import localsched

    parts = [localsched.delayed(add)(i, 1) for i in range(int(sys.argv[1]))]
    total = localsched.delayed(sum)(parts)
    print("result", total.compute())
    if sys.argv[2:] == ["fail"]:
        raise ValueError("script failed on purpose")
""")


def test_profile_runs_a_script_and_writes_the_report(tmp_path):
    (tmp_path / "job.py").write_text(SCRIPT, encoding="utf-8")
    proc = run_cli("profile", "job.py", "20", "-o", "out.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "result 210" in proc.stdout
    assert "100% Completed" in proc.stderr
    assert "21 tasks" in proc.stderr
    html = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert "Task stream" in html and "Resources" in html and "Cache" in html
    assert "add" in html


def test_a_failing_script_shows_its_traceback_exits_nonzero_and_keeps_the_report(tmp_path):
    (tmp_path / "job.py").write_text(SCRIPT, encoding="utf-8")
    proc = run_cli("profile", "-o", "partial.html", "job.py", "5", "fail", cwd=tmp_path)
    assert proc.returncode == 1
    assert "ValueError: script failed on purpose" in proc.stderr
    assert 'job.py", line' in proc.stderr  # the script's own frame
    assert "result 15" in proc.stdout
    assert (tmp_path / "partial.html").stat().st_size > 0


def test_sys_exit_code_of_the_script_is_kept(tmp_path):
    (tmp_path / "bye.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    proc = run_cli("profile", "bye.py", "-o", "r.html", cwd=tmp_path)
    assert proc.returncode == 3
    assert (tmp_path / "r.html").exists()


def test_profile_makes_localsched_the_scheduler_for_dask(tmp_path):
    pytest.importorskip("dask")
    (tmp_path / "dj.py").write_text(textwrap.dedent("""
        import dask.array as da
        x = da.ones((100, 100), chunks=25)
        print("sum", (x + x.T).sum().compute())
    """), encoding="utf-8")
    proc = run_cli("profile", "--scheduler", "processes", "--num-workers", "2",
                   "dj.py", "-o", "d.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sum 20000.0" in proc.stdout
    tasks = int(proc.stderr.split("localsched: ")[1].split(" tasks")[0])
    assert tasks > 16  # dask's tasks ran under localsched's profilers


def test_profile_scheduler_applies_to_every_thread_of_the_script(tmp_path):
    (tmp_path / "threads.py").write_text(textwrap.dedent("""
        import os, threading
        import localsched

        out = {}
        def work():
            out["pid"] = localsched.delayed(os.getpid)().compute()
        t = threading.Thread(target=work)
        t.start(); t.join()
        print("other thread ran in a worker process:", out["pid"] != os.getpid())
    """), encoding="utf-8")
    proc = run_cli("profile", "--scheduler", "processes", "--num-workers", "1",
                   "--no-progress", "threads.py", "-o", "t.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "other thread ran in a worker process: True" in proc.stdout


def test_demo_writes_a_report(tmp_path):
    proc = run_cli("demo", "--blocks", "3", "--block-size", "60", "-o", "demo.html",
                   "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "identities hold: True" in proc.stderr
    assert "matmul" in (tmp_path / "demo.html").read_text(encoding="utf-8")


def test_missing_script_is_a_clear_error(tmp_path):
    proc = run_cli("profile", "nope.py", cwd=tmp_path)
    assert proc.returncode != 0
    assert "no such script: nope.py" in proc.stderr


def test_help_documents_every_option():
    parser = build_parser()
    for name in ("profile", "demo"):
        sub = parser._subparsers._group_actions[0].choices[name]
        text = sub.format_help()
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text
            assert action.help, f"{name}: {action.dest} has no help"


def test_trailing_output_and_double_dash(tmp_path):
    (tmp_path / "echo.py").write_text("import sys\nprint('argv', sys.argv[1:])\n", encoding="utf-8")
    proc = run_cli("profile", "echo.py", "a", "-o", "x.html", cwd=tmp_path)
    assert "argv ['a']" in proc.stdout and (tmp_path / "x.html").exists()
    proc = run_cli("profile", "echo.py", "--", "b", "-o", "mine", cwd=tmp_path)
    assert "argv ['b', '-o', 'mine']" in proc.stdout
    assert (tmp_path / "report.html").exists()


@pytest.mark.cluster
def test_profile_on_a_cluster_by_address(tmp_path, cluster_client):
    """``--scheduler distributed --address``: the script's graph runs on the
    cluster and the report records it."""
    (tmp_path / "job.py").write_text(SCRIPT, encoding="utf-8")
    address = cluster_client.scheduler.address
    proc = run_cli("profile", "--scheduler", "distributed", "--address", address,
                   "--no-progress", "-o", "out.html", "job.py", "20", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "result 210" in proc.stdout
    assert "21 tasks" in proc.stderr
    assert (tmp_path / "out.html").stat().st_size > 10_000


def test_address_needs_the_distributed_scheduler(tmp_path):
    (tmp_path / "job.py").write_text(SCRIPT, encoding="utf-8")
    proc = run_cli("profile", "--address", "tcp://127.0.0.1:1", "job.py", "2", cwd=tmp_path)
    assert proc.returncode != 0
    assert "--address needs --scheduler distributed" in proc.stderr
