"""ResourceProfiler: memory and CPU of this process and its children over time.

A background *thread* (not a tracker process: nothing to guard with
``if __name__ == "__main__"`` under the spawn start method, and nothing that
could end up measuring itself) takes a sample every ``dt`` seconds:

    timer()  ->  ResourceData(time, mem, cpu)  ->  results
                      ^
    _ProcessTree: psutil.Process per pid, this process + descendants

One psutil.Process object is kept per pid across samples, because
``cpu_percent()`` reports the CPU used since the previous call *on the same
object*; a fresh object would always report 0.

Sampling runs while anyone needs it, counted by ``_users``: the ``with``
block is one user, every running computation (``_start`` .. ``_finish``) is
another.  So a profiler used as a ``with`` block samples for the whole block,
also between computations, and one registered with ``register()`` samples
only while a computation runs.  However they overlap, there is at most one
sampler thread.

A process forked while sampling runs (a fork worker, a script's
``os.fork()``) does not sample for its parent: in the child the profiler
has stopped (``_after_fork_in_child``).

Samples reach ``results`` when sampling stops: at the end of the ``with``
block, or of each computation when registered -- as dask's profiler, whose
tracker process hands its samples over only then.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable
from timeit import default_timer

import psutil

from ...callbacks import Callback
from ...system import platform as _platform
from ...system.forking import renew_in_child
from ...view import state_view
from .collector import Collector
from .records import ResourceData, WorkerResourceData

__all__ = ["ResourceProfiler"]

#: Name of the sampler thread (tests look for it to check it is gone).
THREAD_NAME = "localsched-resource-sampler"

# A process can vanish, turn zombie or hide its details between listing
# and measuring it; ZombieProcess is a NoSuchProcess.
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied)


class _ProcessTree:
    """This process and its descendants, with psutil handles kept per pid,
    measured as ``platform`` allows (None: the detected one)."""

    def __init__(self, platform: _platform.Platform | None = None):
        self._platform = platform or _platform.Platform.detect()
        self._root = psutil.Process()
        self._known: dict[int, psutil.Process] = {self._root.pid: self._root}

    def measure(self) -> tuple[float, float]:
        """(RSS in MB, CPU percent), summed over the process and its descendants."""
        try:
            children = self._root.children(recursive=True)
        except _GONE:
            children = []
        known = {self._root.pid: self._root}
        for child in children:
            old = self._known.get(child.pid)
            # Process.__eq__ compares pid *and* creation time: a reused pid
            # is a new process and must not inherit the old one's CPU counter.
            known[child.pid] = old if old is not None and old == child else child
        # Children gone since the last sample drop out here.
        self._known = known

        rss = 0
        cpu = 0.0
        alive = []
        for proc in known.values():
            try:
                with proc.oneshot():
                    proc_rss = proc.memory_info().rss
                    proc_cpu = proc.cpu_percent(interval=None)
            except _GONE:
                continue
            alive.append(proc.pid)
            rss += proc_rss
            cpu += proc_cpu
        if self._platform.proc_details:
            try:
                rss = _shared_once(alive, self._platform)
            except (OSError, ValueError):
                pass  # (a process ended meanwhile): the plain sum, this once
        else:
            rss += _held_unmapped()
        return rss / 1e6, cpu


# Shared memory counted once (where /proc tells shared pages apart:
# ``Platform.proc_details``, Linux; elsewhere psutil's RSS sum, plus the
# segments held as handles where no process maps them: macOS's POSIX
# objects, which readers copy out).
# Summing RSS counts a shared page once per process mapping it: the process
# scheduler's workers map the same shared-memory segments
# (localsched/_shm/), so a sum of RSS would grow with every worker
# that reads an input.  Instead, per process:
#
#     RSS - RssShmem (/proc/pid/status)  +  Pss_Shmem (/proc/pid/smaps_rollup)
#
# Pss_Shmem charges each process 1/n of a shared page mapped by n
# processes, so the pages the tree shares add up to one copy each; private
# and file-backed memory stay counted as RSS counts them, as before.  Then
# the segments the tree's processes own that no process maps (results the
# scheduler keeps as handles) are added by their size: no RSS holds them.
# Measured (bench_shm.py): one 8 MB segment mapped by three processes adds
# 8 MB, not 24.


def _held_unmapped() -> int:
    """Bytes of the segments this process holds where no process keeps
    them mapped (``localsched._shm.bytes_held``: POSIX objects, which
    readers copy; the free list), so no RSS counts them."""
    from ..._shm import bytes_held

    return bytes_held()


def _shared_once(pids: list, platform: _platform.Platform) -> int:
    from ..._shm import store as segments

    total = 0
    mapped: set = set()
    for pid in pids:
        rss, rss_shmem, pss_shmem = _platform.proc_memory(pid)
        total += rss - rss_shmem + pss_shmem
        if rss_shmem:
            mapped |= _platform.proc_mapped(pid, segments.PREFIX)
    for name, size in segments.live_segments(pids, platform).items():
        if name not in mapped:
            total += size
    return total


class ResourceProfiler(Callback):
    """Sample memory (MB) and CPU (%) of this process and all its children.

    Samples are taken every ``dt`` seconds by a background thread, plus one
    when sampling starts and one when it stops, so even a short block has two.
    ``mem`` is the resident set size in MB (10**6 bytes) and ``cpu`` the CPU
    percent (100 = one core busy), both summed over this process and all its
    descendants, e.g. process-pool workers.  ``time`` is in epoch seconds from
    ``timer`` (default ``time.time``, the clock of the other profilers).

    In a ``with`` block it samples for the whole block (earlier results are
    cleared on entry); registered globally with ``register()`` or passed as
    ``callbacks=`` it samples only while a computation runs.  The samples
    appear in ``results`` when sampling stops (the block's or the
    computation's end); ``start_time`` and ``end_time`` are when it last
    started and stopped, in ``timeit.default_timer()`` seconds as dask has
    them.  If sampling
    fails (say, the timer raises), leaving the block raises RuntimeError from
    that error; the end of a computation warns instead.

    On a dask.distributed cluster (``localsched.distributed``: its state
    offers ``worker_monitors``), ``per_worker`` gets each worker's CPU and
    memory from its own monitor (:class:`WorkerResourceData`, every 0.5 s,
    fetched when the computation finishes).  A LocalCluster's workers are
    this process's children, so ``results`` counts them already; when the workers run elsewhere (a
    remote scheduler), their samples summed per 0.5 s step join ``results``
    too, so the resource plot shows the cluster, not just this process.

    Parameters
    ----------
    dt : float
        Seconds between samples, > 0.
    timer : callable, keyword-only
        Returns the current time of a sample; inject a fake clock in tests.

    Examples
    --------
    >>> from localsched.local import get_sync
    >>> with ResourceProfiler(dt=0.01) as rprof:
    ...     get_sync({'x': (sum, range(10))}, 'x')
    45
    >>> len(rprof.results) >= 2
    True
    >>> all(r.mem > 0 and r.cpu >= 0 for r in rprof.results)
    True
    >>> sample = rprof.sample()   # one sample now, outside any block too
    >>> sample == rprof.results[-1]
    True

    See Also
    --------
    Profiler, CacheProfiler, localsched.diagnostics.reporting.plots.visualize
    """

    #: The record class of ``results`` (read by the plotting code).
    record_type = ResourceData

    def __init__(self, dt: float = 1, *, timer: Callable[[], float] = time.time):
        if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not dt > 0:
            raise ValueError(
                f"ResourceProfiler dt must be a positive number of seconds, got {dt!r}"
            )
        if not callable(timer):
            raise TypeError(f"ResourceProfiler timer= must be callable, got {timer!r}")
        self._dt = float(dt)
        self._timer = timer

        # Guards _results, _pending, _collecting and _tree: sample() may be
        # called by the sampler thread and by the thread that starts/stops
        # sampling.
        self._sample_lock = threading.Lock()
        self._results: list[ResourceData] = []
        # Samples of the sampling period in progress, published when it stops.
        self._pending: list[ResourceData] = []
        self._collecting = False
        self._tree: _ProcessTree | None = None
        self.start_time: float | None = None
        self.end_time: float | None = None

        # Guards _users, _thread and _stop: computations in several threads
        # and the with block may start and stop sampling concurrently.
        self._run_lock = threading.Lock()
        self._users = 0
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None
        # What made the sampler thread stop early (re-raised when stopping).
        self._failure: BaseException | None = None
        # Whether close() ended the current sampling period early.
        self._closed = False
        # Runs in progress: id(state) -> their start (epoch seconds); at its
        # finish, a cluster run (localsched.distributed) offers its workers'
        # own monitors for that span.
        self._runs_started: dict = {}
        self._per_worker: list = []
        renew_in_child(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: the sampler thread and its samples are the
        parent's.  Fresh locks, no user: leaving a block the parent entered
        does nothing here (``__exit__``); a computation of the child's own
        samples afresh."""
        self._sample_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._users = 0
        self._thread = self._stop = None
        self._pending = []
        self._collecting = False
        self._tree = None
        self._failure = None

    @property
    def dt(self) -> float:
        """Seconds between samples."""
        return self._dt

    # -- sampling ------------------------------------------------------------

    def sample(self) -> ResourceData:
        """Take one sample now and return it; it joins ``results`` at once when
        not sampling, else when sampling stops."""
        with self._sample_lock:
            if self._tree is None:
                self._tree = _ProcessTree()
            t = self._timer()
            mem, cpu = self._tree.measure()
            record = ResourceData(t, mem, cpu)
            (self._pending if self._collecting else self._results).append(record)
        return record

    def _sample_until(self, stop: threading.Event) -> None:
        """The sampler thread: a sample now, one every ``dt``, one when ``stop`` is set.

        The first sample is taken here rather than by the thread that starts
        sampling, so a computation's start does not wait for the process
        listing (milliseconds: psutil reads every /proc entry).
        """
        try:
            self.sample()
            while not stop.wait(self._dt):
                self.sample()
            self.sample()
        except BaseException as exc:  # noqa: B036 -- re-raised by _release
            self._failure = exc

    def _acquire(self) -> None:
        """One more user of sampling; the first starts the sampler thread."""
        with self._run_lock:
            if self._users:
                self._users += 1
                return
            with self._sample_lock:
                # Fresh handles: CPU percent is then measured from this
                # start, not averaged over the idle gap since last time.
                self._tree = None
                self._collecting = True
            self.start_time = default_timer()
            self.end_time = None
            self._closed = False
            self._failure = None
            # Imported here, not first in the sampler thread: a process
            # forked while that thread imports would find the module half
            # made in the child ("partially initialized module").
            from ..._shm import store  # noqa: F401
            stop = threading.Event()
            thread = threading.Thread(
                target=self._sample_until, args=(stop,), name=THREAD_NAME, daemon=True
            )
            thread.start()
            self._stop, self._thread = stop, thread
            self._users = 1

    def _release(self) -> BaseException | None:
        """One user fewer; the last stops the thread, which takes a final sample, and joins it.

        Returns what made the sampler thread fail, if anything.
        """
        with self._run_lock:
            if self._users == 0:
                if self._closed:  # close() already stopped it for every user
                    return None
                raise RuntimeError("ResourceProfiler stopped more often than started")
            self._users -= 1
            if self._users:
                return None
            return self._stop_sampling()

    def _stop_sampling(self) -> BaseException | None:
        """Stop and join the sampler thread, publish its samples (under _run_lock)."""
        stop, thread = self._stop, self._thread
        self._stop = self._thread = None
        assert stop is not None and thread is not None  # (called while sampling)
        stop.set()
        # The thread never takes _run_lock, so joining under it is safe.
        thread.join()
        with self._sample_lock:
            self._results.extend(self._pending)
            self._pending = []
            if self._per_worker:  # a remote cluster's samples may interleave
                self._results.sort(key=lambda r: r.time)
            self._collecting = False
        self.end_time = default_timer()
        failure, self._failure = self._failure, None
        return failure

    def close(self) -> None:
        """Stop sampling now, whoever still uses it (dask's name); idempotent."""
        with self._run_lock:
            if self._users:
                self._users = 0
                self._closed = True
                self._stop_sampling()

    @property
    def running(self) -> bool:
        """Whether the sampler thread is running."""
        return self._thread is not None

    def _is_running(self) -> bool:
        # dask's name for ``running``.
        return self._thread is not None

    # -- the with block and the callbacks --------------------------------------

    def __enter__(self):
        self.clear()
        self._acquire()
        self._block_pid = os.getpid()
        try:
            return super().__enter__()
        except BaseException:
            self._release()
            raise

    def __exit__(self, *args):
        if getattr(self, "_block_pid", None) != os.getpid():
            super().__exit__(*args)  # a forked child leaves its parent's block:
            return  # its sampling stopped at the fork
        try:
            super().__exit__(*args)
        finally:
            failure = self._release()
        if failure is not None:
            raise RuntimeError("ResourceProfiler could not take a sample") from failure

    def _start(self, dsk):
        self._acquire()

    def _start_state(self, dsk, state):
        self._runs_started[id(state)] = time.time()

    def _finish(self, dsk, state, errored):
        started = self._runs_started.pop(id(state), None)
        if started is not None:
            self._fetch_worker_samples(state, started)
        failure = self._release()
        if failure is not None:
            # Warn, don't raise: raising here would fail a computation that
            # succeeded and skip the finish hooks of the other callbacks.
            warnings.warn(
                f"ResourceProfiler could not take a sample: {failure!r}",
                RuntimeWarning,
                stacklevel=2,
            )

    def _fetch_worker_samples(self, state, started: float) -> None:
        """The workers' monitor samples of a cluster run, asked of its state
        (``state.worker_monitors(since, until)``: rows ``(time, worker, mem
        MB, cpu %)`` on this process's clock, and whether some worker runs
        outside this process tree); best effort: a cluster that cannot
        answer leaves a warning, not an error."""
        try:
            monitors = state_view(state).worker_monitors(started - 0.5, time.time() + 0.5)
        except Exception as exc:  # noqa: BLE001 -- diagnostics must not fail the run
            warnings.warn(f"ResourceProfiler could not read the cluster's workers: {exc!r}",
                          RuntimeWarning, stacklevel=3)
            return
        if monitors is not None:  # (None: not a cluster, its workers are sampled here)
            self.add_worker_samples(*monitors)

    def add_worker_samples(self, rows, remote: bool) -> None:
        """Keep cluster workers' samples ``(time, worker, mem MB, cpu %)`` in
        ``per_worker``; when ``remote`` (workers outside this process tree,
        which the samples of ``results`` do not count), their sums per 0.5 s
        step join ``results`` too."""
        records = sorted(WorkerResourceData(*row) for row in rows)
        with self._sample_lock:
            self._per_worker.extend(records)
            if remote:
                steps: dict[float, tuple[float, float]] = {}
                for r in records:
                    step = round(r.time * 2) / 2
                    m, c = steps.get(step, (0.0, 0.0))
                    steps[step] = (m + r.mem, c + r.cpu)
                into = self._pending if self._collecting else self._results
                into.extend(ResourceData(t, m, c) for t, (m, c) in sorted(steps.items()))
                into.sort(key=lambda r: r.time)

    # -- results -----------------------------------------------------------

    @property
    def per_worker(self) -> list:
        """Each cluster worker's samples (``WorkerResourceData``), oldest first (a copy)."""
        with self._sample_lock:
            return sorted(self._per_worker)

    @property
    def results(self) -> list[ResourceData]:
        """The samples of the finished sampling periods, oldest first (a copy)."""
        with self._sample_lock:
            return list(self._results)

    @results.setter
    def results(self, samples) -> None:
        # dask's results is a plain list attribute that callers may replace.
        with self._sample_lock:
            self._results = [ResourceData(*sample) for sample in samples]

    def to_pandas(self):
        """The samples as a pandas DataFrame (``time``, ``mem`` in MB, ``cpu`` in %)."""
        from ..reporting.tables import records_frame

        return records_frame(self.results, ResourceData)

    def clear(self) -> None:
        """Forget all samples."""
        with self._sample_lock:
            self._results = []
            self._pending = []
            self._per_worker = []

    visualize = Collector.visualize
    _plot = Collector._plot

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} dt={self._dt}: {len(self._results)} samples, {state}>"
