"""The server side's one pass over what the hooks recorded.

A :class:`Feed` turns the recorder's append-only lists into what the pages
show: counts per task group, the running tasks, rectangles for the task
stream (tiny tasks merged), resource samples and lifetime counters.  It is
updated by whoever reads it -- a page's periodic callback, ``/json/progress.json``,
``/metrics`` -- at most once per ``interval`` (an update within the interval
returns at once), so several tabs cost one pass, and with no tab open and no
probe nothing runs at all.  Pages keep their own cursors into ``rects`` and
``resources``, both append-only with a moving base.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import psutil

from ...utils import key_split
from ..eta import GroupDurations
from .recorder import Recorder, RunLog

__all__ = ["Feed", "GroupCounts"]

#: New rectangles per update above which the update's tasks are merged per
#: worker and group (the browser then never receives a burst of thousands).
MAX_NEW_RECTS = 1000
#: A task shorter than the run's elapsed time over this many "pixels" is tiny:
#: tiny neighbours of one worker and group share one rectangle.
PIXELS = 1500
RESOURCE_INTERVAL = 0.5
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2",
           "#dbdb8d", "#9edae5", "#393b79", "#637939", "#8c6d31", "#843c39")
FAILED_COLOR = "#d62728"


class GroupCounts:
    """Tasks of one group: total, done, running, erred; bytes held (-1: not measured)."""

    __slots__ = ("total", "done", "running", "erred", "held", "seconds")

    def __init__(self) -> None:
        self.total = self.done = self.running = self.erred = 0
        self.held = -1
        self.seconds = 0.0


class _Resources:
    """CPU percent and memory (RSS) of this process and its children."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._procs: dict = {}

    def measure(self) -> tuple:
        procs = [self._me]
        try:
            procs += self._me.children(recursive=True)
        except psutil.Error:
            pass
        cpu = mem = 0.0
        known = {}
        for p in procs:
            p = self._procs.get(p.pid, p)
            try:
                with p.oneshot():
                    cpu += p.cpu_percent()
                    mem += p.memory_info().rss
                known[p.pid] = p
            except psutil.Error:
                continue
        self._procs = known
        return cpu, mem


