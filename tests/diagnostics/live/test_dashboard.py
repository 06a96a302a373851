"""The live dashboard without a browser: components on real runs, every route
over HTTP, sessions reaped, ports, the shared instance and the environment switch.

The browser half (a real Chromium tab on a running computation) is in
test_dashboard_browser.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from operator import add

import pytest

from localsched.diagnostics import Dashboard, FineMetrics, SampleProfiler
from localsched.diagnostics.live import dashboard as shared_dashboard
from localsched.diagnostics.live.feed import Feed
from localsched.diagnostics.live.groups import GroupProgress
from localsched.diagnostics.live.memory import MemoryByGroup
from localsched.diagnostics.live.pages import Pacer
from localsched.diagnostics.live.summary import Summary
from localsched.diagnostics.live.taskstream import TaskStream
from tests.support.servers import port_is_free

# (the processes scheduler's pool starts once for the module: conftest)
pytestmark = pytest.mark.pools_per_module


def _graph(n=40):
    dsk = {("load", i): (add, i, 1) for i in range(n)}
    dsk.update({("double", i): (add, ("load", i), ("load", i)) for i in range(n)})
    dsk["total"] = (sum, [("double", i) for i in range(n)])
    return dsk


def _get(url: str, path: str) -> tuple:
    base = url.rsplit("/", 1)[0]
    with urllib.request.urlopen(base + path, timeout=30) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def _wait(condition, timeout=10.0):
    """Poll ``condition`` until true (the server's reaper runs on its own clock)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_components_follow_a_real_run(dash, scheduler):
    name, get = scheduler
    dsk = _graph()
    with dash:
        assert get(dsk, "total") == sum(2 * (i + 1) for i in range(40))
    feed = Feed(dash.recorder)  # a fresh reader of the same records
    feed.update(force=True)
    stream, groups, summary = TaskStream(feed, dash), GroupProgress(feed, dash), Summary(feed, dash)
    for component in (stream, groups, summary):
        component.update()
    # every task is drawn once, in a rectangle of its own or merged
    data = stream.source.data
    assert sum(data["count"]) == 81
    assert len(data["left"]) <= 81
    assert all(r >= lo for lo, r in zip(data["left"], data["right"], strict=True))
    assert set(data["group"]) == {"load", "double", "total"}
    assert len(stream.running.data["left"]) == 0  # nothing is running any more
    # a finished run fills the time axis (it opened 2 s wide; this run is far shorter)
    run = dash.recorder.runs[-1]
    x = stream.x_range
    assert x.start <= min(data["left"]) and x.end >= max(data["right"])
    assert x.end - x.start <= 1.1 * (run.finished - run.started) + 0.02  # (seconds since its start)
    rows = dict(zip(groups.source.data["name"], groups.source.data["label"], strict=False))
    assert rows == {"load": "load  40/40", "double": "double  40/40", "total": "total  1/1"}
    assert "81 / 81" in summary.text and "finished" in summary.text
    progress = feed.progress()
    assert progress["done"] == progress["total"] == 81
    assert progress["status"] == "finished" and progress["eta"] == 0.0
    assert 1 <= progress["workers"] <= (1 if name == "sync" else os.cpu_count())


def test_a_stream_only_sends_what_is_new(dash):
    from localsched.threaded import get

    feed = Feed(dash.recorder)
    stream = TaskStream(feed, dash)
    with dash:
        get(_graph(10), "total")
        feed.update(force=True)
        stream.update()
        first = sum(stream.source.data["count"])
        stream.update()  # nothing new: nothing more
        assert sum(stream.source.data["count"]) == first == 21
        get(_graph(5), "total")  # a new computation starts a new stream
        feed.update(force=True)
        stream.update()
    assert sum(stream.source.data["count"]) == 11


def test_tiny_tasks_are_merged_not_dropped(dash):
    from localsched.threaded import get

    dsk = {("tiny", i): (abs, -i) for i in range(5000)}
    dsk["sum"] = (sum, list(dsk))
    with dash:
        get(dsk, "sum")
    feed = Feed(dash.recorder)
    feed.update(force=True)
    stream = TaskStream(feed, dash, length=100_000)
    stream.update()
    counts = stream.source.data["count"]
    assert sum(counts) == 5001
    assert len(counts) < 2500, "microsecond tasks of one worker and group share rectangles"


def test_running_tasks_show_before_they_end(dash):
    from localsched.threaded import get

    started, release = threading.Event(), threading.Event()

    def block():
        started.set()
        assert release.wait(30)
        return 1

    feed = Feed(dash.recorder)
    stream = TaskStream(feed, dash)
    result = []
    with dash:
        worker = threading.Thread(target=lambda: result.append(
            get({"block-x": (block,), "after-y": (add, "block-x", 1)}, "after-y")))
        worker.start()
        try:
            assert started.wait(30)
            assert _wait(lambda: (feed.update(force=True), feed.progress())[1]["running"] == 1)
            stream.update()
            assert list(stream.running.data["label"]) == ["block-x (running)"]
            assert feed.progress()["status"] == "running"
        finally:
            release.set()
            worker.join(30)
    assert result == [2]


def test_failed_tasks_are_counted(dash):
    from localsched.threaded import get

    def boom():
        raise ValueError("no")

    with dash, pytest.raises(ValueError):
        get({"bad-x": (boom,), "ok-y": (abs, -1), "z": (add, "bad-x", "ok-y")}, "z")
    _, _, body = _get(dash.link, "/json/progress.json")
    progress = json.loads(body)
    assert progress["erred"] == 1 and progress["status"] == "errored"
    _, _, metrics = _get(dash.link, "/metrics")
    assert "localsched_tasks_failed_total 1\n" in metrics.decode()


def test_every_route_over_http(dash):
    from localsched.threaded import get

    with dash:
        get(_graph(), "total")
        get(_graph(), "total")
    status, kind, body = _get(dash.link, "/json/progress.json")
    progress = json.loads(body)
    assert status == 200 and kind.startswith("application/json")
    assert {"done", "total", "running", "erred", "elapsed", "eta"} <= set(progress)
    assert progress["done"] == progress["total"] == 81 and progress["run"] >= 2

    _, kind, body = _get(dash.link, "/metrics")
    assert kind.startswith("text/plain; version=0.0.4")
    text = body.decode()
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert samples["localsched_tasks_completed_total"] == "162"  # both computations
    assert samples['localsched_tasks{state="done"}'] == "81"
    assert float(samples["localsched_process_memory_bytes"]) > 1e6
    assert "localsched_process_cpu_percent" in samples
    assert 'localsched_task_compute_seconds_total{group="load"}' in samples
    for line in text.splitlines():  # every sample has HELP and TYPE
        if not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            assert f"# TYPE {name} " in text

    _, _, body = _get(dash.link, "/individual-plots.json")
    plots = json.loads(body)
    assert plots["Individual Task Stream"] == "/individual-task-stream"
    assert len(plots) == 7
    assert dash.sessions() == 0, "probes create no Bokeh session"
    for path in ["/status", *plots.values()]:
        status, kind, page = _get(dash.link, path)
        assert status == 200 and kind.startswith("text/html")
        assert b"bokeh" in page.lower() and b"http://" not in page.split(b"<body")[0][:0]
    _, _, root = _get(dash.link, "/")  # redirected to /status
    assert b"localsched dashboard" in root

    _, kind, report = _get(dash.link, "/report.html")
    assert kind.startswith("text/html") and len(report) > 100_000
    # the GETs' sessions are reaped within a couple of seconds
    assert _wait(lambda: dash.sessions() == 0, timeout=5)


def test_report_button_writes_the_report_so_far(dash, tmp_path):
    from localsched.diagnostics.report import RunData
    from localsched.threaded import get

    with dash, FineMetrics():
        get(_graph(), "total")
        path = dash.write_report(str(tmp_path / "so-far.html"))
        run = dash.run_data()
    assert os.path.getsize(path) > 100_000
    assert len(run.tasks) == 81 and isinstance(run, RunData)
    assert run.metrics, "fine metrics of the FineMetrics beside the dashboard"


def test_leaving_with_stops_recording_and_the_page_stays(dash):
    from localsched.threaded import get

    with dash:
        get(_graph(3), "total")
    get(_graph(30), "total")  # not recorded
    status, _, body = _get(dash.link, "/json/progress.json")
    assert status == 200 and json.loads(body)["total"] == 7
    assert dash.running


def test_callbacks_argument_and_register(dash):
    from localsched.local import get_sync

    get_sync(_graph(2), "total", callbacks=[dash])
    assert json.loads(_get(dash.link, "/json/progress.json")[2])["done"] == 5
    dash.register()
    try:
        get_sync(_graph(3), "total")
    finally:
        dash.unregister()
    assert json.loads(_get(dash.link, "/json/progress.json")[2])["done"] == 7


def test_link_printed_once_and_repr_html(capsys):
    d = Dashboard()
    try:
        out = capsys.readouterr().out
        assert out == f"localsched dashboard: {d.link}\n"
        assert d.link.startswith("http://127.0.0.1:") and d.link.endswith("/status")
        page = d._repr_html_()
        assert f"<iframe src='{d.link}'" in page and f"href='{d.link}'" in page
        with d:
            pass
        assert capsys.readouterr().out == ""
    finally:
        d.close()
    assert "closed" in d._repr_html_()


def test_busy_port_falls_back_with_a_warning_naming_both():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with pytest.warns(RuntimeWarning, match=rf"Port {busy} is already in use.* port \d+"):
            d = Dashboard(f"127.0.0.1:{busy}", quiet=True)
        try:
            assert d.port != busy
            assert _get(d.link, "/json/progress.json")[0] == 200
        finally:
            d.close()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="address"):
        Dashboard("localhost:http", quiet=True)
    with pytest.raises(ValueError, match="interval"):
        Dashboard(interval=0, quiet=True)


