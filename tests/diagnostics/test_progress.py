"""ProgressBar: exact output from a fake clock and direct draws; the drawing
thread ordered with events, never sleeps."""

import doctest
import importlib
import io
import random
import re
import subprocess
import sys
import threading
import time
from operator import add, truediv

import pytest

from localsched.callbacks import Callback
from localsched.diagnostics import progress
from localsched.diagnostics.progress import (
    MAX_GROUP_LINES,
    THREAD_NAME,
    GroupProgress,
    Progress,
    ProgressBar,
    TextRenderer,
    WidgetRenderer,
    format_time,
)
from localsched.local import get_sync

SCHEDULERS = {
    "sync": ("localsched.local", "get_sync"),
    "threads": ("localsched.threaded", "get"),
    "processes": ("localsched.multiprocessing", "get"),
}

BAR_50 = "[####################                    ] | 50% Completed |"
BAR_100 = "[########################################] | 100% Completed |"


def drawing_threads():
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


@pytest.fixture(autouse=True)
def no_leftovers():
    assert not Callback.active, "a previous test left callbacks registered"
    assert not drawing_threads(), "a previous test left a drawing thread running"
    yield
    leftover = set(Callback.active)
    Callback.active.difference_update(leftover)  # don't cascade into later tests
    assert not leftover, f"test left callbacks registered: {leftover}"
    assert not drawing_threads(), "test left a drawing thread running"


@pytest.fixture(params=list(SCHEDULERS))
def get(request):
    module_name, attr = SCHEDULERS[request.param]
    module = importlib.import_module(module_name)
    yield getattr(module, attr)
    shutdown = getattr(module, "shutdown", None)
    if shutdown is not None:
        shutdown()


class FakeClock:
    """Returns ``now``, which the test sets."""

    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


class Recorder:
    """A renderer keeping every Progress it is given; sets ``drawn`` after ``n``."""

    def __init__(self, n=1):
        self.seen = []
        self.n = n
        self.drawn = threading.Event()

    def render(self, p):
        self.seen.append(p)
        if len(self.seen) >= self.n:
            self.drawn.set()


class TTY(io.StringIO):
    def isatty(self):
        return True


def screen(text):
    """What a terminal shows after ``text``: handles \\r, \\n, ESC[nA, ESC[2K."""
    lines, row, col, i = [""], 0, 0, 0
    while i < len(text):
        if text.startswith("\x1b[", i):
            j = i + 2
            while text[j].isdigit():
                j += 1
            arg, cmd = text[i + 2 : j], text[j]
            if cmd == "A":
                row = max(0, row - int(arg or 1))
            elif cmd == "K" and arg == "2":
                lines[row] = ""
            else:
                raise AssertionError(f"unexpected escape {text[i:j + 1]!r}")
            i = j + 1
            continue
        ch = text[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + ch + line[col + 1 :]
            col += 1
        i += 1
    return lines


def inc(x):
    return x + 1


def wait_for(event, *inputs):
    assert event.wait(30), "the drawing thread never drew"
    return 1


CHAIN = {"x": 1, "a": (inc, "x"), "b": (inc, "a"), "c": (inc, "b"), "d": (inc, "c")}
FAILING = {"a": (inc, 1), "b": (inc, "a"), "c": (truediv, "b", 0), "d": (inc, "c")}


def on_posttask(fn):
    """A per-call callback running ``fn(n_finished)`` after each task."""
    return Callback(posttask=lambda key, result, dsk, state, wid: fn(len(state.finished)))


# -- output format ------------------------------------------------------------


def test_exact_text_with_fake_clock_and_direct_draws():
    clock = FakeClock(100.0)
    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, dt=3600, timer=clock)  # the thread never draws

    def step(n):
        if n == 2:
            clock.now = 101.2
            assert pb.draw()
        if n == 4:
            clock.now = 102.5

    assert get_sync(CHAIN, "d", callbacks=[pb, on_posttask(step)]) == 5
    assert out.getvalue() == (
        "\r" + BAR_50 + "  1.2s"
        "\r" + BAR_100 + "  2.5s\n"
    )


