"""``localsched profile --dashboard[=ADDR] [--wait]``, ``-m``, ``-c`` and
``python -m localsched``, run as real processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support.platform_marks import needs_posix_signals

SCRIPT = """\
import sys
import localsched
from operator import add
print("argv", sys.argv[1:])
print("result", localsched.get({("inc", 0): (add, 1, 2), ("inc", 1): (add, ("inc", 0), 1)},
                               ("inc", 1)))
"""


def _run(args, cwd, timeout=180):
    return subprocess.run([sys.executable, "-m", "localsched", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(cwd)))


def test_python_dash_m_localsched_is_the_command(tmp_path):
    proc = _run(["--version"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("localsched ")


def test_profile_c_code_with_arguments(tmp_path):
    code = "import sys, localsched; print(sys.argv, localsched.get({'a': (abs, -3)}, 'a'))"
    proc = _run(["profile", "--no-progress", "--no-samples", "-c", code, "x", "-y"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "['-c', 'x', '-y'] 3\n"
    assert (tmp_path / "report.html").stat().st_size > 100_000
    assert "localsched: 1 tasks" in proc.stderr


def test_profile_m_module(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "job.py").write_text(SCRIPT, encoding="utf-8")
    proc = _run(["profile", "--no-progress", "--no-samples", "-m", "mypkg.job", "a1"],
                tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "argv ['a1']" in proc.stdout and "result 4" in proc.stdout
    assert "localsched: 2 tasks" in proc.stderr


def test_profile_needs_something_to_run(tmp_path):
    proc = _run(["profile"], tmp_path)
    assert proc.returncode == 2 and "SCRIPT.py, -m MODULE or -c CODE" in proc.stderr
    proc = _run(["profile", "--wait", "-c", "pass"], tmp_path)
    assert proc.returncode == 2 and "--wait needs --dashboard" in proc.stderr


@needs_posix_signals  # (Popen.send_signal(SIGINT): unsupported on Windows)
@pytest.mark.timeout(300)
def test_profile_dashboard_wait_serves_until_ctrl_c(tmp_path):
    (tmp_path / "job.py").write_text(SCRIPT, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "localsched", "profile", "--dashboard",
                             "--wait", "--no-progress", "--no-samples", "job.py", "z"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        link = None
        lines = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            found = re.match(r"localsched dashboard: (http://127\.0\.0\.1:\d+/status)$",
                             line.strip())
            if found:
                link = found.group(1)
            if "still serving" in line:
                break
        assert link is not None and "still serving" in lines[-1], lines
        # the script is over, the page still answers, with its computation
        with urllib.request.urlopen(link.replace("/status", "/json/progress.json")) as r:
            progress = json.loads(r.read())
        assert progress["done"] == progress["total"] == 2 and progress["status"] == "finished"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert "argv ['z']" in out
        with pytest.raises(OSError):
            urllib.request.urlopen(link, timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
