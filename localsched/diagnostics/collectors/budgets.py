"""A memory budget's record in the diagnostics: kept, counted, saved, checked.

The scheduler's budget leaves one :class:`~localsched.run.budget_record.BudgetRecord`
per computation at ``state.outcome.memory`` (None without a budget).  The
diagnostics read it here, and only here:

- ``snapshot(state)``: a copy taken at a computation's finish (the
  ``Profiler`` keeps one per budgeted computation: ``RunData.budgets``);
- ``disk_metrics(record, span)``: fine metrics per task group, with
  dask.distributed's activity names ``disk-write`` and ``disk-read`` in
  three units: ``caller-seconds`` (the scheduler's thread moves the values,
  not a worker: the wall seconds of each write and read, beside the
  caller's ``scheduler`` CPU seconds, which include their CPU; the workers'
  seconds still add up to wall × workers), ``bytes`` and ``count``;
- ``encode_budgets`` / ``decode_budgets`` / ``check_budgets``: the run's
  JSON (``codec``, ``runcheck``), key codes shared with the other records;
- ``shifted(record, seconds)``: the record moved in time (merged runs).

JSON layout (``"budgets"``, absent in files saved before budgets were
kept: read as none), one object per budgeted computation::

    {"limit": int, "target": int, "pause": int, "paused_seconds": float,
     "timeline": {"time": [...], "held": [...], "spilled": [...]},
     "events": {"start": [...], "end": [...], "activity": [...],
                "key": [key codes], "nbytes": [...]}}
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real

from ...run.budget_record import DISK_READ, DISK_WRITE, BudgetRecord
from ...utils import key_split
from ...view import state_view

__all__ = ["snapshot", "disk_metrics", "encode_budgets", "decode_budgets", "check_budgets",
           "shifted", "ACTIVITIES"]

#: The activities a budget records (dask.distributed's names).
ACTIVITIES = (DISK_WRITE, DISK_READ)
_CALLER = "caller-seconds"  # (metrics.CALLER; not imported: metrics reads this module)


def snapshot(state) -> BudgetRecord | None:
    """A copy of the computation's budget record (None without a budget)."""
    record = state_view(state).outcome.memory
    if record is None:
        return None
    return BudgetRecord(int(record.limit), int(record.target), int(record.pause),
                        [tuple(t) for t in record.timeline],
                        [tuple(e) for e in record.events], float(record.paused_seconds))


def disk_metrics(record: BudgetRecord | None, span: tuple = ()) -> dict:
    """``(span, group, activity, unit) -> value`` of the record's disk
    events: seconds (``caller-seconds``), bytes and count per group."""
    out: dict = {}
    if record is None:
        return out
    for start, end, activity, key, nbytes in record.events:
        group = key_split(key)
        for unit, value in ((_CALLER, max(0.0, end - start)), ("bytes", nbytes),
                            ("count", 1)):
            k = (span, group, activity, unit)
            out[k] = out.get(k, 0) + value
    return out


def shifted(record: BudgetRecord, seconds: float) -> BudgetRecord:
    """The record with every time moved by ``seconds``."""
    return BudgetRecord(record.limit, record.target, record.pause,
                        [(t + seconds, h, s) for t, h, s in record.timeline],
                        [(a + seconds, b + seconds, act, key, n)
                         for a, b, act, key, n in record.events], record.paused_seconds)


# -- JSON ------------------------------------------------------------------------------

def encode_budgets(budgets: list, key_codes: Callable) -> list:
    """The records as JSON-able objects (``key_codes``: keys -> their codes
    in the run's key table)."""
    out = []
    for b in budgets:
        out.append({
            "limit": int(b.limit), "target": int(b.target), "pause": int(b.pause),
            "paused_seconds": float(b.paused_seconds),
            "timeline": {"time": [float(t[0]) for t in b.timeline],
                         "held": [int(t[1]) for t in b.timeline],
                         "spilled": [int(t[2]) for t in b.timeline]},
            "events": {"start": [float(e[0]) for e in b.events],
                       "end": [float(e[1]) for e in b.events],
                       "activity": [str(e[2]) for e in b.events],
                       "key": key_codes(e[3] for e in b.events),
                       "nbytes": [int(e[4]) for e in b.events]},
        })
    return out


def decode_budgets(items, keys: list) -> list:
    """The records of ``encode_budgets``' objects (``keys``: the run's
    decoded key table); None or absent: none."""
    out = []
    for b in items or ():
        t, e = b["timeline"], b["events"]
        out.append(BudgetRecord(
            b["limit"], b["target"], b["pause"],
            list(zip(t["time"], t["held"], t["spilled"], strict=True)),
            [(s, f, a, keys[k], n) for s, f, a, k, n in zip(
                e["start"], e["end"], e["activity"], e["key"], e["nbytes"], strict=True)],
            b["paused_seconds"]))
    return out


_SCALARS = ("limit", "target", "pause", "paused_seconds")
_COLUMNS = {"timeline": ("time", "held", "spilled"),
            "events": ("start", "end", "activity", "key", "nbytes")}
_MAX_TIME = 1e11


def _number(value, time: bool = False) -> bool:
    if not isinstance(value, Real) or isinstance(value, bool):
        return False
    x = float(value)
    if not math.isfinite(x):
        return False
    return abs(x) <= _MAX_TIME if time else x >= 0


def check_budgets(items, fail: Callable, key_weights: list) -> int:
    """Raise ``fail(where, what)`` for the first malformed budget object
    (``key_weights``: the text length of each entry of the run's key
    table); None or absent is fine.  Returns the text the events reference
    (``runcheck``'s expansion limit counts it)."""
    if items is None:
        return 0
    if not isinstance(items, list):
        raise fail("budgets", "expected a list")
    text = 0
    for i, b in enumerate(items):
        where = f"budgets[{i}]"
        if not isinstance(b, dict):
            raise fail(where, "expected an object")
        for name in _SCALARS:
            if not _number(b.get(name)):
                raise fail(f"{where}.{name}", f"expected a number >= 0, got {b.get(name)!r:.40}")
        for section, columns in _COLUMNS.items():
            cols = b.get(section)
            if not isinstance(cols, dict) or not all(
                    isinstance(cols.get(c), list) for c in columns):
                raise fail(f"{where}.{section}", f"expected an object of lists {columns}")
            if len({len(cols[c]) for c in columns}) > 1:
                raise fail(f"{where}.{section}", "columns of different lengths")
            for c in columns:
                _check_column(cols[c], c, f"{where}.{section}.{c}", fail, len(key_weights))
        text += sum(key_weights[k] for k in b["events"]["key"])
    return text


def _check_column(values: list, column: str, where: str, fail: Callable, nkeys: int) -> None:
    for j, v in enumerate(values):
        if column == "activity":
            ok = v in ACTIVITIES
        elif column == "key":
            ok = type(v) is int and 0 <= v < nkeys
        else:
            ok = _number(v, time=column in ("time", "start", "end"))
        if not ok:
            raise fail(f"{where}[{j}]", f"unexpected value {v!r:.40}")