def test_width_and_rounding():
    out = io.StringIO()
    r = TextRenderer(out, width=7, style="dask")
    r.render(Progress(1, 3, 0.04))
    r.render(Progress(2, 3, 59.96))
    r.render(Progress(3, 3, 75.0, status="finished"))
    assert out.getvalue() == (
        "\r[##     ] | 33% Completed |  0.0s"
        "\r[####   ] | 66% Completed | 1min  0.0s"
        "\r[#######] | 100% Completed | 1min 15.0s\n"
    )


@pytest.mark.parametrize(
    "seconds, text",
    [(0, " 0.0s"), (9.94, " 9.9s"), (12.3, "12.3s"), (60, "1min  0.0s"),
     (3599.9, "59min 59.9s"), (3725.5, "1hr  2min  5.5s"), (-1, " 0.0s")],
)
def test_format_time(seconds, text):
    assert format_time(seconds) == text


def test_percent_is_exact_integer_arithmetic():
    # 29/100 is 28.999... as a float product; the bar says 29.
    assert Progress(29, 100, 0).percent == 29
    assert Progress(99, 100, 0).percent == 99
    assert Progress(0, 0, 0).percent == 100
    assert TextRenderer(width=100, style="dask").bar_line(Progress(29, 100, 0)).count("#") == 29


def test_default_out_is_stdout_at_draw_time(capsys):
    with ProgressBar(format="dask", dt=3600, timer=FakeClock()):
        assert get_sync(CHAIN, "b") == 3
    assert capsys.readouterr().out == "\r" + BAR_100 + "  0.0s\n"


# -- minimum, empty graphs ----------------------------------------------------


def test_fast_run_below_minimum_prints_nothing():
    out = io.StringIO()
    with ProgressBar(format="dask", minimum=10, out=out):  # the real clock: a fast run
        assert get_sync(CHAIN, "d") == 5
    assert out.getvalue() == ""


def test_minimum_with_fake_clock():
    clock = FakeClock(0.0)
    out = io.StringIO()
    pb = ProgressBar(format="dask", minimum=10, out=out, dt=3600, timer=clock)
    drawn = []

    def step(n):
        clock.now = {1: 5.0, 2: 9.9, 3: 10.0, 4: 10.0}[n]
        drawn.append(pb.draw())

    get_sync(CHAIN, "d", callbacks=[pb, on_posttask(step)])
    assert drawn == [False, False, True, True]
    lines = out.getvalue().split("\r")[1:]
    assert lines[0].startswith("[##############################          ] | 75% Completed | 10.0s")
    assert lines[-1] == BAR_100 + " 10.0s\n"

    # The whole computation under the minimum: not even the final line.
    out.seek(0), out.truncate()
    clock.now = 0.0
    get_sync(CHAIN, "d", callbacks=[pb])
    assert out.getvalue() == ""


@pytest.mark.parametrize("dsk, keys", [({"x": 1}, "x"), ({}, []), ({"x": 1, "y": "x"}, ["x"])])
def test_graph_without_tasks_prints_one_completed_bar(dsk, keys):
    """As dask's bar does (issue 7.4): nothing to wait for is done, and says so."""
    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, timer=FakeClock())
    get_sync(dsk, keys, callbacks=[pb])
    assert out.getvalue() == "\r" + BAR_100 + "  0.0s\n"
    assert not pb.running and not drawing_threads()
    assert pb._timer is None  # no drawing thread was started for it


def test_last_duration_holds_the_last_runs_seconds():
    clock = FakeClock(now=10.0)
    pb = ProgressBar(format="dask", out=io.StringIO(), timer=clock)
    assert pb.last_duration is None
    advance = Callback(posttask=lambda key, result, dsk, state, wid: setattr(clock, "now", 12.5))
    get_sync(CHAIN, "d", callbacks=[pb, advance])
    assert pb.last_duration == 2.5
    with pytest.raises(ZeroDivisionError):
        get_sync(FAILING, "d", callbacks=[pb])
    assert pb.last_duration == 0.0  # the clock stood still in the failing run


