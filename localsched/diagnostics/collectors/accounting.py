"""Worker-seconds booked once: one timeline per worker, cut into activities.

A computation that ran ``wall`` seconds on ``workers`` workers has
``wall × workers`` worker-seconds to explain.  Each worker's timeline from
the computation's start to its finish is cut into consecutive pieces, so
every instant belongs to exactly one activity:

- a task's own life ``[start, end]`` (its ``thread-cpu``,
  ``thread-noncpu`` and metered labels: ``FineMetrics`` splits it);
- before the first task of a batch: ``idle`` (waiting for work), then on
  processes ``transfer`` (the inputs on their way, after the caller pickled
  them) or ``start-up`` (the worker process was not running yet: its first
  batch ever), then ``start-up`` again while decoding the batch imported
  modules (a function pickled by reference imports its module), then
  ``deserialize`` (received or imported until the task starts); on
  threads ``hand-off`` from the batch's start to its first task;
- between two tasks of a batch: ``hand-off`` (storing results, handing
  records over), of which a worker process's pickling of results is
  ``serialize``, split evenly among the results it carried;
- after a worker's last task: its last hand-offs, then ``idle``.

A worker that ran nothing is ``idle`` throughout.  Caller-side costs (the
scheduler's CPU, pickling inputs in the caller) are not worker-seconds:
``FineMetrics`` books them in ``caller-seconds``.

``gaps`` returns the pieces between tasks; with the tasks' own lives they
add up to ``(finished - started) × workers`` by construction:

>>> tasks = [("a", 1.0, 2.0, 7, None), ("b", 2.5, 3.0, 7, None)]
>>> pieces = gaps(tasks, [], 0.0, 4.0, workers=2)
>>> [(p.key, p.activity, p.start, p.stop) for p in pieces if p.worker_id == 7]
[(None, 'hand-off', 0.0, 1.0), (None, 'hand-off', 2.0, 2.5), (None, 'idle', 3.0, 4.0)]
>>> sum(p.stop - p.start for p in pieces) + 1.0 + 0.5
8.0
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Piece", "BatchStart", "gaps", "clip_tasks", "shares"]


class Piece(NamedTuple):
    """A stretch of one worker's timeline outside its tasks."""

    worker_id: object
    key: object  # the task it serves (None: the worker's own)
    activity: str
    start: float
    stop: float


class BatchStart(NamedTuple):
    """What a worker said of a batch at its first task: when the batch
    started running, and on processes when its inputs were pickled in the
    caller (``sent``), received in the worker (``received``), whether
    this was the process's first batch ever (``fresh``), and until when
    decoding it imported modules (``imported``: start-up, not travel)."""

    started: float
    sent: float | None = None
    received: float | None = None
    fresh: bool = False
    imported: float | None = None


def _start_end(task: tuple) -> tuple:
    _key, start, end, *_ = task
    return start, end


def clip_tasks(tasks: list, started: float, finished: float) -> list:
    """``(key, start, end, worker_id, batch)`` per task, clipped to the
    computation and, per worker, to after the previous task's end (a worker
    runs one task at a time; clocks may disagree by microseconds)."""
    out = []
    last: dict = {}
    for key, t0, t1, wid, batch in sorted(tasks, key=_start_end):
        lo = max(t0, started, last.get(wid, started))
        hi = min(max(t1, lo), finished)
        lo = min(lo, hi)
        last[wid] = hi
        out.append((key, lo, hi, wid, batch))
    return out


def gaps(tasks: list, handoffs: list, started: float, finished: float,
         workers: int) -> list:
    """The pieces of every worker's timeline between its tasks.

    ``tasks``: ``(key, start, end, worker_id, batch)``, already clipped
    (``clip_tasks``); ``batch`` is a :class:`BatchStart` for the first task
    of a batch, else None.  ``handoffs``: ``(worker_id, keys, start,
    pickling seconds, stop)`` per hand-off of results from a worker
    process.  ``workers``: how many workers the computation had (workers
    that ran nothing are idle throughout).
    """
    per_worker: dict = {}
    for task in tasks:
        _key, _start, _end, worker_id, _batch = task
        per_worker.setdefault(worker_id, []).append(task)
    sends: dict = {}
    for wid, keys, start, dumped, stop in handoffs:
        sends.setdefault(wid, []).append((start, dumped, stop, keys))
    out: list = []
    for wid, mine in per_worker.items():
        own_sends = sorted(sends.get(wid, ()))
        prev = started
        for key, t0, _t1, _wid, batch in mine:
            _fill(out, wid, prev, t0, _before(key, prev, t0, batch), own_sends)
            prev = _t1
        _fill(out, wid, prev, finished, [(None, "idle", prev, finished)], own_sends)
    for _ in range(max(0, workers - len(per_worker))):
        if finished > started:
            out.append(Piece(None, None, "idle", started, finished))
    return out