def test_closed_dashboard_frees_its_port():
    d = Dashboard(quiet=True)
    port = d.port
    d.close()
    d.close()  # twice is fine
    with pytest.raises(urllib.error.URLError):
        _get(d.link, "/json/progress.json")
    assert port_is_free("127.0.0.1", port)


def test_a_new_dashboard_numbers_its_runs_from_one():
    """'run #1' on a new page is the first computation it saw, whatever
    other dashboards recorded before in the same process."""
    from localsched.local import get_sync

    for _ in range(2):
        d = Dashboard(quiet=True)
        try:
            with d:
                get_sync(_graph(2), "total")
                get_sync(_graph(2), "total")
            assert json.loads(_get(d.link, "/json/progress.json")[2])["run"] == 2
        finally:
            d.close()


def test_shared_dashboard_is_one_instance():
    from localsched.local import get_sync

    first = shared_dashboard(quiet=True)
    try:
        assert shared_dashboard() is first
        get_sync(_graph(2), "total")  # registered: recorded
        assert json.loads(_get(first.link, "/json/progress.json")[2])["done"] == 5
    finally:
        first.close()
    assert not first.running


def test_memory_by_group_when_measured():
    from localsched.threaded import get

    d = Dashboard(memory=True, quiet=True)
    try:
        dsk = {("block", i): (bytes, 100_000) for i in range(4)}
        dsk["keep"] = (len, [("block", i) for i in range(4)])
        with d:
            get(dsk, ["keep", ("block", 0)])
        view = MemoryByGroup(d.feed, d)
        held = dict(zip(view.source.data["group"], view.source.data["mb"], strict=False))
        # three blocks were released by keep's end; the requested one is held
        assert held["block"] == pytest.approx(0.1, rel=0.01)
    finally:
        d.close()


