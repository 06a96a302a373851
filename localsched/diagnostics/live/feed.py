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
from collections import Counter, deque
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from ...utils import key_split
from ..collectors.eta import GroupDurations
from ..reporting.naming import printable
from .bins import merge_tiny
from .findings import FindingsCache
from .recorder import Recorder, RunLog
from .resource_probe import Resources

__all__ = ["Feed", "GroupCounts"]

#: Rectangles one update adds at most: tiny tasks are merged into wider
#: time bins until they fit (the browser never receives a burst of thousands,
#: and the server thread's Python work per update stays bounded).
MAX_NEW_RECTS = 120
#: A task shorter than the run's elapsed time (at least a second) over this
#: many "pixels" is tiny: tiny neighbours of one worker and group share one
#: rectangle.
PIXELS = 1500
RESOURCE_INTERVAL = 0.5
#: Seconds between estimates of the time left (counted down between).
ETA_EVERY = 0.5
#: Running tasks taken from the state per update at most.
MAX_RUNNING = 256
#: Seconds between reads of the state's running tasks (the snapshot costs
#: O(tasks handed to workers), and a Python call per task read): a page
#: redraws its running bars at most twice a second.
RUNNING_EVERY = 0.3
#: Key heads remembered at most (each names its group: dask's carry a token
#: per computation); past this they are forgotten at a run's start.
MAX_HEADS = 50_000
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2",
           "#dbdb8d", "#9edae5", "#393b79", "#637939", "#8c6d31", "#843c39")
FAILED_COLOR = "#d62728"


class GroupCounts:
    """Tasks of one group: total, done, running, erred; ``ended``: done but
    not yet taken in (their records are on their way: ``Feed.pending``);
    bytes held (-1: not measured)."""

    __slots__ = ("total", "done", "running", "erred", "ended", "held", "seconds")

    def __init__(self) -> None:
        self.total = self.done = self.running = self.erred = self.ended = 0
        self.held = -1
        self.seconds = 0.0


def _head(key):
    """What names a key's group: the string of a tuple key, else the key."""
    return key[0] if type(key) is tuple and key else key


class _GroupIds(dict):
    """key head -> group index (``names[i]`` is the group's name); a head
    seen first is split once (``key_split``), so lookups run in C."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list = []
        self._index: dict = {}

    def forget_heads(self) -> None:
        """Forget the heads seen (the group names and their indexes stay)."""
        self.clear()

    def __missing__(self, head) -> int:
        name = printable(key_split(head))
        i = self._index.get(name)
        if i is None:
            i = self._index[name] = len(self.names)
            self.names.append(name)
        self[head] = i
        return i


_key, _start, _end, _worker = (itemgetter(i) for i in range(4))


class _Ended(NamedTuple):
    """Finished tasks of a run, as columns: keys, starts and ends (numpy),
    worker ids; ``records``: the recorder's own tuples when it measured
    sizes (else None)."""

    keys: list
    starts: np.ndarray
    ends: np.ndarray
    worker_ids: list
    records: list | None


def _ended(ends, start: int, stop: int) -> _Ended:
    """Records ``start`` to ``stop`` of a ``RunLog.ends`` as columns: of the
    run's own ``TaskRecords`` read as columns (its tuples would be built in
    Python, ~1 µs a task), of the recorder's own list taken apart in C."""
    columns = getattr(ends, "columns", None)
    if columns is not None:
        keys, starts, stops, worker_ids = columns(start, stop)
        n = len(keys)
        return _Ended(keys, np.fromiter(starts, float, n), np.fromiter(stops, float, n),
                      worker_ids, None)
    new = ends[start:stop]
    keys, starts, stops, worker_ids = _columns(new)
    return _Ended(keys, starts, stops, worker_ids, new)


def _columns(ends: list) -> tuple:
    """keys, starts, ends (numpy), worker ids of a slice of ``RunLog.ends``."""
    n = len(ends)
    return (list(map(_key, ends)), np.fromiter(map(_start, ends), float, n),
            np.fromiter(map(_end, ends), float, n), list(map(_worker, ends)))


