"""Fine metrics from inside a task: ``meter``, ``digest_metric``, and ``span``.

A task can say where its own time went, and count what it handled::

    from localsched import metrics

    def load(path):
        with metrics.meter("I/O"):             # its wall time is booked as "I/O"
            raw = open(path, "rb").read()
        metrics.digest_metric("read", len(raw), "bytes")
        return parse(raw)                      # the rest: thread-cpu / thread-noncpu

and a caller can name a stretch of work, so that the metrics of every task
run inside it are broken down by that name::

    with localsched.span("load"):
        data = localsched.get(dsk, keys)

What gets recorded lands in
:class:`localsched.diagnostics.FineMetrics` (``(span, group, activity, unit)
-> value``).  A metered block's wall time is booked under its label
*instead of* the task's ``thread-cpu``/``thread-noncpu``, so a task's
activities still add up to its wall time; nested meters book each stretch
to the innermost label.

Outside a task that a computation with ``FineMetrics`` active is running
(plain code, or a computation nobody measures), ``meter`` just runs the
block and ``digest_metric`` does nothing: library code can meter itself
unconditionally, and pays about a microsecond per call when nobody listens.

>>> with meter("I/O"):           # outside a task: runs, records nothing
...     x = sum(range(10))
>>> digest_metric("rows", 10, "count")
>>> @meter("decode")
... def decode(b):
...     return b.decode()
>>> decode(b"ok")
'ok'
>>> with span("load"), span("parse"):
...     current_span()
('load', 'parse')
>>> current_span()
()

How it works: the scheduler measures ``thread_time`` per task only while a
``FineMetrics`` listens, and installs a per-thread list for the task that
``meter``/``digest_metric`` append plain tuples to (``_sink``); the
worker ships those tuples with the task's record.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["meter", "digest_metric", "span", "current_span", "nbytes", "sizeof"]

# The span names of the caller, outermost first.  A context variable: it
# follows ``with`` blocks, threads started with a copied context and asyncio
# tasks.  A computation reads it once, when it starts.
_span: contextvars.ContextVar[tuple] = contextvars.ContextVar("localsched_span", default=())

# Per worker thread: ``sink`` is the list the running task's user metrics go
# to (None outside a measured task); ``stack`` the open meters' accumulators
# of nested time.  run_batch / run_inline set ``sink`` per task.
_local = threading.local()


def current_span() -> tuple:
    """The names of the spans the caller is in, outermost first (``()`` outside)."""
    return _span.get()


@contextmanager
def span(name: str) -> Iterator[tuple]:
    """Tag the computations started inside the block with ``name``.

    Spans nest: a computation inside ``span("a")`` and ``span("b")`` is in
    span ``("a", "b")``.  The block yields that tuple.

    >>> with span("etl") as s:
    ...     s
    ('etl',)
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"span name must be a non-empty str, got {name!r}")
    token = _span.set(_span.get() + (name,))
    try:
        yield _span.get()
    finally:
        _span.reset(token)