def test_dask_names_of_the_drawing_state():
    """dask's tests read ``_running`` and the last drawing thread as ``_timer``."""
    pb = ProgressBar(format="dask", out=io.StringIO(), dt=3600)
    seen = []
    probe = Callback(pretask=lambda key, dsk, state: seen.append(pb._running))
    get_sync(CHAIN, "d", callbacks=[pb, probe])
    assert seen and all(seen)
    assert not pb._running and isinstance(pb._timer, threading.Thread)
    assert not pb._timer.is_alive()


# -- errors ---------------------------------------------------------------------


def test_error_stops_bar_where_it_was(get):
    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, dt=3600, timer=FakeClock())
    with pytest.raises(ZeroDivisionError):
        get(FAILING, "d", callbacks=[pb])
    text = out.getvalue()
    assert "100%" not in text
    assert text == "\r" + BAR_50 + "  0.0s\n"  # a, b done out of 4
    assert not pb.running and not drawing_threads()


def test_error_before_start_state_draws_nothing():
    out = io.StringIO()
    with pytest.raises(KeyError):
        with ProgressBar(format="dask", out=out, timer=FakeClock()):
            get_sync(CHAIN, "missing")
    assert out.getvalue() == ""


def test_reusable_after_error():
    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, dt=3600, timer=FakeClock())
    with pytest.raises(ZeroDivisionError):
        get_sync(FAILING, "d", callbacks=[pb])
    out.seek(0), out.truncate()
    assert get_sync(CHAIN, "d", callbacks=[pb]) == 5
    assert out.getvalue() == "\r" + BAR_100 + "  0.0s\n"


# -- every scheduler, every way to attach -------------------------------------------


def test_every_scheduler_and_attachment(get):
    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, dt=3600, timer=FakeClock())
    final = "\r" + BAR_100 + "  0.0s\n"
    threads_seen = []
    probe = Callback(pretask=lambda key, dsk, state: threads_seen.append(len(drawing_threads())))

    assert get(CHAIN, "d", callbacks=[pb, probe]) == 5  # per call
    assert out.getvalue() == final
    assert threads_seen == [1, 1, 1, 1]  # one drawing thread while computing ...
    assert not pb.running and not drawing_threads()  # ... stopped and joined after

    out.seek(0), out.truncate()
    with pb:
        assert get(CHAIN, "c") == 4
    assert out.getvalue() == final

    out.seek(0), out.truncate()
    pb.register()
    try:
        assert get(CHAIN, "b") == 3
        assert get(CHAIN, "a") == 2
    finally:
        pb.unregister()
    assert out.getvalue() == final * 2
    assert not Callback.active

    out.seek(0), out.truncate()
    assert get(CHAIN, "d") == 5  # unregistered: silent
    assert out.getvalue() == ""


class HalfwayRecorder(Recorder):
    """Sets ``drawn`` after ``n`` draws of a running computation with one
    task done (the thread may also draw before the first task ends)."""

    def render(self, p):
        self.seen.append(p)
        if sum(1 for q in self.seen if q.status == "running" and q.done == 1) >= self.n:
            self.drawn.set()


def test_drawing_thread_redraws_every_dt():
    rec = HalfwayRecorder(n=3)
    clock = FakeClock()
    pb = ProgressBar(format="dask", dt=0.001, timer=clock, display=rec)
    # The task waits (on an event, not a sleep) until the thread drew 3 times
    # with "a" done.
    assert get_sync({"a": (inc, 1), "b": (wait_for, rec.drawn, "a")}, "b", callbacks=[pb]) == 1
    assert not drawing_threads()
    running = [p for p in rec.seen if not p.final]
    assert all(p.total == 2 and p.status == "running" for p in running)
    done = [p.done for p in running]
    assert done == sorted(done) and set(done) <= {0, 1} and done.count(1) >= 3, done
    assert rec.seen[-1] == Progress(2, 2, 0.0, (), "finished")
    assert len(rec.seen) == len(running) + 1  # nothing drawn after the final line


def test_concurrent_computation_is_not_drawn():
    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, dt=3600, timer=FakeClock())
    inner = []

    def compute_elsewhere():
        # Another thread computes while this computation is being shown.
        t = threading.Thread(target=lambda: inner.append(get_sync(CHAIN, "d")))
        t.start()
        t.join()
        return inner[0]

    with pb:
        assert get_sync({"a": (compute_elsewhere,), "b": (inc, "a")}, "b") == 6
    # One line: the first computation's, uncorrupted by the other's.
    assert out.getvalue() == "\r" + BAR_100 + "  0.0s\n"