def test_fine_metrics_and_flame_graph_components(dash):
    from localsched.diagnostics.live.finemetrics import FineMetricsView
    from localsched.diagnostics.live.flame import FlameGraph
    from localsched.threaded import get

    def spin(i):
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            pass
        return i

    with dash, FineMetrics(), SampleProfiler(interval=0.002):
        get({("spin", i): (spin, i) for i in range(10)}, [("spin", i) for i in range(10)])
        fm, flame = FineMetricsView(dash.feed, dash), FlameGraph(dash.feed, dash)
    assert "spin" in fm.source.data["group"]
    assert "thread-cpu" in fm.source.data["activity"]
    assert "spin" in flame.source.data["name"]


def test_environment_variable_turns_it_on(tmp_path):
    code = ("import json, urllib.request, localsched\n"
            "from localsched.diagnostics import dashboard\n"
            "localsched.get({'a': (abs, -1), 'b': (abs, 'a')}, 'b')\n"
            "d = dashboard()\n"
            "url = d.link.replace('/status', '/json/progress.json')\n"
            "print(json.loads(urllib.request.urlopen(url).read())['done'])\n"
            "d.close()\n")
    env = dict(os.environ, LOCALSCHED_DASHBOARD="127.0.0.1:0")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("localsched dashboard: http://127.0.0.1:")
    assert lines[1] == "2"


