"""Checking a saved run's ``graphs`` and ``meta``: the sections the analysis
reads beside the records (``runcheck`` checks the records and calls these).

``graphs`` (absent or null: none were kept): a list of objects, one per
computation (the layout: ``codec``), each with

* ``keys``: positions in the run's ``keys`` table, none repeated (a graph
  holds each key once);
* ``deps``: one list per key, of positions in the graph's own ``keys``,
  none repeated, none the key itself, and no cycle (a graph that ran has
  none);
* ``order``: null, or positions in the graph's ``keys``, none repeated
  (the run order names each task once);
* ``started``/``finished``: times, ``finished`` not before ``started``;
  ``submitted``: a time or null; ``workers``: a whole number from 0
  (unknown) to ``MAX_WORKERS``, or null; ``inputs`` (absent or null: not
  measured): ``{group: [objects, bytes]}``, numbers finite and >= 0.

So each analysis walks each position, dependency and run-order entry a
bounded number of times: its cost is linear in the file's size (a repeated
entry once multiplied it: a task repeated in ``order`` walked its
dependencies once per repeat).

``meta`` (absent or null: empty): an object whose fields the readers use are
checked when present -- ``title``, ``scheduler``, ``dashboard`` (text or
null), ``started``, ``finished`` (times or null), ``sample_interval`` (a
finite number >= 0 or null), ``gil_waits`` (``{group: [looks, contended
looks, seconds]}``, counts whole and >= 0), ``runs`` (a list of ``{"name":
text, "start": time}``, what ``RunData.side_by_side`` writes); other fields
are kept unread.

``checker`` is runcheck's ``_Checker``: its ``fail(where, what)`` makes the
error naming the file, ``number`` reads one JSON number.
"""

from __future__ import annotations

import math

__all__ = ["check_graphs", "check_meta", "MAX_WORKERS"]

#: A graph's worker count above this is refused (no machine has more).
MAX_WORKERS = 1 << 20

_MAX_TIME = 1e12  # (runcheck.MAX_TIME: epoch seconds within this of 0)


def check_graphs(checker, data: dict, nkeys: int) -> None:
    """Check ``data["graphs"]`` (``nkeys``: entries of the run's ``keys``)."""
    graphs = data.get("graphs")
    if graphs is None:
        return
    if not isinstance(graphs, list):
        raise checker.fail("graphs", f"expected a list, got {_shown(graphs)}")
    for i, g in enumerate(graphs):
        where = f"graphs[{i}]"
        if not isinstance(g, dict):
            raise checker.fail(where, f"expected an object, got {_shown(g)}")
        n = _positions(checker, g.get("keys"), f"{where}.keys", nkeys, "keys", unique=True,
                       missing="keys" not in g)
        _deps(checker, g, where, n)
        if g.get("order") is not None:
            _positions(checker, g["order"], f"{where}.order", n, f"{where}.keys", unique=True)
        started = _time(checker, g, "started", where, nullable=False)
        finished = _time(checker, g, "finished", where, nullable=False)
        if finished < started:
            raise checker.fail(f"{where}.finished", f"{finished!r} is before its start "
                                                    f"({started!r})")
        _time(checker, g, "submitted", where, nullable=True)
        _inputs(checker, g.get("inputs"), f"{where}.inputs")
        workers = g.get("workers")
        if workers is not None and (type(workers) is not int
                                    or not 0 <= workers <= MAX_WORKERS):
            raise checker.fail(f"{where}.workers", f"expected a whole number from 0 to "
                                                   f"{MAX_WORKERS:,} or null, got "
                                                   f"{_shown(workers)}")


def _inputs(checker, inputs, where: str) -> None:
    """``{group: [objects, bytes]}`` or null (``literals.graph_inputs``)."""
    if inputs is None:
        return
    if not isinstance(inputs, dict):
        raise checker.fail(where, f"expected an object or null, got {_shown(inputs)}")
    for group, pair in inputs.items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(
                type(x) in (int, float) and math.isfinite(x) and x >= 0 for x in pair)):
            raise checker.fail(f"{where}[{group!r}]", f"expected [objects, bytes] (numbers "
                                                      f">= 0), got {_shown(pair)}")


def _positions(checker, values, where: str, size: int, table: str, unique: bool,
               missing: bool = False) -> int:
    """Check a list of positions in a table of ``size``; its length."""
    if missing:
        raise checker.fail(where, "missing")
    if not isinstance(values, list):
        raise checker.fail(where, f"expected a list of positions in {table}, got "
                                  f"{_shown(values)}")
    seen = bytearray(size) if unique else None
    for j, c in enumerate(values):
        if type(c) is not int or not 0 <= c < size:
            raise checker.fail(f"{where}[{j}]", f"{_shown(c)} is not a position in {table} "
                                                f"({size} entries)")
        if seen is not None:
            if seen[c]:
                raise checker.fail(f"{where}[{j}]", f"position {c} is repeated")
            seen[c] = 1
    return len(values)