# -- groups ---------------------------------------------------------------------


def grouped_graph(n_load=4, n_add=2):
    dsk = {("load-1a2b3c4d", i): (inc, i) for i in range(n_load)}
    for j in range(n_add):
        dsk[("add-9f8e7d6c", j)] = (add, ("load-1a2b3c4d", 2 * j), ("load-1a2b3c4d", 2 * j + 1))
    dsk["total"] = (sum, [("add-9f8e7d6c", j) for j in range(n_add)])
    dsk["unused-0a0b0c0d"] = (inc, 1)  # culled: counts nowhere
    dsk["data"] = 7  # data: counts nowhere
    dsk[("add-9f8e7d6c", 99)] = (add, "data", 1)
    return dsk


def test_group_lines_at_end_when_not_a_tty(get):
    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, width=10, dt=3600, timer=FakeClock(),
                     group_by="prefix")
    assert get(grouped_graph(), ["total", ("add-9f8e7d6c", 99)], callbacks=[pb]) == (10, 8)
    text = out.getvalue()
    assert "\x1b" not in text
    assert text == (
        "\r[##########] | 100% Completed |  0.0s\n"
        "  load  [##########] 4/4\n"
        "  add   [##########] 3/3\n"
        "  total [##########] 1/1\n"
    )


def test_group_counts_while_running():
    rec = Recorder()
    pb = ProgressBar(format="dask", dt=3600, timer=FakeClock(), group_by="prefix", display=rec)
    redraw = on_posttask(lambda n: pb.draw())
    get_sync(grouped_graph(), ["total", ("add-9f8e7d6c", 99)], callbacks=[pb, redraw])
    *running, final = rec.seen
    assert len(running) == 8
    for n, p in enumerate(running, 1):
        assert p.done == n and p.total == 8
        assert sum(g.done for g in p.groups) == n
        assert [(g.name, g.total) for g in p.groups] == [("load", 4), ("add", 3), ("total", 1)]
        assert all(0 <= g.done <= g.total for g in p.groups)
    assert running[0].groups[0] == GroupProgress("load", 1, 4)
    assert final.groups == (
        GroupProgress("load", 4, 4), GroupProgress("add", 3, 3), GroupProgress("total", 1, 1)
    )


def test_group_block_redrawn_in_place_on_a_tty():
    clock = FakeClock(0.0)
    out = TTY()
    pb = ProgressBar(format="dask", out=out, width=10, dt=3600, timer=clock, group_by="prefix")

    def step(n):
        clock.now = n / 10
        pb.draw()

    get_sync(grouped_graph(), ["total", ("add-9f8e7d6c", 99)], callbacks=[pb, on_posttask(step)])
    text = out.getvalue()
    assert text.count("\x1b[3A") == 8  # every draw after the first moves up the block
    assert text.endswith("\n")
    assert screen(text) == [
        "[##########] | 100% Completed |  0.8s",
        "  load  [##########] 4/4",
        "  add   [##########] 3/3",
        "  total [##########] 1/1",
        "",
    ]


def test_group_block_on_a_tty_after_error():
    out = TTY()
    pb = ProgressBar(format="dask", out=out, width=4, dt=3600, timer=FakeClock(), group_by="prefix")
    dsk = {("ok-1a2b3c4d", i): (inc, i) for i in range(2)}
    dsk["boom"] = (truediv, (add, ("ok-1a2b3c4d", 0), ("ok-1a2b3c4d", 1)), 0)
    dsk["end"] = (add, "boom", ("ok-1a2b3c4d", 1))
    with pytest.raises(ZeroDivisionError):
        get_sync(dsk, "end", callbacks=[pb])
    lines = screen(out.getvalue())
    assert lines[-1] == "" and "100%" not in out.getvalue()
    assert lines[0].startswith("[##  ] | 50% Completed")
    assert sorted(lines[1:-1]) == ["  boom [    ] 0/1", "  end  [    ] 0/1", "  ok   [####] 2/2"]