class meter:
    """Book the wall time of a block (or of each call of a function) under
    ``label``, for the task that runs it.

    Context manager and decorator.  The seconds land in FineMetrics as
    ``(span, group, label, unit)``; the block's CPU and wall time are taken
    out of the task's ``thread-cpu``/``thread-noncpu``.  Nested meters: the
    inner block's time goes to the inner label only.  Outside a measured
    task, it only runs the block.  One meter object may be used by many
    threads and blocks at once (its open blocks live on each thread's own
    stack), e.g. ``IO = meter("I/O")`` at module level.

    >>> with meter("I/O") as m:
    ...     pass
    >>> m.label
    'I/O'
    """

    __slots__ = ("label", "unit")

    def __init__(self, label: str, unit: str = "seconds"):
        if not isinstance(label, str) or not label:
            raise TypeError(f"meter label must be a non-empty str, got {label!r}")
        self.label = label
        self.unit = unit

    def __enter__(self) -> meter:
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        sink = getattr(_local, "sink", None)
        if sink is None:
            stack.append(None)  # not measured: __exit__ only pops it
            return self
        # [wall, cpu of the meters nested inside (booked to them), the sink,
        # start, CPU clock at the start]
        stack.append([0.0, 0.0, sink, time.time(), time.thread_time()])
        return self

    def __exit__(self, *exc) -> None:
        frame = _local.stack.pop()
        if frame is None:
            return
        stop = time.time()
        cpu = time.thread_time() - frame[4]
        start = frame[3]
        wall = stop - start
        stack = _local.stack
        if stack and stack[-1] is not None:  # the enclosing meter books only the rest
            outer = stack[-1]
            outer[0] += wall
            outer[1] += cpu
        # (label, unit, own wall, own cpu, start, stop); a sink replaced
        # meanwhile (a nested computation) still gets its own block
        frame[2].append((self.label, self.unit, max(0.0, wall - frame[0]),
                         max(0.0, cpu - frame[1]), start, stop))

    def __call__(self, func):
        @functools.wraps(func)
        def metered(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return metered


def digest_metric(label: str, value: float, unit: str) -> None:
    """Add ``value`` (in ``unit``: ``"bytes"``, ``"rows"``, ``"dollars"``...)
    under ``label`` for the task that calls it; a no-op outside a measured task.

    >>> digest_metric("rows", 3, "count")  # outside a task: nothing happens
    """
    sink = getattr(_local, "sink", None)
    if sink is not None:
        # (label, unit, value, None, None, None): not seconds of the wall time
        sink.append((label, unit, value, None, None, None))


def nbytes(value) -> int | None:
    """Bytes a result holds: ``cachey.nbytes`` (NumPy arrays, pandas
    objects, anything with ``nbytes``, else ``sys.getsizeof``), the one size
    function behind ``CacheProfiler(metric="nbytes")``.  The scheduler calls
    it where the result lives (in the worker) and sends only the number.

    None when the size cannot be measured: measuring raised (a dead
    ``weakref.proxy``, an ``nbytes`` or ``__sizeof__`` that raises) or gave
    no whole number >= 0, and the type has no ``__sizeof__`` of its own to
    fall back on.  A diagnostic that measures sizes must never fail the
    computation: an unknown size is reported as unknown.

    >>> nbytes(bytearray(100)) >= 100
    True
    >>> nbytes(7) == sys.getsizeof(7)
    True
    >>> class Broken:
    ...     nbytes = property(lambda self: 1 / 0)
    >>> nbytes(Broken()) is None
    True
    """
    kind = type(value)
    if kind in _PLAIN:  # (what cachey measures with sys.getsizeof too)
        return sys.getsizeof(value)
    numpy = sys.modules.get("numpy")
    if numpy is not None and kind is numpy.ndarray and value.dtype.kind != "O":
        return value.nbytes  # (cachey's answer, without its string compares)
    measure = _cachey_nbytes or _find_cachey()
    try:
        size = int(measure(value))
    except Exception:  # noqa: BLE001 -- (cachey reads pandas internals that move)
        size = -1
    if size >= 0:
        return size
    if getattr(type(value), "__sizeof__", None) is object.__sizeof__:
        return None  # (the bare object's header says nothing of what it holds)
    try:  # a size of its own (pandas' memory_usage), when cachey's way failed
        size = int(sys.getsizeof(value))
    except Exception:  # noqa: BLE001 -- a size is a nicety, never an error
        return None
    return size if size >= 0 else None


#: Items of a container measured to size it (evenly spread over a list or
#: tuple; the first ones of a set or dict); the others count at their mean.
SAMPLE_ITEMS = 16
#: Containers within containers followed this deep; deeper ones count by
#: their own header (a list that holds itself is sized, not followed).
SIZE_DEPTH = 4
_CONTAINERS = frozenset((list, tuple, set, frozenset, dict))
_ATOMS = frozenset((int, float, bool, complex, str, bytes, bytearray, type(None)))


def sizeof(value) -> int | None:
    """Bytes a result holds, its contents included: what the report's
    memory panel, the dashboard's held bytes and the memory budget count.

    Arrays and pandas objects as ``nbytes`` says; a list, tuple, set,
    frozenset or dict as its own header plus its items (keys and values),
    of which at most SAMPLE_ITEMS are measured and the rest counted at
    their mean, containers in containers SIZE_DEPTH deep: bounded work
    whatever the result's length (a bag partition of a million records
    costs as much to size as one of sixteen).  An estimate: an object met
    twice among the items measured counts once.  None when ``value`` itself cannot be measured
    (``nbytes``); an item that cannot counts as nothing.

    >>> sizeof([bytes(1000) for _ in range(10)]) >= 10_000
    True
    >>> sizeof(7) == sys.getsizeof(7)
    True
    """
    if type(value) not in _CONTAINERS:
        return nbytes(value)
    return _deep_size(value, SIZE_DEPTH)


def _deep_size(value, depth: int, seen: set | None = None) -> int:
    """``value``'s bytes, items sampled; an object met before in this
    sizing (``seen``: shared keys, interned strings, a list holding itself)
    counts once."""
    if seen is None:
        seen = set()
    elif id(value) in seen:
        return 0
    seen.add(id(value))
    kind = type(value)
    if kind in _ATOMS:
        return sys.getsizeof(value)
    if kind not in _CONTAINERS:
        size = nbytes(value)
        return size if size is not None else 0
    size = sys.getsizeof(value)
    n = len(value)
    if not n or not depth:
        return size
    if kind is list or kind is tuple:
        step = max(n // SAMPLE_ITEMS, 1)
        sample: Any = value[::step][:SAMPLE_ITEMS]
    elif kind is dict:
        sample = [x for item in itertools.islice(value.items(), SAMPLE_ITEMS) for x in item]
        n *= 2
    else:
        sample = list(itertools.islice(value, SAMPLE_ITEMS))
    items = 0
    getsizeof, add = sys.getsizeof, seen.add
    for item in sample:
        if type(item) in _ATOMS:  # (most items: no call of our own)
            if id(item) not in seen:
                add(id(item))
                items += getsizeof(item)
        else:
            items += _deep_size(item, depth - 1, seen)
    return size + items * n // len(sample)


# Results that put no memory at stake: numbers, and strings or bytes of at
# most ``TINY_LEN`` items.  The batch planner does not count them against what
# a batch holds (``localsched.run.batching``, "Tiny results"); a worker hands
# number results over in bulk (``localsched.worker.runtime.FLUSH_RESULTS``).
NUMBERS = frozenset((int, float, bool, complex))
_TEXTS = frozenset((str, bytes))
TINY_LEN = 256


def is_tiny(value) -> bool:
    """Whether ``value`` is a result whose bytes are negligible (a number, a
    short string); anything else may be large, and counts.

    >>> is_tiny(3), is_tiny("abc"), is_tiny([3]), is_tiny(None)
    (True, True, False, False)
    """
    t = type(value)
    return t in NUMBERS or (t in _TEXTS and len(value) <= TINY_LEN)


# Builtin types without an ``nbytes``: their size is ``sys.getsizeof``, for
# cachey as here (measured per task result, so without a call into cachey).
_PLAIN = frozenset((int, float, bool, complex, str, bytes, bytearray, type(None), tuple,
                    list, dict, set, frozenset))
_cachey_nbytes = None  # cachey.nbytes once imported (or sys.getsizeof without cachey)


def _find_cachey():
    global _cachey_nbytes
    try:
        from cachey import nbytes as measure
    except ImportError:
        measure = sys.getsizeof
    _cachey_nbytes = measure
    return measure
