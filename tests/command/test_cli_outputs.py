"""The ``localsched`` command's outputs: checked before the script runs,
written whole or not at all, whatever the names in them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from localsched.diagnostics.report import RunData, performance_report
from localsched.diagnostics.runs.outputs import write_text
from tests.support.platform_marks import needs_read_only_dirs, needs_undecodable_file_names


def run_cli(*args, cwd, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "localsched.command.cli", *args],
        cwd=cwd, capture_output=True, timeout=timeout,
    )


def err_lines(proc) -> list:
    return proc.stderr.decode("utf-8", "replace").strip().splitlines()


MARKER_SCRIPT = "open('ran.txt', 'w').write('yes')\nimport sys\nsys.exit(3)\n"


@pytest.mark.parametrize("option", ["-o", "--json", "--trace"])
def test_an_unwritable_output_is_refused_before_the_script_runs(tmp_path, option):
    (tmp_path / "job.py").write_text(MARKER_SCRIPT, encoding="utf-8")
    proc = run_cli("profile", "--no-progress", option, "missing/dir/out.x", "job.py",
                   cwd=tmp_path)
    lines = err_lines(proc)
    assert proc.returncode not in (0, 3)
    assert len(lines) == 1, lines
    assert "missing/dir/out.x" in lines[0] and "no such directory" in lines[0]
    assert not (tmp_path / "ran.txt").exists()  # the script never ran
    assert not (tmp_path / "report.html").exists()


@needs_read_only_dirs
def test_an_output_in_a_read_only_directory_is_refused(tmp_path):
    (tmp_path / "job.py").write_text(MARKER_SCRIPT, encoding="utf-8")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        proc = run_cli("profile", "-o", "ro/r.html", "job.py", cwd=tmp_path)
    finally:
        ro.chmod(0o700)
    assert proc.returncode != 0 and len(err_lines(proc)) == 1
    assert "not writable" in err_lines(proc)[0]
    assert not (tmp_path / "ran.txt").exists()


def test_report_refuses_an_unwritable_output_before_reading(tmp_path):
    RunData().save_json(tmp_path / "run.json")
    for option in ("-o", "--trace"):
        proc = run_cli("report", "run.json", option, "nowhere/r.x", cwd=tmp_path)
        assert proc.returncode != 0
        assert err_lines(proc) == [err_lines(proc)[0]]
        assert "nowhere/r.x" in err_lines(proc)[0]


@pytest.mark.parametrize("what", [["-m", "no_such_module_xyz"], ["no_such_script.py"],
                                  ["-m", "json.no_such_submodule"], ["-m", "email"]])
def test_a_missing_script_or_module_is_one_line_and_no_report(tmp_path, what):
    proc = run_cli("profile", *what, cwd=tmp_path)
    lines = err_lines(proc)
    assert proc.returncode != 0
    assert len(lines) == 1, lines
    assert lines[0].startswith("localsched: ") and what[-1] in lines[0]
    assert not (tmp_path / "report.html").exists()


@needs_undecodable_file_names
def test_a_script_whose_name_is_not_utf8_gets_its_report(tmp_path):
    name = os.fsdecode(b"job\xff.py")  # (a lone surrogate in Python)
    (tmp_path / name).write_text("print('ran')\nimport sys\nsys.exit(4)\n", encoding="utf-8")
    (tmp_path / "report.html").write_text("OLD", encoding="utf-8")
    proc = run_cli("profile", "--json", "r.json", "--trace", "t.json", name, cwd=tmp_path)
    assert proc.returncode == 4, err_lines(proc)  # the script's own status
    assert b"ran" in proc.stdout
    page = (tmp_path / "report.html").read_bytes()
    assert len(page) > 10_000
    page.decode("utf-8")  # valid UTF-8 throughout
    assert b"job\\udcff.py" in page  # the undecodable byte, escaped
    run = RunData.load_json(tmp_path / "r.json")
    assert run.meta["title"].endswith(name)  # the JSON keeps the name exactly
    json.loads((tmp_path / "t.json").read_bytes())


def test_a_title_with_a_lone_surrogate_replaces_an_older_report_whole(tmp_path):
    path = tmp_path / "report.html"
    path.write_text("OLD REPORT", encoding="utf-8")
    with performance_report(str(path), title="bad \udcff title", samples=False,
                            json=str(tmp_path / "r.json")):
        pass
    page = path.read_bytes()
    assert b"OLD REPORT" not in page and b"bad \\udcff title" in page
    assert RunData.load_json(tmp_path / "r.json").meta["title"] == "bad \udcff title"


def test_a_failed_write_keeps_the_older_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "report.html"
    path.write_text("OLD REPORT", encoding="utf-8")
    with pytest.raises(TypeError):
        write_text(path, None)  # type: ignore[arg-type]  # (fails after the file is open)
    assert path.read_text(encoding="utf-8") == "OLD REPORT"
    assert sorted(os.listdir(tmp_path)) == ["report.html"]


def test_written_outputs_get_the_usual_permissions(tmp_path):
    path = tmp_path / "r.json"
    RunData().save_json(path)
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_an_output_that_fails_costs_none_of_the_others(tmp_path):
    report = performance_report(str(tmp_path / "r.html"), samples=False,
                                json=str(tmp_path / "gone" / "r.json"),
                                trace=str(tmp_path / "t.json"))
    with pytest.raises(FileNotFoundError):
        with report:
            pass
    assert (tmp_path / "r.html").stat().st_size > 10_000
    json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    assert report.data is not None


# -- outputs that would overwrite an input; options after the script; names escaped


@pytest.mark.parametrize("option", ["-o", "--json", "--trace"])
def test_an_output_that_is_the_script_is_refused_before_it_runs(tmp_path, option):
    (tmp_path / "job.py").write_text(MARKER_SCRIPT, encoding="utf-8")
    (tmp_path / "link.py").symlink_to(tmp_path / "job.py")
    for target in ("job.py", "./job.py", str(tmp_path / "job.py"), "link.py"):
        proc = run_cli("profile", "--no-progress", option, target, "job.py", cwd=tmp_path)
        lines = err_lines(proc)
        assert proc.returncode not in (0, 3) and len(lines) == 1, lines
        assert "would overwrite" in lines[0] and "the script" in lines[0], lines
        assert (tmp_path / "job.py").read_text(encoding="utf-8") == MARKER_SCRIPT
        assert not (tmp_path / "ran.txt").exists()


def test_a_trailing_output_that_is_the_script_is_refused_too(tmp_path):
    (tmp_path / "job.py").write_text(MARKER_SCRIPT, encoding="utf-8")
    proc = run_cli("profile", "job.py", "--json", "job.py", cwd=tmp_path)
    assert proc.returncode not in (0, 3) and "would overwrite" in err_lines(proc)[0]
    assert (tmp_path / "job.py").read_text(encoding="utf-8") == MARKER_SCRIPT


def test_two_outputs_on_one_file_are_refused(tmp_path):
    (tmp_path / "job.py").write_text(MARKER_SCRIPT, encoding="utf-8")
    proc = run_cli("profile", "-o", "r.out", "--json", "./r.out", "job.py", cwd=tmp_path)
    assert proc.returncode != 0 and "--json" in err_lines(proc)[0]
    assert not (tmp_path / "ran.txt").exists()


@pytest.mark.parametrize("option", ["-o", "--trace"])
def test_report_refuses_to_write_over_the_run_it_reads(tmp_path, option):
    RunData().save_json(tmp_path / "run.json")
    before = (tmp_path / "run.json").read_bytes()
    proc = run_cli("report", "run.json", option, "run.json", cwd=tmp_path)
    lines = err_lines(proc)
    assert proc.returncode != 0 and len(lines) == 1 and "would overwrite" in lines[0], lines
    assert (tmp_path / "run.json").read_bytes() == before


ECHO = "import sys\nprint('argv', sys.argv[1:])\n"


def test_localsched_options_after_the_script_are_honoured(tmp_path):
    (tmp_path / "echo.py").write_text(ECHO, encoding="utf-8")
    proc = run_cli("profile", "--no-progress", "echo.py", "-o", "r.html", "--json", "r.json",
                   "--trace=t.json", cwd=tmp_path)
    assert proc.returncode == 0, err_lines(proc)
    assert b"argv []" in proc.stdout
    assert all((tmp_path / n).exists() for n in ("r.html", "r.json", "t.json"))
    assert not (tmp_path / "report.html").exists()
    proc = run_cli("profile", "--no-progress", "echo.py", "a", "--json", "s.json", cwd=tmp_path)
    assert b"argv ['a']" in proc.stdout and (tmp_path / "s.json").exists()


def test_an_output_option_amid_the_scripts_arguments_is_a_clear_error(tmp_path):
    (tmp_path / "echo.py").write_text(ECHO, encoding="utf-8")
    proc = run_cli("profile", "echo.py", "-o", "r.html", "--verbose", cwd=tmp_path)
    lines = err_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert "'-o'" in lines[0] and "'--'" in lines[0], lines
    assert b"argv" not in proc.stdout and not (tmp_path / "report.html").exists()
    # (after '--' everything is the script's)
    proc = run_cli("profile", "echo.py", "--", "-o", "r.html", "--verbose", cwd=tmp_path)
    assert b"argv ['-o', 'r.html', '--verbose']" in proc.stdout


def test_compare_and_the_summary_print_names_escaped(tmp_path):
    from localsched.diagnostics.collectors.records import TaskData

    evil = "load\x1b]0;pwned\x07\x1b[2J"
    a = RunData(tasks=[TaskData((evil, i), None, 1.0, 1.1, 0) for i in range(3)])
    b = RunData(tasks=[TaskData((evil, i), None, 1.0, 3.0, 0) for i in range(3)])
    a.save_json(tmp_path / "a.json")
    b.save_json(tmp_path / "b.json")
    proc = run_cli("compare", "a.json", "b.json", cwd=tmp_path)
    assert proc.returncode == 1 and b"REGRESSION" in proc.stdout
    assert b"\x1b" not in proc.stdout + proc.stderr and b"\x07" not in proc.stdout
    assert b"\\x1b]0;pwned" in proc.stdout
    b.meta["dashboard"] = "http://h:8787/\x1b[2J"
    from localsched.diagnostics.reporting.summary import summarize

    text = str(summarize(b.tasks, dashboard=b.meta["dashboard"]))
    assert "\x1b" not in text and "\\x1b[2J" in text