def test_group_by_callable_and_many_groups():
    out = io.StringIO()
    dsk = {f"g{i:02d}": (inc, i) for i in range(MAX_GROUP_LINES + 5)}
    keys = sorted(dsk)
    pb = ProgressBar(format="dask", out=out, width=4, dt=3600, timer=FakeClock(), group_by="prefix")
    get_sync(dsk, keys, callbacks=[pb])
    group_lines = out.getvalue().split("\n")[1:-1]
    assert len(group_lines) == MAX_GROUP_LINES
    assert group_lines[0] == "  g00              [####] 1/1"
    assert group_lines[-1] == "  (6 other groups) [####] 6/6"

    rec = Recorder()
    pb = ProgressBar(format="dask", timer=FakeClock(), dt=3600, display=rec,
                     group_by=lambda key: "even" if int(key[1:]) % 2 == 0 else "odd")
    get_sync(dsk, keys, callbacks=[pb])
    assert sorted(rec.seen[-1].groups) == [
        GroupProgress("even", 13, 13), GroupProgress("odd", 12, 12)
    ]


def test_no_hook_per_task_on_localsched_runs():
    # Nothing of the bar runs per task in the scheduler's thread: groups and
    # the estimate are counted from the run's task records at each draw;
    # without either it needs not even those.  dask's schedulers keep no
    # records: there a posttask hook counts.
    for pb in (ProgressBar(), ProgressBar(format="dask", group_by="prefix")):
        assert pb._callback[2] is None and pb._callback[3] is None
        assert pb._callback.needs.records and not pb._callback.needs.results
        assert pb._dask_callback[3] is not None
    plain = ProgressBar(format="dask")
    assert plain._callback[3] is None and not plain._callback.needs.records
    assert plain._dask_callback[3] is None


# -- widgets -----------------------------------------------------------------------


def test_widget_renderer_values_success_and_error():
    ipywidgets = pytest.importorskip("ipywidgets")
    shown = []
    r = WidgetRenderer(display=shown.append)
    pb = ProgressBar(format="dask", dt=3600, timer=FakeClock(), group_by="prefix", display=r)
    assert get_sync(grouped_graph(), "total", callbacks=[pb]) == 10
    assert shown == [r.box] and isinstance(r.box, ipywidgets.VBox)
    assert isinstance(r.bar, ipywidgets.FloatProgress)
    assert (r.bar.value, r.bar.max, r.bar.bar_style) == (7, 7, "success")
    assert "100% Completed" in r.label.value
    assert {name: (b.value, b.max, b.bar_style) for name, b in r.group_bars.items()} == {
        "load": (4, 4, "success"), "add": (2, 2, "success"), "total": (1, 1, "success"),
    }

    with pytest.raises(ZeroDivisionError):
        get_sync(FAILING, "d", callbacks=[pb])
    assert len(shown) == 2 and shown[1] is r.box  # a new widget per computation
    assert (r.bar.value, r.bar.max, r.bar.bar_style) == (2, 4, "danger")
    assert "50% Completed" in r.label.value


def test_display_widget_uses_ipython_display(monkeypatch):
    pytest.importorskip("ipywidgets")
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    clock = FakeClock()
    pb = ProgressBar(format="dask", dt=3600, timer=clock, display="widget")

    def step(n):
        if n == 2:
            pb.draw()
            bar = pb.renderer.bar
            assert (bar.value, bar.max, bar.bar_style) == (2, 4, "")

    get_sync(CHAIN, "d", callbacks=[pb, on_posttask(step)])
    assert isinstance(pb.renderer, WidgetRenderer) and shown == [pb.renderer.box]
    assert (pb.renderer.bar.value, pb.renderer.bar.bar_style) == (4, "success")