class Feed:
    """Derived state of the current (or last) computation; see the module docstring."""

    def __init__(self, recorder: Recorder, interval: float = 0.1, clock=time.time):
        self.recorder = recorder
        self.interval = interval
        self.clock = clock
        self.lock = threading.RLock()
        self._last_update = -1.0
        self._names: dict = {}  # key head -> group name
        self.colors: dict = {}
        # lifetime
        self.completed_total = 0
        self.failed_total = 0
        self.runs_total = 0
        self.compute_seconds: dict = {}
        self._consumed: dict = {}  # RunLog number -> ends counted into the lifetime counters
        # the task stream, shared by every page (each keeps its own cursor)
        self.rects: list = []
        self.rect_base = 0
        self.rect_limit = 20_000
        # resources: (epoch, cpu %, memory bytes)
        self.resources: list = []
        self.resource_base = 0
        self._resource_probe: _Resources | None = None
        self._last_resource = -1.0
        self._rates: deque = deque(maxlen=64)
        self.run: RunLog | None = None
        self.run_rect_start = 0
        self._reset_run(None)

    # -- per run -----------------------------------------------------------

    def _reset_run(self, run: RunLog | None) -> None:
        self.run = run
        self.groups: dict = {}
        self.running: dict = {}  # key -> (start, group)
        self.lanes: dict = {}  # worker id -> lane index
        self.durations = GroupDurations()
        self.done = 0
        self.erred = 0
        self._starts_seen = 0
        self._ends_seen = 0
        self._failed_seen = False
        self._held_keys: dict = {}
        self._rates.clear()
        #: Where this run's rectangles start in ``rects`` (absolute index).
        self.run_rect_start = self.rect_base + len(self.rects)
        if run is None:
            return
        groups = self.groups
        for key in run.keys:
            g = self.group(key)
            counts = groups.get(g)
            if counts is None:
                counts = groups[g] = GroupCounts()
                self.color(g)
            counts.total += 1

    def group(self, key) -> str:
        head = key[0] if type(key) is tuple and key else key
        if type(head) is str:
            name = self._names.get(head)
            if name is None:
                name = self._names[head] = key_split(head)
            return name
        return key_split(key)

    def color(self, group: str) -> str:
        c = self.colors.get(group)
        if c is None:
            c = self.colors[group] = PALETTE[len(self.colors) % len(PALETTE)]
        return c

    # -- the pass ----------------------------------------------------------------

    def update(self, force: bool = False) -> None:
        """Take in what the hooks recorded since the last update (at most
        once per ``interval`` unless ``force``)."""
        with self.lock:
            now = self.clock()
            if not force and now - self._last_update < self.interval * 0.5:
                return
            self._last_update = now
            runs = self.recorder.runs
            if runs:
                self._count_lifetime(runs)
                latest = runs[-1]
                if latest is not self.run:
                    self._reset_run(latest)
                self._take_in(latest, now)

    def _count_lifetime(self, runs: list) -> None:
        consumed = self._consumed
        for log in runs[-8:]:  # (runs older than that were finished long ago)
            n = len(log.ends)
            seen = consumed.get(log.number, 0)
            if n > seen:
                self.completed_total += n - seen
                for key, start, end, *_ in log.ends[seen:n]:
                    g = self.group(key)
                    self.compute_seconds[g] = self.compute_seconds.get(g, 0.0) + (end - start)
                consumed[log.number] = n
            if log.finished is not None and ("f", log.number) not in consumed:
                consumed["f", log.number] = True
                self.failed_total += len(log.failed)
                self.runs_total += 1

    def _take_in(self, run: RunLog, now: float) -> None:
        groups, running = self.groups, self.running
        n_starts = len(run.starts)
        for key, t in run.starts[self._starts_seen:n_starts]:
            g = self.group(key)
            running[key] = (t, g)
            counts = groups.get(g)
            if counts is not None:
                counts.running += 1
        self._starts_seen = n_starts
        n_ends = len(run.ends)
        new = run.ends[self._ends_seen:n_ends]
        self._ends_seen = n_ends
        lanes, durations, held = self.lanes, self.durations, self._held_keys
        for key, start, end, wid, nbytes, freed in new:
            g = self.group(key)
            counts = groups.get(g)
            if counts is None:
                counts = groups[g] = GroupCounts()
                self.color(g)
            if running.pop(key, None) is not None:
                counts.running -= 1
            counts.done += 1
            counts.seconds += end - start
            durations.add(g, end - start)
            if wid not in lanes:
                lanes[wid] = len(lanes)
            if nbytes >= 0:
                counts.held = max(counts.held, 0) + nbytes
                held[key] = (g, nbytes)
                for k in freed:
                    gone = held.pop(k, None)
                    if gone is not None:
                        groups[gone[0]].held -= gone[1]
        self.done += len(new)
        if new:
            self._add_rects(new, now - run.started)
        if run.finished is not None and not self._failed_seen:
            self._failed_seen = True
            self._take_failures(run)
        self._rates.append((now, self.done))

    def _take_failures(self, run: RunLog) -> None:
        self.erred = len(run.failed)
        rects = []
        for key, start, end, wid, error in run.failed:
            g = self.group(key)
            counts = self.groups.get(g)
            if counts is not None:
                counts.erred += 1
            if self.running.pop(key, None) is not None and counts is not None:
                counts.running -= 1
            if wid not in self.lanes:
                self.lanes[wid] = len(self.lanes)
            rects.append((self.lanes[wid], start, end, g, f"{key} failed: {error}", 1,
                          FAILED_COLOR))
        # The rest stopped with the computation.
        for counts in self.groups.values():
            counts.running = 0
        self.running.clear()
        self._append_rects(rects)

    def _add_rects(self, new: list, elapsed: float) -> None:
        """Rectangles for newly finished tasks: tiny neighbours of one worker
        and group merged, and a burst merged per worker and group."""
        pixel = max(elapsed, 1e-3) / PIXELS
        lanes, color = self.lanes, self.color
        out: list = []
        open_rect: dict = {}  # (lane, group) -> index in out of a rect of tiny tasks
        for key, start, end, wid, *_ in new:
            g = self.group(key)
            lane = lanes[wid]
            if end - start < pixel:
                i = open_rect.get((lane, g))
                if i is not None:
                    r = out[i]
                    if start - r[2] < pixel:
                        out[i] = (lane, min(r[1], start), max(r[2], end), g, None, r[5] + 1,
                                  r[6])
                        continue
                open_rect[lane, g] = len(out)
            out.append((lane, start, end, g, key, 1, color(g)))
        if len(out) > MAX_NEW_RECTS:
            merged: dict = {}
            for lane, lo, hi, g, _key, n, c in out:
                r = merged.get((lane, g))
                merged[lane, g] = ((lane, lo, hi, g, None, n, c) if r is None else
                                   (lane, min(r[1], lo), max(r[2], hi), g, None, r[5] + n, c))
            out = list(merged.values())
        self._append_rects([(lane, lo, hi, g,
                             str(key) if n == 1 else f"{n} tasks of {g}", n, c)
                            for lane, lo, hi, g, key, n, c in out])

    def _append_rects(self, rects: list) -> None:
        self.rects.extend(rects)
        extra = len(self.rects) - self.rect_limit
        if extra > self.rect_limit // 2:
            del self.rects[:extra]
            self.rect_base += extra

    def rects_since(self, cursor: int) -> tuple:
        """``(rectangles since cursor, new cursor)``; a cursor fallen behind
        the kept rectangles starts from the oldest kept."""
        start = max(cursor - self.rect_base, 0)
        return self.rects[start:], self.rect_base + len(self.rects)

    # -- resources ------------------------------------------------------------------

    def sample_resources(self, force: bool = False) -> None:
        """A CPU/memory sample, at most every RESOURCE_INTERVAL seconds."""
        with self.lock:
            now = self.clock()
            if not force and now - self._last_resource < RESOURCE_INTERVAL:
                return
            if self._resource_probe is None:
                self._resource_probe = _Resources()
            self._last_resource = now
            cpu, mem = self._resource_probe.measure()
            self.resources.append((now, cpu, mem))
            if len(self.resources) > 4000:
                del self.resources[:2000]
                self.resource_base += 2000

    def resources_since(self, cursor: int) -> tuple:
        start = max(cursor - self.resource_base, 0)
        return self.resources[start:], self.resource_base + len(self.resources)

    # -- summaries --------------------------------------------------------------------

    def progress(self) -> dict:
        """The numbers of ``/json/progress.json`` and of the summary strip."""
        with self.lock:
            run = self.run
            now = self.clock()
            if run is None:
                return {"done": 0, "total": 0, "running": 0, "erred": 0, "elapsed": 0.0,
                        "eta": None, "rate": 0.0, "workers": 0, "busy": 0, "status": "idle",
                        "run": 0, "cluster_dashboard": None}
            total = len(run.keys) or max(self.done, 1)
            end = run.finished if run.finished is not None else now
            elapsed = max(end - run.started, 0.0)
            if run.finished is not None:
                status = "errored" if run.errored else "finished"
                eta: float | None = 0.0 if not run.errored else None
                rate = self.done / elapsed if elapsed > 0 else 0.0
            else:
                status = "running"
                eta = self.eta(now)
                rate = self._rate(now)
            return {"done": self.done, "total": total, "running": len(self.running),
                    "erred": self.erred, "elapsed": round(elapsed, 3),
                    "eta": None if eta is None else round(eta, 3), "rate": round(rate, 1),
                    "workers": len(self.lanes), "busy": min(len(self.running),
                                                             max(len(self.lanes), 1)),
                    "status": status, "run": run.number, "cluster_dashboard": run.link}

    def eta(self, now: float) -> float | None:
        left = {g: c.total - c.done - c.running - c.erred for g, c in self.groups.items()}
        ages = [(g, now - t) for t, g in list(self.running.values())[:1000]]
        return self.durations.remaining(left, max(len(self.lanes), 1), ages)

    def _rate(self, now: float) -> float:
        """Tasks per second over the last couple of seconds."""
        rates = self._rates
        if len(rates) < 2:
            return 0.0
        recent = [(t, done) for t, done in rates if now - t <= 3.0] or [rates[-1]]
        t, done = recent[0]
        dt = now - t
        return (self.done - done) / dt if dt > 0 else 0.0
