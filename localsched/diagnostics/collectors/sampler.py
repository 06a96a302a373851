"""SampleProfiler: a statistical profiler of the code tasks run, per task group.

Every ``interval`` seconds a background thread looks at the call stack of
each thread that is running a task (``sys._current_frames()``) and keeps it
as a :class:`SampleData`: when, which worker, which task group, and the
frames, outermost first.  On the process scheduler a sampler thread inside
each worker process does the same, and its samples travel back with the
task records.  Nothing is done per frame in the hot path: the scheduler only
publishes which task each thread runs (a dict store per task) while a
SampleProfiler listens.

The samples answer "which code took the time, in which group": totals per
function or group, over a time window, and a call tree (``tree()``) that
renders as a flame graph, frames as wide as their seconds.  A sample stands for the time since the
sampler's previous look (its ``seconds``, as pyinstrument keeps
``time_since_last_sample``): the sampler thread needs the GIL to look, so
its real period is longer than ``interval`` while tasks run Python, and a
worker process samples at the smallest interval of all listening
profilers.  A sample taken while a worker is between two tasks of a batch
(handing results over) has group None.

Each profiler keeps only the samples of the computations it watches: the
samples taken while it watches, of tasks of those computations' graphs.

>>> samples = [SampleData(1.0, 7, 'load', (('a.py', 1, 'main'), ('a.py', 9, 'parse')), 0.01),
...            SampleData(1.01, 7, 'load', (('a.py', 1, 'main'), ('a.py', 9, 'parse')), 0.012),
...            SampleData(1.02, 7, 'sum', (('a.py', 1, 'main'),), 0.01)]
>>> totals(samples, by="group")
{'load': 2, 'sum': 1}
>>> totals(samples, by="group", unit="seconds")
{'load': 0.022, 'sum': 0.01}
>>> totals(samples, by="function")[('a.py', 9, 'parse')]
2
>>> t = tree(samples)
>>> t['name'], t['count'], t['seconds'], [c['name'] for c in t['children']]
('all', 3, 0.032, ['main'])
>>> parse = t['children'][0]['children'][0]
>>> parse['name'], parse['count'], parse['seconds']
('parse', 2, 0.022)

The frames of the scheduler itself (thread start-up, the worker loop,
``run_batch``, the task executor, and the caller's frames above a sync
computation) are cut off the top of each stack, so a stack starts at the
task's function.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from ...callbacks import Callback, Needs
from ...system.forking import renew_in_child
from ...utils import key_split
from ...view import state_view
from ...worker.runtime import running_tasks, sample_every
from .records import SampleData
from .stacks import sample_seconds, stack_tree

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SampleProfiler", "totals", "tree", "gil_waits_by_group", "GIL_CONTENDED"]

#: A look that waited longer than this for the GIL counts as contended.
GIL_CONTENDED = 0.001


class SampleProfiler(Callback):
    """Sample the call stacks of running tasks every ``interval`` seconds.

    Use as a ``with`` block (or ``register()``, or ``callbacks=[...]``); a
    sampler thread runs while a computation it watches runs, and is stopped
    (an Event) and joined when the last one finishes.  ``results``: the
    :class:`SampleData` of the computations so far, oldest first; queries:
    :meth:`totals`, :meth:`tree`.  ``timer`` (epoch seconds) stamps the
    samples; tests pass a fake one.

    Works on the sync, thread and process schedulers (on processes, each
    worker samples itself; a foreign ``pool=`` is not sampled).

    >>> from localsched.local import get_sync
    >>> with SampleProfiler(interval=0.01) as sp:
    ...     get_sync({'x': (sum, [1, 2])}, 'x')
    3
    >>> sp.tree()['name']
    'all'
    """

    record_type = SampleData

    def __init__(self, interval: float = 0.01, timer: Callable[[], float] = time.time):
        super().__init__()
        interval = float(interval)
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        self.interval = interval
        # Read by the scheduler once per computation: sample every interval.
        self.needs = Needs(sample=interval)
        self._timer = timer
        # Samples taken here, not yet handed to a computation: (time, thread
        # ident, key, stack, seconds), appended by the sampler thread.
        self._pending: list = []
        self._raw: list = []  # the watched computations' samples, in that layout
        self._built: list = []
        self._lock = threading.Lock()  # guards the thread's start/stop, _live, the build
        self._live: dict = {}  # id() of the states watched now -> when each started
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        # (epoch seconds, seconds the sampler waited for the GIL) of each look
        # that found tasks running (threads; Linux), appended by the thread
        self._looks: list = []
        renew_in_child(self)

    def _after_fork_in_child(self) -> None:
        # (the sampler thread and the computations it watched are the parent's)
        self._lock = threading.Lock()
        self._thread = None
        self._stop = threading.Event()
        self._live = {}
        self._pending = []
        self._looks = []

    # -- the sampler thread ---------------------------------------------------

    def _sample_loop(self, stop: threading.Event) -> None:
        sample_every(self.interval, stop, running_tasks, self._pending.append, {}, self._timer,
                     looks=lambda t, gil: self._looks.append((t, gil)))

    def _start_state(self, dsk: Mapping, state: Mapping) -> None:
        with self._lock:
            self._live[id(state)] = self._timer()
            if self._thread is None:
                from ...system import platform as _platform

                _platform.prepare_thread_cpu_wait()  # (here: see its docstring)
                self._stop = stop = threading.Event()
                self._thread = threading.Thread(target=self._sample_loop, args=(stop,),
                                                name="localsched-sampler", daemon=True)
                self._thread.start()

    def _finish(self, dsk: Mapping, state: Mapping, errored: bool) -> None:
        remote = state_view(state).outcome.samples
        with self._lock:
            # (a computation that failed before its state was built never
            # started: it is not ours to stop)
            started = self._live.pop(id(state), None)
            if started is None:
                return
            if remote:  # taken in this computation's worker processes
                self._raw.extend(s if len(s) > 4 else (*s, None) for s in remote)
            self._take_own(dsk, started)
            if self._live or self._thread is None:
                return
            thread, self._thread = self._thread, None
            self._stop.set()
        thread.join()
        with self._lock:
            if not self._live:
                self._pending.clear()  # (taken after the last finish: nobody's)

    def _take_own(self, dsk: Mapping, started: float) -> None:
        """Move the local samples of one finished computation (taken since
        it started, of its graph's tasks) from ``_pending`` to ``_raw``."""
        pending = self._pending
        n = len(pending)
        taken = pending[:n]
        del pending[:n]  # (in place: the sampler thread appends to this list)
        mine, keep = [], []
        earliest = min(self._live.values(), default=None)
        for sample in taken:
            t, key = sample[0], sample[2]
            if t >= started and (key is None or _in_graph(key, dsk)):
                mine.append(sample)
            elif earliest is not None and t >= earliest:
                keep.append(sample)  # maybe another watched computation's
        self._raw.extend(mine)
        pending[:0] = keep

    # -- reading ----------------------------------------------------------------

    @property
    def results(self) -> list:
        """The samples so far, as :class:`SampleData` (a copy)."""
        with self._lock:
            for t, wid, key, stack, seconds in self._raw[len(self._built):]:
                # (key None: the sample was taken between tasks)
                g = None if key is None else key_split(key)
                self._built.append(SampleData(t, wid, g, stack, seconds))
            return list(self._built)

    @property
    def gil_waits(self) -> list:
        """``(time, seconds)`` of each look the sampler took while tasks ran
        in this process: how long it waited for the GIL first (its lateness
        less its wait for a CPU; Linux only, else empty).  Python code that
        holds the GIL makes nearly every look wait; tasks in NumPy or asleep
        leave it free (``analysis``'s ``gil`` finding reads them)."""
        return list(self._looks)

    def to_pandas(self) -> pd.DataFrame:
        """The samples as a pandas DataFrame (``time``, ``worker_id``,
        ``group``, ``stack``: outermost frame first) plus ``function``, the
        innermost frame's name (None for an empty stack)."""
        from ..reporting.tables import records_frame

        frame = records_frame(self.results, SampleData)
        frame["function"] = [stack[-1][2] if stack else None for stack in frame["stack"]]
        return frame

    def clear(self) -> None:
        """Forget all samples."""
        with self._lock:
            self._raw = []
            self._built = []
            self._looks = []
            if not self._live:
                self._pending.clear()

    def __enter__(self) -> SampleProfiler:
        self.clear()
        return super().__enter__()

    def totals(self, by: str = "function", start: float | None = None,
               stop: float | None = None, unit: str = "count",
               inclusive: bool = False) -> dict:
        """Samples per function or per group; see :func:`totals` (``unit="seconds"``
        sums the time each sample stands for)."""
        return totals(self.results, by=by, start=start, stop=stop, inclusive=inclusive,
                      unit=unit, interval=self.interval)

    def tree(self, group: str | None = None, start: float | None = None,
             stop: float | None = None) -> dict:
        """The call tree of the samples; see :func:`tree`."""
        return tree(self.results, group=group, start=start, stop=stop,
                    interval=self.interval)

    def __repr__(self) -> str:
        return f"<SampleProfiler interval={self.interval}: {len(self._raw)} samples>"


def _window(samples: Iterable[SampleData], start: float | None, stop: float | None,
            group: str | None = None) -> Iterator[SampleData]:
    for s in samples:
        if start is not None and s.time < start:
            continue
        if stop is not None and s.time >= stop:
            continue
        if group is not None and s.group != group:
            continue
        yield s


def totals(samples: list, by: str = "function", start: float | None = None,
           stop: float | None = None, inclusive: bool = False, unit: str = "count",
           interval: float | None = None) -> dict:
    """Count ``samples`` (taken at ``start <= time < stop``) by ``"group"``
    or by ``"function"`` (a ``(filename, first line, name)`` frame), most
    first.  By function, a sample counts for its innermost frame (where the
    time was spent); ``inclusive=True`` counts it once for every function on
    its stack (the time spent in the function and what it called).
    ``unit="seconds"`` sums the seconds each sample stands for instead
    (``stacks.sample_seconds``: ``interval`` for a sample that does not say).
    """
    if by not in ("function", "group"):
        raise ValueError(f"by must be 'function' or 'group', got {by!r}")
    if unit not in ("count", "seconds"):
        raise ValueError(f"unit must be 'count' or 'seconds', got {unit!r}")
    seconds = unit == "seconds"
    chosen = list(_window(samples, start, stop))
    weights = sample_seconds(chosen, interval) if seconds else [1] * len(chosen)
    out: dict = {}
    names: Iterable[Hashable]
    for s, weight in zip(chosen, weights, strict=True):
        if by == "group":
            names = (s.group,)
        elif not s.stack:
            continue
        elif inclusive:
            names = set(s.stack)
        else:
            names = (s.stack[-1],)
        for name in names:
            out[name] = out.get(name, 0) + weight
    if seconds:
        out = {k: round(v, 9) for k, v in out.items()}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _in_graph(key: Hashable, dsk: Mapping) -> bool:
    try:
        return key in dsk
    except TypeError:  # (an unhashable key is in no graph)
        return False


def tree(samples: list, group: str | None = None, start: float | None = None,
         stop: float | None = None, interval: float | None = None) -> dict:
    """The call tree of ``samples`` (of one ``group``, in a time window):
    nested ``{"name", "filename", "line", "count", "seconds", "children"}``
    dicts, the root named ``"all"``; a node's count is the samples whose
    stack passes through it and its seconds the time they stand for
    (``interval`` for a sample that does not say), children most seconds
    first.  A flame graph draws each node as a bar as wide as its seconds,
    on top of its parent.
    """
    # One builder for Python queries and the report's flame graph, which
    # walks without recursion (deep stacks would exceed Python's recursion limit).
    return stack_tree(samples, group=group, start=start, stop=stop, interval=interval)


def gil_waits_by_group(samples: Iterable[SampleData], looks: list) -> dict:
    """``{group: [looks, contended looks, seconds waited for the GIL]}``:
    each sample joined to the look that took it (the latest look at or
    before it; ``SampleProfiler.gil_waits``), contended when the sampler
    waited more than ``GIL_CONTENDED`` for the GIL.

    >>> s = [SampleData(1.0, 7, 'py', (), 0.01), SampleData(2.0, 7, 'py', (), 0.01)]
    >>> gil_waits_by_group(s, [(0.99, 0.004), (1.99, 0.0)])
    {'py': [2, 1, 0.004]}
    """
    from bisect import bisect_right

    looks = sorted(looks)
    times = [t for t, _ in looks]
    out: dict = {}
    for sample in samples:
        if sample.group is None:
            continue
        i = bisect_right(times, sample.time) - 1
        if i < 0:
            continue
        wait = looks[i][1]
        entry = out.setdefault(sample.group, [0, 0, 0.0])
        entry[0] += 1
        entry[1] += wait > GIL_CONTENDED
        entry[2] += wait
    return out