def test_auto_display_picks_widget_in_a_notebook(monkeypatch):
    pytest.importorskip("ipywidgets")
    zmqshell = pytest.importorskip("ipykernel.zmqshell")
    import IPython

    assert not progress.in_notebook()  # pytest is no kernel
    assert isinstance(_renderer_used(ProgressBar(format="dask", out=io.StringIO())), TextRenderer)

    fake_shell = object.__new__(type("Shell", (zmqshell.ZMQInteractiveShell,), {}))
    monkeypatch.setattr(IPython, "get_ipython", lambda: fake_shell)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: None)
    assert progress.in_notebook()
    assert isinstance(_renderer_used(ProgressBar(format="dask")), WidgetRenderer)
    # An explicit out= or display="text" keeps text in a notebook.
    assert isinstance(_renderer_used(ProgressBar(format="dask", out=io.StringIO())), TextRenderer)
    bar = ProgressBar(format="dask", display="text", out=io.StringIO())
    assert isinstance(_renderer_used(bar), TextRenderer)


def _renderer_used(pb):
    pb._clock = FakeClock()
    get_sync(CHAIN, "a", callbacks=[pb])
    return pb.renderer


def test_no_ipython_or_ipywidgets_import():
    code = (
        "import io, sys\n"
        "from localsched.diagnostics.progress import ProgressBar\n"
        "from localsched.local import get_sync\n"
        "with ProgressBar(out=io.StringIO()):\n"
        "    get_sync({'a': (abs, -1)}, 'a')\n"
        "with ProgressBar():\n"
        "    get_sync({'a': (abs, -1)}, 'a')\n"
        "bad = [m for m in ('IPython', 'ipywidgets', 'ipykernel') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "100% Completed" in proc.stdout


# -- options, docs ----------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"minimum": -1}, ValueError), ({"minimum": "1"}, ValueError),
        ({"width": 0}, ValueError), ({"width": 2.5}, ValueError),
        ({"dt": 0}, ValueError), ({"dt": True}, ValueError),
        ({"out": 5}, TypeError), ({"timer": 5}, TypeError),
        ({"group_by": "suffix"}, ValueError), ({"display": "html"}, ValueError),
    ],
)
def test_bad_options_fail_loudly(kwargs, exc):
    with pytest.raises(exc, match=next(iter(kwargs))):
        ProgressBar(format="dask", **kwargs)


def test_widget_without_ipywidgets_says_what_to_install(monkeypatch):
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import fails
    with pytest.raises(ImportError, match="pip install ipywidgets"):
        ProgressBar(format="dask", display="widget")


def test_docstring_examples_run():
    result = doctest.testmod(progress, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10 and result.failed == 0


def test_grouped_bar_registers_and_unregisters():
    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, width=4, dt=3600, timer=FakeClock(), group_by="prefix")
    pb.register()
    try:
        assert get_sync(CHAIN, "b") == 3
    finally:
        pb.unregister()
    assert not Callback.active
    assert out.getvalue() == "\r[####] | 100% Completed |  0.0s\n  a [####] 1/1\n  b [####] 1/1\n"


def test_failing_group_by_propagates_and_leaves_nothing_running():
    def bad(key):
        raise LookupError("no group")

    out = io.StringIO()
    pb = ProgressBar(format="dask", out=out, timer=FakeClock(), group_by=bad)
    with pytest.raises(LookupError, match="no group"):
        get_sync(CHAIN, "b", callbacks=[pb])
    assert out.getvalue() == "" and not pb.running and pb.renderer is None


# -- the ETA and the rate (tqdm's form, the default) ----------------------------


class Keep:
    """A renderer that keeps every Progress it is given."""

    def __init__(self):
        self.seen = []

    def render(self, progress):
        self.seen.append(progress)


def test_tqdm_form_is_the_default():
    out = io.StringIO()
    with ProgressBar(out=out, width=10, dt=3600):
        assert get_sync(CHAIN, "d") == 5
    line = out.getvalue()
    assert re.fullmatch(r"\r\[##########\] \| 100% Completed \| 00:00<00:00, "
                        r"(\d[\d,]*\.\d tasks/s|\d+\.\d\ds/task)\n", line), line
    # dask's parsers split the line on "|" into bar, percent and time
    bar, percent, _ = (part.strip() for part in line.split("\r")[-1].split("|"))
    assert bar == "[##########]" and percent == "100% Completed"


