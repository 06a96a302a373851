"""The client side of the event stream: one subscription per Client to its
scheduler plugin (``_plugin.StreamPlugin``), routing each event to the
computations that wait for it, and the scheduler's clock.

The handler runs on the Client's IO-loop thread and only routes: events go,
by key, into the queue of each computation that follows that key (several
threads may compute on one Client at once).  A computation does not know
its tasks before the scheduler has them (a graph may refer to futures or
persisted keys, and dask may hand over an expression), so it waits for the
``graph`` event of the ``update_graph`` that asked for its output keys;
routing its tasks starts with that event, before any of them can move.

Clocks.  Task times come from the scheduler's clock (distributed corrects
each worker's offset to it).  ``Stream.offset()`` estimates the scheduler
clock minus the caller's from the midpoint of one round trip, as
dask.distributed's workers compute ``scheduler_delay``, refreshed every
``OFFSET_MAX_AGE`` seconds; it is 0 when smaller than half the round trip
(one host).  Worker ids ``"address#n"`` number each worker's threads in the
order first seen; a worker's numbers are dropped when it leaves (at most
``MAX_WORKER_IDS`` are kept, so churn cannot grow the map without bound).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from queue import SimpleQueue

from ..system.forking import at_fork_in_child

#: Seconds an estimate of the scheduler's clock offset is reused.
OFFSET_MAX_AGE = 60.0
#: At most this many (worker, thread) numbers are remembered.
MAX_WORKER_IDS = 4096

_lock = threading.Lock()
_streams: dict = {}  # client id -> Stream


@at_fork_in_child
def _renew_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    _streams.clear()  # (their Clients' IO loops are the parent's)


class Stream:
    """One Client's subscription (see the module docstring)."""

    def __init__(self, client):
        import cloudpickle

        from . import _plugin

        self.client = client
        self.generation = getattr(client, "generation", 0)  # (reconnects: a new scheduler)
        self.routes: dict = {}  # key -> list of queues
        self.expecting: list = []  # (frozenset of output keys, queue), oldest first
        self.marks: dict = {}  # barrier token -> queue
        self.lock = threading.Lock()
        self.thread_ids: dict = {}  # (worker, thread ident) -> "worker#n"
        self._offset: tuple | None = None  # (offset, when)
        # Shipped by value: the scheduler need not have localsched installed.
        cloudpickle.register_pickle_by_value(_plugin)
        client.register_plugin(_plugin.StreamPlugin(client.id), name=_plugin.plugin_name(client.id))
        client.subscribe_topic(_plugin.topic_name(client.id), self.handle)

    # -- on the IO loop -------------------------------------------------------

    def handle(self, event) -> None:
        _, batch = event
        out: dict = {}
        for ev in batch:
            kind = ev[0]
            if kind == "graph":
                self._graph(ev, out)
                continue
            if kind == "mark":
                q = self.marks.get(ev[1])
                if q is not None:
                    out.setdefault(id(q), (q, []))[1].append(ev)
                continue
            if kind == "worker-left":
                self._forget_worker(ev[1])
                continue
            key = ev[1]
            if type(key) is list:  # (msgpack turns tuple keys into lists)
                key = _tuplify(key)
                ev = (ev[0], key) + tuple(ev[2:])
            for q in self.routes.get(key, ()):
                out.setdefault(id(q), (q, []))[1].append(ev)
        for q, events in out.values():
            q.put(events)

    def _graph(self, ev, out: dict) -> None:
        wanted = frozenset(_tuplify(k) for k in ev[1])
        with self.lock:
            for n, (keys, q) in enumerate(self.expecting):  # noqa: B007 -- q: read below
                if keys == wanted:
                    del self.expecting[n]
                    break
            else:
                return  # a graph nobody here follows (client.compute, submit...)
        rows = [(_tuplify(k), [_tuplify(d) for d in deps], done) for k, deps, done in ev[2]]
        self.add([k for k, _, _ in rows], q)
        out.setdefault(id(q), (q, []))[1].append(("graph", wanted, rows))

    def _forget_worker(self, worker: str) -> None:
        ids = self.thread_ids
        for pair in [p for p in ids if p[0] == worker]:
            del ids[pair]

    # -- in the caller -------------------------------------------------------------

    def expect(self, keys: frozenset, q: SimpleQueue) -> None:
        """Route the tasks of the next graph asking for exactly ``keys`` to q."""
        with self.lock:
            self.expecting.append((keys, q))

    def add(self, keys: Iterable, q: SimpleQueue) -> None:
        with self.lock:
            routes = self.routes
            for k in keys:
                qs = routes.get(k)
                # (copy on write: the handler reads without the lock)
                routes[k] = [q] if qs is None else qs + [q]

    def forget(self, q: SimpleQueue) -> None:
        """Stop routing anything to q."""
        with self.lock:
            self.expecting = [(k, x) for k, x in self.expecting if x is not q]
            routes = self.routes
            for k in [k for k, qs in routes.items() if q in qs]:
                rest = [x for x in routes[k] if x is not q]
                if rest:
                    routes[k] = rest
                else:
                    del routes[k]

    def worker_id(self, worker: str | None, thread: int | None) -> str | None:
        """``"tcp://127.0.0.1:40123#0"``: the worker, its threads numbered in
        the order this Client first saw them; ``"worker#?"`` for an unknown
        thread."""
        if worker is None:
            return None
        if thread is None:
            return f"{worker}#?"
        ids = self.thread_ids
        wid = ids.get((worker, thread))
        if wid is None:
            if len(ids) >= MAX_WORKER_IDS:
                ids.clear()
            n = sum(1 for w, _ in ids if w == worker)
            wid = ids[(worker, thread)] = f"{worker}#{n}"
        return wid

    def offset(self) -> float:
        """The scheduler's clock minus this process's (seconds)."""
        cached = self._offset
        now = time.monotonic()
        if cached is not None and now - cached[1] < OFFSET_MAX_AGE:
            return cached[0]
        from . import _plugin

        t0 = time.time()
        theirs = self.client.run_on_scheduler(_plugin.scheduler_clock)
        t1 = time.time()
        offset = theirs - (t0 + t1) / 2
        if abs(offset) <= (t1 - t0) / 2:
            offset = 0.0  # within the round trip's uncertainty: one clock
        self._offset = (offset, now)
        return offset


def _tuplify(x):
    return tuple(_tuplify(v) for v in x) if type(x) is list else x


def stream_of(client) -> Stream:
    """The Client's stream, subscribed on first use."""
    with _lock:
        for cid, other in list(_streams.items()):  # (don't keep closed Clients alive)
            if other.client.status == "closed":
                del _streams[cid]
        s = _streams.get(client.id)
        if (s is None or s.client is not client
                or s.generation != getattr(client, "generation", 0)):
            s = _streams[client.id] = Stream(client)
        return s


def drop(client) -> None:
    with _lock:
        _streams.pop(getattr(client, "id", None), None)