#: Distinct workers up to which lanes are found by comparing numpy arrays
#: (one pass per worker) rather than a dict lookup per task.
FEW_WORKERS = 16


def _all_tuples(keys: list) -> bool:
    """Whether every key is a tuple (checked in C): then a key's head is
    ``key[0]``, taken with ``itemgetter`` rather than Python code (an empty
    tuple raises IndexError there, and the caller falls back)."""
    return bool(keys) and set(map(type, keys)) == {tuple}


def _head_counts(keys: list) -> tuple:
    """``(all keys are tuples, Counter of what names each key's group)``.
    Counted first as if every key were a tuple (one pass in C): that is
    right unless a key is not a tuple, which then shows as a head that is
    not a string of two or more characters (a string key's ``[0]`` is one
    character, an int key raises): only then are the keys looked at again."""
    try:
        counts = Counter(map(_key, keys))
    except (TypeError, IndexError, KeyError):
        counts = None
    if counts is not None and all(type(h) is str and len(h) > 1 for h in counts):
        return bool(keys), counts
    tuples = _all_tuples(keys)
    try:
        return tuples, Counter(_heads(keys, tuples))
    except IndexError:  # (an empty tuple key)
        return False, Counter(_heads(keys, False))


def _heads(keys, tuples: bool):
    """An iterator of what names each key's group (see ``_head``)."""
    if tuples:
        return map(_key, keys)
    return (k[0] if k.__class__ is tuple and k else k for k in keys)