def _deps(checker, g: dict, where: str, n: int) -> None:
    """Each key's dependencies: positions among the graph's keys, no repeat,
    no cycle (Kahn's algorithm: linear in the dependencies)."""
    deps = g.get("deps")
    if "deps" not in g:
        raise checker.fail(f"{where}.deps", "missing")
    if not isinstance(deps, list) or len(deps) != n:
        got = _shown(deps)
        raise checker.fail(f"{where}.deps", f"expected a list of {n} lists (one per key), "
                                            f"got {got}")
    users: list = [[] for _ in range(n)]
    waiting = [0] * n
    for p, ds in enumerate(deps):
        at = f"{where}.deps[{p}]"
        if not isinstance(ds, list):
            raise checker.fail(at, f"expected a list of positions, got {_shown(ds)}")
        mine: set = set()
        for j, d in enumerate(ds):
            if type(d) is not int or not 0 <= d < n:
                raise checker.fail(f"{at}[{j}]", f"{_shown(d)} is not a position in "
                                                 f"{where}.keys ({n} entries)")
            if d == p:
                raise checker.fail(at, f"key {p} depends on itself")
            if d in mine:
                raise checker.fail(f"{at}[{j}]", f"dependency {d} is repeated")
            mine.add(d)
            users[d].append(p)
        waiting[p] = len(ds)
    ready = [p for p in range(n) if not waiting[p]]
    done = 0
    while ready:
        p = ready.pop()
        done += 1
        for u in users[p]:
            waiting[u] -= 1
            if not waiting[u]:
                ready.append(u)
    if done < n:
        first = next(p for p in range(n) if waiting[p])
        raise checker.fail(f"{where}.deps", f"a cycle of dependencies (through key {first}): "
                                            "not a graph that ran")


def _time(checker, g: dict, name: str, where: str, nullable: bool):
    at = f"{where}.{name}"
    if name not in g and not nullable:
        raise checker.fail(at, "missing")
    value = checker.number(g.get(name), at)
    if value is None:
        if nullable:
            return None
        raise checker.fail(at, "expected a time, got null")
    if not abs(value) <= _MAX_TIME:
        raise checker.fail(at, f"{value!r} is not a time (epoch seconds within "
                               f"{_MAX_TIME:g} of 0)")
    return value


def check_meta(checker, meta: dict) -> None:
    """Check the fields of ``meta`` the readers use (the module docstring)."""
    for name in ("title", "scheduler", "dashboard"):
        value = meta.get(name)
        if value is not None and not isinstance(value, str):
            raise checker.fail(f"meta.{name}", f"expected text or null, got {_shown(value)}")
    for name in ("started", "finished"):
        _time(checker, meta, name, "meta", nullable=True)
    interval = checker.number(meta.get("sample_interval"), "meta.sample_interval")
    if interval is not None and not (math.isfinite(interval) and interval >= 0):
        raise checker.fail("meta.sample_interval", f"{interval!r} is not a finite number >= 0")
    waits = meta.get("gil_waits")
    if waits is not None:
        if not isinstance(waits, dict):
            raise checker.fail("meta.gil_waits", f"expected an object, got {_shown(waits)}")
        for group, row in waits.items():
            if not (isinstance(row, list) and len(row) == 3
                    and all(type(c) is int and c >= 0 for c in row[:2])
                    and _finite_amount(row[2])):
                raise checker.fail(f"meta.gil_waits.{str(group)[:40]}",
                                   "expected [looks, contended looks, seconds] (numbers "
                                   f">= 0), got {_shown(row)}")
    _runs(checker, meta)


def _runs(checker, meta: dict) -> None:
    runs = meta.get("runs")
    if runs is None:
        return
    if not isinstance(runs, list):
        raise checker.fail("meta.runs", f"expected a list of {{\"name\", \"start\"}}, got "
                                        f"{_shown(runs)}")
    for i, entry in enumerate(runs):
        where = f"meta.runs[{i}]"
        if not isinstance(entry, dict):
            raise checker.fail(where, f"expected {{\"name\", \"start\"}}, got {_shown(entry)}")
        _time(checker, entry, "start", where, nullable=False)
        name = entry.get("name")
        if name is not None and not isinstance(name, str):
            raise checker.fail(f"{where}.name", f"expected text, got {_shown(name)}")


def _finite_amount(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and v >= 0


def _shown(value, limit: int = 60) -> str:
    """A short repr of a bad value for an error message."""
    if isinstance(value, (list, dict)):
        kind = "a list" if isinstance(value, list) else "an object"
        text = f"{kind} of {len(value)}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