def test_remaining_time_comes_from_each_groups_mean():
    """20 instant tasks, then 3 of 0.1 s: after the first slow one, the
    estimate is the two slow ones left (0.2 s on one worker), where a global
    rate (21 done in ~0.1 s) would promise ~0.01 s."""
    def slow(*_):
        time.sleep(0.1)
        return 1

    dsk = {("fast", i): (abs, -i) for i in range(20)}
    fast = [("fast", i) for i in range(20)]
    dsk.update({("slow", j): (slow, fast) for j in range(3)})
    keep = Keep()
    pb = ProgressBar(display=keep, dt=3600)
    drawn = {}

    def step(key, result, dsk, state, worker_id):
        if len(state.finished) == 21:  # the first slow task just finished
            pb.draw()
            drawn["p"] = keep.seen[-1]
            drawn["slow"] = state.timing[1] - state.timing[0]  # (as its worker measured)

    get_sync(dsk, [("slow", j) for j in range(3)], callbacks=[pb, Callback(posttask=step)])
    p = drawn["p"]
    assert p.done == 21 and p.total == 23
    # (against the slow task's own duration: a loaded machine sleeps longer)
    assert drawn["slow"] >= 0.1
    assert p.remaining == pytest.approx(2 * drawn["slow"], rel=0.01), p.remaining
    assert p.rate is not None and p.rate > 0
    final = keep.seen[-1]
    assert final.status == "finished" and final.remaining == 0.0


def test_remaining_time_after_catching_up_thousands_of_tasks_at_once():
    """As above, with 3,000 instant tasks (string and tuple keys) caught up
    in one draw (the bulk path): each group's count and mean are exact."""
    from localsched.diagnostics.progress import NUMPY_FROM

    def slow(*_):
        time.sleep(0.05)
        return 1

    dsk: dict = {("fast-0a1b2c3d", i): (abs, -i) for i in range(2000)}
    dsk.update({f"single-{i}": (abs, i) for i in range(999)})
    dsk[()] = (abs, 1)  # (the empty tuple is a key too: dask's group "Other")
    inputs = list(dsk)
    dsk.update({("slow", j): (slow, inputs) for j in range(3)})
    assert len(inputs) + 1 > NUMPY_FROM
    keep = Keep()
    pb = ProgressBar(display=keep, dt=3600, group_by="prefix")
    drawn = {}

    def step(key, result, dsk, state, worker_id):
        if key == ("slow", 0) or (len(state.finished) == 3001 and "p" not in drawn):
            pb.draw()
            drawn["p"] = keep.seen[-1]
            drawn["slow"] = state.timing[1] - state.timing[0]

    get_sync(dsk, [("slow", j) for j in range(3)], callbacks=[pb, Callback(posttask=step)])
    p = drawn["p"]
    assert p.done == 3001 and p.total == 3003
    assert sorted((g.name, g.done, g.total) for g in p.groups) == [
        ("Other", 1, 1), ("fast", 2000, 2000), ("single", 999, 999), ("slow", 1, 3)]
    assert p.remaining == pytest.approx(2 * drawn["slow"], rel=0.01), p.remaining


@pytest.mark.parametrize("n", [10, 5000])
def test_adding_up_by_group_in_bulk_or_in_a_loop(n):
    from localsched.diagnostics.progress import _add_by_group

    rng = random.Random(n)
    ids = [rng.randrange(-1, 4) for _ in range(n)]
    starts = [rng.random() for _ in range(n)]
    ends = [s + rng.random() for s in starts]
    done, seconds = [1, 0, 0, 0], [0.5, 0.0, 0.0, 0.0]
    _add_by_group(ids, starts, ends, done, seconds)
    for g in range(4):
        assert done[g] == ids.count(g) + (g == 0)
        want = sum(e - s for i, s, e in zip(ids, starts, ends, strict=True) if i == g)
        assert seconds[g] == pytest.approx(want + 0.5 * (g == 0), rel=1e-9)


def test_widget_label_shows_the_estimate():
    pytest.importorskip("ipywidgets")
    r = WidgetRenderer(display=lambda w: None)
    r.render(Progress(2, 4, 75.0, remaining=75.0, rate=0.0267))
    assert "01:15&lt;01:15, 37.45s/task" in r.label.value


def test_bad_format_is_refused():
    with pytest.raises(ValueError, match="format"):
        ProgressBar(format="rich")