@pytest.mark.parametrize("setting", ["dask.config.set", "yaml"])
def test_dask_config_key_turns_it_on(tmp_path, setting):
    """``localsched.dashboard`` in dask's config (set before ``import
    localsched``, or in a dask YAML file) starts the shared dashboard."""
    pytest.importorskip("dask")
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOCALSCHED_DASHBOARD", "DASK_LOCALSCHED__DASHBOARD")}
    setup = "import dask\n"
    if setting == "yaml":
        (tmp_path / "localsched.yaml").write_text("localsched:\n  dashboard: 127.0.0.1:0\n",
                                                  encoding="utf-8")
        env["DASK_CONFIG"] = str(tmp_path)
    else:
        setup += "dask.config.set({'localsched.dashboard': True})\n"
    code = setup + ("import json, urllib.request, localsched\n"
                    "from localsched.diagnostics.live import dash as module\n"
                    "d = module._shared\n"
                    "localsched.get({'a': (abs, -1), 'b': (abs, 'a')}, 'b')\n"
                    "url = d.link.replace('/status', '/json/progress.json')\n"
                    "print(json.loads(urllib.request.urlopen(url).read())['done'])\n"
                    "d.close()\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("localsched dashboard: http://127.0.0.1:")
    assert lines[1] == "2"


def test_dask_config_key_off_starts_nothing(tmp_path):
    pytest.importorskip("dask")
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOCALSCHED_DASHBOARD", "DASK_LOCALSCHED__DASHBOARD")}
    code = ("import dask\n"
            "dask.config.set({'localsched.dashboard': False})\n"
            "import sys, localsched\n"
            "print('localsched.diagnostics.live' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["False"]


@pytest.mark.cluster
def test_distributed_get_links_the_cluster_dashboard(dash, cluster_client):
    import localsched.distributed

    with dash:
        assert localsched.distributed.get(_graph(3), "total", client=cluster_client) == 12
    progress = json.loads(_get(dash.link, "/json/progress.json")[2])
    assert progress["done"] == 7
    assert progress["cluster_dashboard"] == cluster_client.dashboard_link


def _paced(pacer, clock, ticks: int, cost) -> list:
    """Tick every 0.1 s of the fake clock; an allowed update costs ``cost(i)``
    CPU seconds.  The ticks that updated."""
    ran = []
    for i in range(ticks):
        clock["wall"] += 0.1
        if pacer.ready():
            ran.append(i)
            clock["cpu"] += cost(i)
    return ran


def test_pacer_keeps_the_page_within_its_share_of_a_core():
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    pacer = Pacer(share=0.05, burst=0.2, clock=lambda: clock["wall"],
                  cpu_clock=lambda: clock["cpu"], tasks=lambda: clock["tasks"])
    # cheap updates (1 ms per 100 ms tick): every tick runs
    assert len(_paced(pacer, clock, 100, lambda i: 0.001)) == 100
    # costly ones (20 ms): the page slows down to its share, and uses it
    cpu0, wall0 = clock["cpu"], clock["wall"]
    ran = _paced(pacer, clock, 1000, lambda i: 0.020)
    used, budget = clock["cpu"] - cpu0, 0.05 * (clock["wall"] - wall0)
    assert budget * 0.9 <= used <= budget + pacer.cap + 0.020
    assert 200 <= len(ran) <= 260
    # a one-off second of CPU (a page built, a run started) pauses it briefly
    spike = []
    ran = _paced(pacer, clock, 50, lambda i: 0.001 if spike else spike.append(i) or 1.0)
    pause = (ran[1] - ran[0]) * 0.1  # seconds until the next update
    # (the debt, at most twice what it keeps, then what it keeps again: the
    # spike cost more than that, and an update waits until its cost is covered)
    assert pause <= 3 * pacer.cap / pacer.share + 0.2


def test_pacer_never_freezes_the_page():
    """The server thread's other work (probes, the browser's messages, a
    slow machine) may use more than the page's share by itself: the page
    still updates at least every max_gap seconds (a fresh-clone CI run
    showed a tab stuck at its first frame for two minutes)."""
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    pacer = Pacer(share=0.02, burst=0.25, max_gap=2.0, clock=lambda: clock["wall"],
                  cpu_clock=lambda: clock["cpu"], tasks=lambda: clock["tasks"])
    ran = []
    for i in range(600):  # 60 s; 10 ms of other work per 0.1 s tick: 5x the share
        clock["wall"] += 0.1
        clock["cpu"] += 0.010
        if pacer.ready():
            ran.append(i)
            clock["cpu"] += 0.005
    gaps = [(b - a) * 0.1 for a, b in zip(ran, ran[1:], strict=False)]
    assert ran and ran[0] <= 20 and max(gaps) <= 2.0 + 0.1 + 1e-9, gaps
    assert len(ran) <= 60 / 2.0 + 2  # no more often than the floor needs


def test_pacer_budget_grows_with_the_tasks_finished():
    """A flood of tasks earns the page per_task CPU each: it may then update
    more often than its share of a core allows, within that budget."""
    clock = {"wall": 0.0, "cpu": 0.0, "tasks": 0}
    pacer = Pacer(share=0.01, per_task=1e-6, burst=0.2, clock=lambda: clock["wall"],
                  cpu_clock=lambda: clock["cpu"], tasks=lambda: clock["tasks"])

    def cost(i):
        return 0.004

    ran = []
    for i in range(1000):  # 100 s at 10,000 tasks/s; an update costs 4 ms
        clock["wall"] += 0.1
        clock["tasks"] += 1000
        if pacer.ready():
            ran.append(i)
            clock["cpu"] += cost(i)
    used, budget = clock["cpu"], 1e-6 * clock["tasks"]
    assert budget * 0.9 <= used <= budget + pacer.cap + 0.004  # 1 µs per task, not 1 %
    assert len(ran) >= 0.9 * budget / 0.004


def _wait_reaped(dash, timeout=10.0) -> None:
    deadline = time.monotonic() + timeout
    while dash.sessions() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dash.sessions() == 0


def test_plots_made_beside_a_live_page_stay_their_own(dash):
    """Figures and HTML made on the user's thread while a page updates on
    the dashboard's thread never end up in the page's document."""
    from bokeh.embed import file_html
    from bokeh.plotting import figure
    from bokeh.resources import CDN

    _get(dash.link, "/status")  # a session whose periodic callback now runs
    made = []
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        fig = figure(title=f"mine {len(made)}")
        fig.line([0, 1], [1, 0])
        made.append((fig, file_html(fig, CDN, "mine")))
    pages = dash._server.call(lambda: [s.document for s in dash._server._server.get_sessions()])
    assert [len(doc.roots) for doc in pages] in ([], [1])  # (the page's column, nothing added)
    for fig, page in made:
        assert fig.document is not None and all(fig.document is not doc for doc in pages)
        assert fig.title.text in page


def test_a_failing_component_leaves_curdoc_as_it_was(dash, monkeypatch, caplog):
    """bokeh points curdoc() at a page's document around each callback, with
    no ``finally``: a component that raises is logged and the page goes on,
    and once the page is gone curdoc() is this thread's own document again."""
    from bokeh.io import curdoc
    from bokeh.io.state import curstate

    def broken(self):
        raise RuntimeError("broken component")

    monkeypatch.setattr(Summary, "update", broken)
    _get(dash.link, "/status")
    deadline = time.monotonic() + 10
    while "summary update failed" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "summary update failed" in caplog.text
    _wait_reaped(dash)
    for _ in range(5):
        assert curdoc() is curstate().document
        time.sleep(0.05)


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_recording_runs_nothing_per_task_and_sees_every_task(dash, scheduler):
    """Without sizes the dashboard has no per-task hook: it reads the run's
    own task records (``Needs.records``), and still sees every task."""
    from localsched.local import get_sync
    from localsched.multiprocessing import get as mp_get
    from localsched.threaded import get as threaded_get

    start, start_state, pretask, posttask, finish = dash._callback
    assert (pretask, posttask) == (None, None) and dash.needs.records
    get = {"sync": get_sync, "threads": threaded_get, "processes": mp_get}[scheduler]
    dsk = _graph(30)
    with dash:
        assert get(dsk, "total") == sum(2 * (i + 1) for i in range(30))
    log = dash.recorder.runs[-1]
    assert sorted(map(str, (r[0] for r in log.ends))) == sorted(map(str, dsk))
    assert all(r[1] <= r[2] for r in log.ends)  # (key, start, end, worker, ...)
    # with sizes measured, a posttask reads each result
    measured = Dashboard(quiet=True, memory=True)
    try:
        assert measured._callback[3] is not None and not measured.needs.records
    finally:
        measured.close()