class Feed:
    """Derived state of the current (or last) computation; see the module docstring."""

    def __init__(self, recorder: Recorder, interval: float = 0.1, clock=time.time):
        self.recorder = recorder
        self.interval = interval
        self.clock = clock
        self.lock = threading.RLock()
        self._last_update = -1.0
        self._gid = _GroupIds()
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
        self._resource_probe: Resources | None = None
        self._last_resource = -1.0
        self._rates: deque = deque(maxlen=64)  # (when, done) of the run shown by progress()
        self._rate_run: RunLog | None = None
        self.run: RunLog | None = None
        self.run_rect_start = 0
        self._reset_run(None)
        #: Each finished run's findings, computed once off the event loop
        #: and shared by every page (``findings.FindingsCache``).
        self.findings = FindingsCache()

    # -- per run -----------------------------------------------------------

    def _reset_run(self, run: RunLog | None) -> None:
        self.run = run
        self.groups: dict = {}  # group name -> GroupCounts
        self._counts: list = []  # GroupCounts by group index (self._gid)
        self.running: dict = {}  # key -> (start or first seen, group)
        self.lanes: dict = {}  # worker id -> lane index
        self.durations = GroupDurations()
        self.done = 0
        self.erred = 0
        #: key -> its GroupCounts: tasks that ended whose records are on
        #: their way (read by ``_take_ended``, dropped as they are taken in).
        self.pending: dict = {}
        self._ends_seen = 0
        self._failed_seen = False
        self._held_keys: dict = {}
        self._running_read = -1.0
        self._eta: tuple | None = None  # (run, when, seconds) of the last estimate
        #: Where this run's rectangles start in ``rects`` (absolute index).
        self.run_rect_start = self.rect_base + len(self.rects)
        if run is None:
            self._tuple_keys = False
            return
        # A run whose keys are all tuples (dask collections' are) has its
        # groups found in C: key[0], then a dict lookup per key.
        self._tuple_keys, totals = _head_counts(run.keys)
        gid = self._gid
        for head, total in totals.items():
            self._counts_of(gid[head]).total += total

    def _counts_of(self, gid: int) -> GroupCounts:
        """The counts of group index ``gid`` in this run (made on first use)."""
        counts = self._counts
        while len(counts) <= gid:
            counts.append(None)
        c = counts[gid]
        if c is None:
            name = self._gid.names[gid]
            c = counts[gid] = self.groups[name] = GroupCounts()
            self.color(name)
        return c

    def group(self, key) -> str:
        return self._gid.names[self._gid[_head(key)]]

    def color(self, group: str) -> str:
        c = self.colors.get(group)
        if c is None:
            c = self.colors[group] = PALETTE[len(self.colors) % len(PALETTE)]
        return c

    def tasks_recorded(self) -> int:
        """Tasks finished over the dashboard's lifetime, including the
        current run's not yet taken in (read without the lock: lengths of
        append-only lists).  What a page's CPU budget grows with: it must
        grow as tasks finish, before the update that takes them in."""
        pending = 0
        runs = self.recorder.runs
        if runs:
            latest = runs[-1]
            pending = len(latest.ends) - self._consumed.get(latest.number, 0)
        return self.completed_total + max(pending, 0)

    def active(self, within: float = 0.0) -> bool:
        """Whether a computation is being recorded, or ended ``within``
        seconds ago."""
        runs = self.recorder.runs
        if not runs:
            return False
        finished = runs[-1].finished
        return finished is None or self.clock() - finished < within

    def settled(self) -> bool:
        """Whether the latest computation has finished and everything it
        recorded has been taken in (or nothing was ever recorded)."""
        runs = self.recorder.runs
        if not runs:
            return True
        latest = runs[-1]
        return (latest.finished is not None and self._ends_seen >= len(latest.ends)
                and latest is self.run and self._failed_seen)

    # -- the pass ----------------------------------------------------------------

    def update(self, force: bool = False) -> None:
        """Take in what the hooks recorded since the last update (at most
        once per ``interval`` unless ``force``)."""
        with self.lock:
            now = self.clock()
            if not force and now - self._last_update < self.interval * 0.8:
                return
            self._last_update = now
            runs = self.recorder.runs
            if not runs:
                return
            latest = runs[-1]
            if latest is not self.run:
                if self.run is not None:
                    self._take_in(self.run, now)  # its last tasks count too
                for log in runs[-8:-1]:  # runs that came and went between updates
                    if log is not self.run:
                        self._tally(log)
                self._forget(runs[0].number)
                self._reset_run(latest)
            self._take_in(latest, now)

    def _forget(self, oldest: int) -> None:
        """Drop what is kept per run of the runs the recorder forgot (before
        run number ``oldest``), and the key heads seen when they pile up
        (dask's carry a token per computation): a dashboard left up keeps
        bounded state whatever it has recorded."""
        consumed = self._consumed
        for k in [k for k in consumed if (k[1] if type(k) is tuple else k) < oldest]:
            del consumed[k]
        if len(self._gid) > MAX_HEADS:
            self._gid.forget_heads()

    def _tally(self, log: RunLog) -> None:
        """Lifetime counters only, for a run that is not shown."""
        seen = self._consumed.get(log.number, 0)
        new = _ended(log.ends, seen, len(log.ends))
        if new.keys:
            self._consumed[log.number] = seen + len(new.keys)
            self._count_lifetime(self._gids(new.keys, _all_tuples(new.keys)),
                                 new.ends - new.starts, len(new.keys))
        self._count_finish(log)

    def _count_lifetime(self, gids, durations, n: int) -> None:
        self.completed_total += n
        seconds = np.bincount(gids, weights=durations)
        names = self._gid.names
        for g in np.flatnonzero(seconds):
            name = names[g]
            self.compute_seconds[name] = self.compute_seconds.get(name, 0.0) + seconds[g]

    def _count_finish(self, log: RunLog) -> None:
        if log.finished is not None and ("f", log.number) not in self._consumed:
            self._consumed["f", log.number] = True
            self.failed_total += len(log.failed)
            self.runs_total += 1

    def _gids(self, keys: list, tuples: bool = False):
        """Group index (numpy) of each key.  ``tuples``: the keys are known
        to be tuples (a run's whose keys all are)."""
        look, n = self._gid.__getitem__, len(keys)
        try:
            return np.fromiter(map(look, _heads(keys, tuples)), np.int64, n)
        except (IndexError, TypeError):  # (not a tuple after all, or an empty one)
            return np.fromiter(map(look, _heads(keys, False)), np.int64, n)

    def _take_in(self, run: RunLog, now: float) -> None:
        n_ends = len(run.ends)
        new = _ended(run.ends, self._ends_seen, n_ends)
        self._ends_seen = n_ends
        self._consumed[run.number] = n_ends
        if new.keys:
            self._take_ends(run, new, now)
        self._take_running(run, now, take_ended=True)
        if run.finished is not None and not self._failed_seen:
            self._failed_seen = True
            self._take_failures(run)
            self._count_finish(run)
        if run.finished is None and self.done:
            self._estimate(now)

    def _take_ends(self, run: RunLog, new: _Ended, now: float) -> None:
        """Finished tasks, counted with numpy: no Python code runs per task
        (the server thread shares the GIL with the scheduler's): a few passes
        of C over the records (start, end, worker, group), then numpy."""
        n, starts, ends = len(new.keys), new.starts, new.ends
        # (a finished task is one of the run's: its key is a tuple if all are)
        gids = self._gids(new.keys, self._tuple_keys)
        durations = ends - starts
        self._count_lifetime(gids, durations, n)
        done = np.bincount(gids)
        seconds = np.bincount(gids, weights=durations)
        for g in np.flatnonzero(done):
            c = self._counts_of(int(g))
            c.done += int(done[g])
            c.seconds += float(seconds[g])
            self.durations.add_total(self._gid.names[g], float(seconds[g]), int(done[g]))
        self.done += n
        if self.pending:
            self._drop_pending(new.keys)
        lane = self._lanes(new.worker_ids)
        if run.measured and new.records is not None:
            self._take_sizes(new.records)
        self._add_rects(new.keys, starts, ends, lane, gids, now - run.started)

    def _lanes(self, worker_ids: list):
        """Each record's lane (numpy): its worker's, numbered as first seen."""
        lanes, n = self.lanes, len(worker_ids)
        if len(lanes) <= FEW_WORKERS:
            try:  # (thread idents and pids: int64, compared in numpy)
                wids = np.array(worker_ids, np.int64)
            except (TypeError, ValueError, OverflowError):
                pass
            else:
                lane = np.full(n, -1, np.int64)
                for w, i in lanes.items():
                    if type(w) is int:
                        lane[wids == w] = i
                unknown = lane < 0
                # (new workers in the order first seen: a pass of numpy per
                # worker, never a Python object per record)
                while unknown.any() and len(lanes) <= FEW_WORKERS:
                    w = int(wids[int(np.argmax(unknown))])
                    lanes[w] = len(lanes)
                    mine = wids == w
                    lane[mine] = lanes[w]
                    unknown &= ~mine
                if not unknown.any():
                    return lane
        for w in dict.fromkeys(worker_ids):  # (in C; in the order first seen)
            if w not in lanes:
                lanes[w] = len(lanes)
        return np.fromiter(map(lanes.__getitem__, worker_ids), np.int64, n)

    def _take_sizes(self, new: list) -> None:
        held, counts_of, gid = self._held_keys, self._counts_of, self._gid
        for key, _s, _e, _w, nbytes, freed in new:
            if nbytes < 0:
                continue
            c = counts_of(gid[_head(key)])
            c.held = max(c.held, 0) + nbytes
            held[key] = (c, nbytes)
            for k in freed:
                gone = held.pop(k, None)
                if gone is not None:
                    gone[0].held -= gone[1]

    def _drop_pending(self, keys: list) -> None:
        """Tasks just taken in are no longer pending."""
        pop = self.pending.pop
        for key in keys:
            c = pop(key, None)
            if c is not None:
                c.ended -= 1

    def _take_ended(self, ended: list) -> None:
        """The tasks that ended whose records are on their way, counted
        done by their groups and by the run until the records come.  Only a
        take-in (``_take_in``) reads them, so the strip and the groups, drawn
        from one take-in, agree; a record cannot already have been taken in:
        the task read as running after the take-in."""
        for c in self.pending.values():
            c.ended = 0
        pending, gid, counts_of = {}, self._gid, self._counts_of
        for key in ended:
            c = pending[key] = counts_of(gid[_head(key)])
            c.ended += 1
        self.pending = pending

    def _take_running(self, run: RunLog, now: float, take_ended: bool = False) -> None:
        """The tasks running now (and, with ``take_ended``, those ended
        whose records are on their way: ``_take_ended``):
        ``RunLog.at_work`` (a snapshot of a few keys) every RUNNING_EVERY seconds -- at
        ten updates a second, reading it each time cost more than all the
        rest of an update; a task first seen running is dated by its start
        when known (dask's schedulers report starts), else by now.  The dict
        is replaced, never changed in place: a page that drew it knows by
        its identity whether anything changed."""
        before = self.running
        if now - self._running_read < RUNNING_EVERY and run.finished is None:
            return
        self._running_read = now
        keys, ended = run.at_work()
        if keys is None:
            return
        if take_ended:
            self._take_ended(ended)
        running = {}
        group = self.group
        starts = run.dask_starts
        for key in keys[:MAX_RUNNING]:
            seen = before.get(key)
            running[key] = seen if seen is not None else (starts.get(key, now), group(key))
        self._count_running(running)
        self.running = running

    def _count_running(self, running: dict) -> None:
        for c in self.groups.values():
            c.running = 0
        for _t, g in running.values():
            self.groups[g].running += 1

    def _take_failures(self, run: RunLog) -> None:
        self.erred = len(run.failed)
        rects = []
        for key, start, end, wid, error in run.failed:
            c = self._counts_of(self._gid[_head(key)])
            c.erred += 1
            if wid not in self.lanes:
                self.lanes[wid] = len(self.lanes)
            rects.append((self.lanes[wid], start, end, self.group(key),
                          printable(f"{key} failed: {error}"), 1, FAILED_COLOR))
        # The rest stopped with the computation.
        for c in self.groups.values():
            c.running = 0
        self.running = {}
        self._append_rects(rects)

    def _add_rects(self, keys: list, starts, ends, lane, gids, elapsed: float) -> None:
        """Rectangles for newly finished tasks: a task at least a "pixel" long
        has its own; shorter ones share one per worker, group and pixel-wide
        time bin; bins widen until at most MAX_NEW_RECTS remain."""
        pixel = max(elapsed, 1.0) / PIXELS
        big = np.flatnonzero(ends - starts >= pixel)
        if len(big) > MAX_NEW_RECTS // 2:
            big = big[:0]
        tiny = np.ones(len(keys), bool)
        tiny[big] = False
        names, color = self._gid.names, self.color
        out = [(int(lane[i]), float(starts[i]), float(ends[i]), names[gids[i]], printable(keys[i]),
                1, color(names[gids[i]])) for i in big]
        idx = np.flatnonzero(tiny)
        width = pixel
        while len(idx):
            merged = merge_tiny(idx, starts, ends, lane, gids, width, MAX_NEW_RECTS - len(out))
            if merged is None:
                width *= 4
                continue
            at, lo, hi, count = merged
            groups = [names[g] for g in gids[at].tolist()]
            out.extend((ln, a, b, g, printable(keys[i]) if n == 1 else f"{n} tasks of {g}",
                        n, color(g))
                       for ln, a, b, g, n, i in zip(lane[at].tolist(), lo, hi, groups, count,
                                                    at.tolist(), strict=True))
            break
        self._append_rects(out)

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
                self._resource_probe = Resources()
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
        """The numbers of ``/json/progress.json`` and of the summary strip,
        from the same snapshot as progress per group: the run taken in last
        (``update``), its tasks done and failed as taken in then -- so the
        strip and the groups agree whenever both are drawn from one update
        (a run not yet taken in shows once an update takes it in; before
        the first update, the latest run's lengths).  What ticks between
        updates: the elapsed time, the running tasks (read every
        RUNNING_EVERY), the ETA the last take-in estimated, counted down.
        ``eta_note`` says why there is no ETA yet."""
        with self.lock:
            runs = self.recorder.runs
            now = self.clock()
            if not runs:
                return {"done": 0, "total": 0, "running": 0, "erred": 0, "elapsed": 0.0,
                        "eta": None, "eta_note": None, "rate": 0.0, "workers": 0, "busy": 0,
                        "status": "idle", "run": 0, "cluster_dashboard": None}
            shown = self.run is not None
            run: RunLog = self.run if self.run is not None else runs[-1]
            if shown:
                self._take_running(run, now)
                done, erred = self.done, self.erred
                if run.finished is None:  # (tasks ended whose records are on their way)
                    done = min(done + len(self.pending), len(run.keys) or done)
            else:
                done, erred = len(run.ends), 0
            total = len(run.keys) or max(done + erred, 1)
            end = run.finished if run.finished is not None else now
            elapsed = max(end - run.started, 0.0)
            running = len(self.running) if shown and run.finished is None else 0
            workers = run.workers() or (len(self.lanes) if shown else 0)
            note = None
            # (finished once the snapshot has taken in its end: never "finished"
            # beside counts that are not yet the run's last)
            if run.finished is not None and (self._failed_seen or not shown):
                status = "errored" if run.errored else "finished"
                eta: float | None = 0.0 if not run.errored else None
                rate = done / elapsed if elapsed > 0 else 0.0
                running = 0
            else:
                status = "running"
                eta = self.eta(now) if shown else None
                rate = self._rate(run, now, done)
                if eta is None:
                    note = ("after the first tasks finish" if not done
                            else "estimating from the tasks finished")
            busy = min(running, workers) if workers else running
            return {"done": done, "total": total, "running": running, "erred": erred,
                    "elapsed": round(elapsed, 3),
                    "eta": None if eta is None else round(eta, 3), "eta_note": note,
                    "rate": round(rate, 1), "workers": max(workers, busy), "busy": busy,
                    "status": status, "run": run.number, "cluster_dashboard": run.link}

    def eta(self, now: float) -> float | None:
        """Seconds still to run: the last estimate (made when tasks were
        taken in, from per-group mean durations), counted down since."""
        cached = self._eta
        if cached is None or cached[0] is not self.run or cached[2] is None:
            return None
        return max(cached[2] - (now - cached[1]), 0.0)

    def _estimate(self, now: float) -> None:
        """Estimate the time left (per-group mean durations of what is left)
        at most every ETA_EVERY seconds: it walks the groups and every
        running task with a Python call each, and the page shows it in
        whole seconds."""
        cached = self._eta
        if cached is not None and cached[0] is self.run and now - cached[1] < ETA_EVERY:
            return
        left = {g: c.total - c.done - c.ended - c.running - c.erred
                for g, c in self.groups.items()}
        # (a generator: hundreds of tuples alive at once would bring the
        # garbage collector's next pass nearer, which this thread then pays)
        ages = ((g, now - t) for t, g in self.running.values())
        eta = self.durations.remaining(left, max(len(self.lanes), 1), ages)
        self._eta = (self.run, now, eta)

    def _rate(self, run: RunLog, now: float, done: int) -> float:
        """Tasks per second over the last 3 seconds (from the counts given,
        sampled at most every 50 ms, and the run's start with none done),
        or since the look before, when none was that recent: a look after a
        long first batch or a quiet spell reads its rate, not 0.0)."""
        rates = self._rates
        if self._rate_run is not run:
            self._rate_run = run
            rates.clear()
            if run.started < now:
                rates.append((run.started, 0))
        if not rates or now - rates[-1][0] >= 0.05:
            rates.append((now, done))
        if not rates:
            return 0.0
        recent = [(t, d) for t, d in rates if now - t <= 3.0]  # (else the look before them)
        t, d = recent[0] if len(recent) > 1 or len(recent) == len(rates) else rates[~len(recent)]
        dt = now - t
        return (done - d) / dt if dt > 0 else 0.0
