"""Names written to a terminal are shown, never obeyed: a task or group name
holding escape sequences cannot set the window title, clear the screen or
overwrite a line."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap

import pytest

from localsched.diagnostics import Profiler
from localsched.diagnostics.progress import ProgressBar
from localsched.local import get_sync
from localsched.multiprocessing import get as get_processes
from localsched.system.termsafe import terminal_text
from localsched.threaded import get as get_threads
from tests.support.platform_marks import needs_control_characters_in_file_names

NASTY = ["title\x1b]0;pwned\x07", "clear\x1b[2J", "back\rover", "lone\udcff", "rtl\u202eabc",
         "c1\x9b31m"]

#: What a terminal acts on: ESC, BEL, CSI (C1), a carriage return, a bidi override.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\ud800-\udfff]")


class TTY(io.StringIO):
    def isatty(self):
        return True


def inc(x):
    return x + 1


def graph():
    return {(name, i): (inc, i) for name in NASTY for i in range(2)}


def shown_names(text: str) -> str:
    """The text without the bar's own escapes (cursor up, clear line) and \\r."""
    return re.sub(r"\x1b\[\d*A|\x1b\[2K", "", text).replace("\r", "")


def test_terminal_text_escapes_every_control_and_keeps_printable_text():
    for name in NASTY:
        assert not CONTROL.search(terminal_text(name))
    assert terminal_text("title\x1b]0;pwned\x07") == "title\\x1b]0;pwned\\x07"
    assert terminal_text("ok-π ✓ 名前") == "ok-π ✓ 名前"


@pytest.mark.parametrize("tty", [True, False])
@pytest.mark.parametrize("get", [get_sync, get_threads, get_processes],
                         ids=["sync", "threads", "processes"])
def test_grouped_progress_bar_escapes_group_names(tty, get):
    out = TTY() if tty else io.StringIO()
    pb = ProgressBar(format="dask", out=out, width=4, dt=3600, group_by=lambda key: key[0])
    get(graph(), list(graph()), callbacks=[pb])
    text = shown_names(out.getvalue())
    assert not CONTROL.search(text), repr(text)
    for name in NASTY:
        assert terminal_text(name)[:15] in text  # (long names are cut)


def test_summary_text_escapes_group_names():
    with Profiler() as prof:
        get_sync({f"{name}-1": (inc, 1) for name in NASTY}, [f"{n}-1" for n in NASTY])
    text = str(prof.summary())
    assert not CONTROL.search(text.replace("\n", "")), repr(text)
    assert "title\\x1b]0;pwned\\x07" in text


@needs_control_characters_in_file_names
def test_cli_group_progress_and_messages_escape_names(tmp_path):
    (tmp_path / "job.py").write_text(textwrap.dedent(f"""
        import localsched
        names = {NASTY!r}
        dsk = {{(n, i): (abs, -i) for n in names for i in range(2)}}
        localsched.get(dsk, list(dsk))
    """), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "localsched.command.cli", "profile",
                           "--group-progress", "-o", "r.html", "job.py"],
                          cwd=tmp_path, capture_output=True,
                          timeout=180)
    err = proc.stderr.decode("utf-8", "surrogateescape")
    assert proc.returncode == 0, err
    assert "\x1b" not in err and "\x07" not in err  # (not a terminal: no escape at all)
    assert "clear\\x1b[2J" in err and "lone\\udcff" in err
    # An error message naming a file: its name is escaped too.
    bad = tmp_path / "bad\x1b[2J.json"
    bad.write_text("{}", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "localsched.command.cli", "report", bad.name],
                          cwd=tmp_path, capture_output=True, timeout=180)
    err = proc.stderr.decode("utf-8", "surrogateescape")
    assert proc.returncode != 0 and "\x1b" not in err and "bad\\x1b[2J.json" in err
