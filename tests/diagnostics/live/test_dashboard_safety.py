"""A dashboard left open for a long session: who may reach it (the Host
header, DNS rebinding), keys it cannot print, and the memory it keeps."""

from __future__ import annotations

import base64
import gc
import http.client
import json
import os
import re
import socket
import tracemalloc
from operator import add

import pytest

from localsched.diagnostics import Dashboard
from localsched.diagnostics.live.feed import Feed
from localsched.diagnostics.live.recorder import DEFAULT_HISTORY

ROUTES = ("/status", "/json/progress.json", "/metrics", "/individual-plots.json",
          "/individual-task-stream", "/report.html", "/")


def _request(port: int, path: str, host: str, headers: dict | None = None) -> tuple:
    """``(status, body)`` of a GET naming ``host`` in its Host header."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _upgrade(port: int, path: str, host: str, origin: str, token: str) -> str:
    """The status line answering a websocket upgrade naming ``host`` and ``origin``."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", f"Origin: {origin}",
             "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
             "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Protocol: bokeh, {token}"]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while b"\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer.split(b"\r\n", 1)[0].decode()


def _token(page: bytes) -> str:
    found = re.search(rb'"token":\s*"([^"]+)"', page) or re.search(rb"token=([\w.-]+)", page)
    assert found, "the page carries its session token"
    return found.group(1).decode()


def test_a_forged_host_gets_403_on_every_route_and_the_websocket(dash):
    from localsched.threaded import get

    with dash:
        get({"a-1": (add, 1, 2)}, "a-1")
    port = dash.port
    for path in ROUTES:
        status, body = _request(port, path, f"evil.example:{port}")
        assert status == 403, (path, status)
        assert b"localsched_tasks" not in body and b"bokeh" not in body.lower()
    # the names of the address served are answered
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST.:{port}"):
        assert _request(port, "/json/progress.json", host)[0] == 200, host
    # a forged websocket upgrade (Origin equal to Host, which tornado lets
    # through bokeh's origin check) with a real session's token: refused
    status, page = _request(port, "/status", f"127.0.0.1:{port}")
    assert status == 200
    token = _token(page)
    forged = _upgrade(port, "/status/ws", f"evil.example:{port}", f"http://evil.example:{port}",
                      token)
    assert forged.split(" ")[1] == "403", forged
    honest = _upgrade(port, "/status/ws", f"127.0.0.1:{port}", f"http://127.0.0.1:{port}", token)
    assert honest.split(" ")[1] == "101", honest


def test_allowed_hosts_admit_a_proxy_name(monkeypatch):
    monkeypatch.delenv("LOCALSCHED_DASHBOARD_LINK", raising=False)
    monkeypatch.setenv("LOCALSCHED_DASHBOARD_ALLOWED_HOSTS", "hub.example.org")
    d = Dashboard(quiet=True, allowed_hosts=["dash.example.org"])
    try:
        for host, status in (("dash.example.org", 200), ("hub.example.org:443", 200),
                             ("evil.example", 403), (f"[::1]:{d.port}", 200)):
            assert _request(d.port, "/individual-plots.json", host)[0] == status, host
    finally:
        d.close()


def test_behind_a_proxy_link_any_host_is_answered(monkeypatch):
    """jupyter-server-proxy forwards the browser's Host (the hub's name):
    with the link template set, the proxy is the gate."""
    monkeypatch.setenv("LOCALSCHED_DASHBOARD_LINK", "/user/me/proxy/{port}/status")
    d = Dashboard(quiet=True)
    try:
        assert _request(d.port, "/individual-plots.json", "hub.example.org")[0] == 200
    finally:
        d.close()


def test_metrics_answers_for_a_key_with_a_lone_surrogate(dash):
    from localsched.threaded import get

    odd = b"read\xffcsv".decode("utf-8", "surrogateescape")  # a non-UTF-8 file name: '\udcff'
    assert "\udcff" in odd
    with dash:
        get({(odd, 0): (add, 1, 1), "total": (add, (odd, 0), 1)}, "total")
    port = dash.port
    for _ in range(2):  # (for the rest of its life, not only the first time)
        status, body = _request(port, "/metrics", f"127.0.0.1:{port}")
        assert status == 200
        text = body.decode("utf-8")
        assert "localsched_tasks_completed_total 2" in text
        assert 'localsched_task_compute_seconds_total{group="read\\\\udcffcsv"}' in text
    status, body = _request(port, "/json/progress.json", f"127.0.0.1:{port}")
    assert status == 200 and json.loads(body)["done"] == 2
    # the page's parts serialise it too
    from localsched.diagnostics.live.groups import GroupProgress
    from localsched.diagnostics.live.taskstream import TaskStream

    feed = Feed(dash.recorder)
    feed.update(force=True)
    for component in (TaskStream(feed, dash), GroupProgress(feed, dash)):
        component.update()
        for column in component.source.data.values():
            for value in column:
                if isinstance(value, str):
                    value.encode("utf-8")  # (what the page's websocket does)


def _run_many(dash, runs: int, width: int) -> None:
    from localsched.threaded import get

    for r in range(runs):
        dsk = {(f"leaf-{r:04x}{'0' * 28}", i): (add, i, r) for i in range(width)}
        dsk["total"] = (sum, list(dsk))
        get(dsk, "total", num_workers=2, callbacks=[dash])
        if r % 10 == 0:
            dash.feed.update(force=True)  # (a page or a probe reading it)


@pytest.mark.timeout(600)  # (a bound on a hang: on a loaded machine 300 runs took >120 s)
def test_history_is_bounded_and_memory_flat_over_150_runs():
    """A dashboard kept up over 150 computations (its bound is 10 of them)
    keeps at most its bound of task records; what it retains is the same
    after 50 runs and after 150 (memory traced by tracemalloc, not the
    process's RSS)."""
    assert DEFAULT_HISTORY == 200_000
    width, bound = 400, 4000
    d = Dashboard(quiet=True, history=bound)
    try:
        _run_many(d, 10, width)
        gc.collect()
        tracemalloc.start()
        try:
            _run_many(d, 40, width)
            gc.collect()
            after_50 = tracemalloc.get_traced_memory()[0]
            _run_many(d, 100, width)
            gc.collect()
            after_150 = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        runs = d.recorder.runs
        kept = sum(len(log.ends) for log in runs[:-1])
        assert kept <= bound and len(runs) <= bound // (width + 1) + 1
        assert d.recorder.forgotten == 150 - len(runs)
        feed = d.feed
        feed.update(force=True)
        assert len(feed._consumed) <= 2 * len(runs)
        assert feed.runs_total >= 1
        # 100 more runs of 401 tasks kept would be ~5 MB (130 bytes a record)
        grown = after_150 - after_50
        assert grown < 1_000_000, f"retained {grown / 1e6:.1f} MB more over 100 runs"
    finally:
        d.close()


def test_history_must_be_a_positive_int():
    with pytest.raises(ValueError, match="history must be a positive int"):
        Dashboard(quiet=True, history=0)