def _before(key, a: float, b: float, batch: BatchStart | None) -> list:
    """The default pieces of the gap ``[a, b]`` before a task."""
    if batch is None:
        return [(None, "hand-off", a, b)]

    def at(t):
        return a if t is None else min(max(t, a), b)

    if batch.received is None:  # threads (or sync): waited for work, then the batch began
        s = at(batch.started)
        return [(None, "idle", a, s), (None, "hand-off", s, b)]
    received = at(batch.received)
    # (modules imported while decoding the batch: the worker starting up)
    decoded = received if batch.imported is None else at(batch.imported)
    if batch.fresh:
        return [(key, "start-up", a, decoded), (key, "deserialize", decoded, b)]
    sent = at(batch.sent)
    return [(None, "idle", a, sent), (key, "transfer", sent, received),
            (key, "start-up", received, decoded), (key, "deserialize", decoded, b)]


def _fill(out: list, wid, a: float, b: float, default: list, sends: list) -> None:
    """Append the pieces of ``[a, b]``: ``default`` with the worker's
    result hand-offs laid over it (pickling as ``serialize``, split evenly
    among the results carried; the rest of the hand-off as ``hand-off``)."""
    if b <= a:
        return
    over = []
    for start, dumped, stop, keys in sends:
        if stop <= a or start >= b:
            continue
        s, e = max(start, a), min(stop, b)
        d = min(max(start + dumped, s), e)
        n = max(1, len(keys))
        step = (d - s) / n
        for j, k in enumerate(keys):
            over.append((k, "serialize", s + j * step, s + (j + 1) * step))
        over.append((None, "hand-off", d, e))
    pieces = default
    for k, name, s, e in over:
        if e <= s:
            continue
        cut = []
        for pk, pname, ps, pe in pieces:
            if pe <= s or ps >= e:
                cut.append((pk, pname, ps, pe))
                continue
            if ps < s:
                cut.append((pk, pname, ps, s))
            if pe > e:
                cut.append((pk, pname, e, pe))
        cut.append((k, name, s, e))
        pieces = cut
    for k, name, s, e in sorted(pieces, key=lambda p: p[2]):
        if e > s:
            out.append(Piece(wid, k, name, s, e))


def shares(metrics) -> tuple[list, list]:
    """The accounting of a fine-metrics mapping ``(span, group, activity,
    unit) -> value``: ``(worker rows, caller rows)``; worker rows are
    ``(activity, worker-seconds, share of all worker-seconds)``, most first,
    shares summing to 1; caller rows ``(activity, caller-seconds)``.

    >>> rows, caller = shares({((), 'x', 'thread-cpu', 'seconds'): 3.0,
    ...                        ((), None, 'idle', 'seconds'): 1.0,
    ...                        ((), None, 'scheduler', 'caller-seconds'): 0.5})
    >>> rows, caller
    ([('thread-cpu', 3.0, 0.75), ('idle', 1.0, 0.25)], [('scheduler', 0.5)])
    """
    worker: dict = {}
    caller: dict = {}
    for (_span, _group, activity, unit), value in metrics.items():
        if unit == "seconds":
            worker[activity] = worker.get(activity, 0.0) + float(value)
        elif unit == "caller-seconds":
            caller[activity] = caller.get(activity, 0.0) + float(value)
    total = sum(worker.values())
    rows = [(a, v, v / total if total > 0 else 0.0)
            for a, v in sorted(worker.items(), key=lambda kv: (-kv[1], kv[0]))]
    return rows, sorted(caller.items(), key=lambda kv: (-kv[1], kv[0]))
