"""Checking a saved run before it is decoded: one clear error per bad file.

A saved run (``RunData.save_json``, a report page's embedded JSON) may come
from anywhere: cut short, edited by hand, written by a newer localsched,
or crafted.  ``check_run(data, source, size)`` walks the parsed JSON once
(linear in its size) and raises :class:`RunFileError` -- a ``ValueError``
naming the file, the field and what is wrong -- for the first problem, so
``codec.decode_run`` then only meets data of the layout it wrote (the
layout: ``codec``'s docstring).  Fields it does not know are ignored
(a newer localsched may add some).

What is checked:

* the ``format`` and ``version`` (an int, at most ``codec.VERSION``);
* every record list: a JSON object with each column, all of one length;
  a code (a position in a table: ``keys``, ``workers``, ``task_reprs``,
  ``activity_names``, ``sample_groups``, ``stacks``, ``frames``) a whole
  number inside its table -- never negative;
* numbers: times finite and within ``MAX_TIME`` seconds of 0 (epoch
  seconds; ticks ``{"base", "q", "k"}`` with whole ``k`` below 2**53);
  amounts >= 0: memory, CPU and sample seconds finite (``seconds`` may be
  null), the cache metric also NaN (unknown size) or infinite;
  ``free_time`` may be NaN, infinite (never freed) or null;
* ``graphs`` and ``meta``: ``runcheck_graphs`` (positions, repeats, cycles,
  times, counts);
* keys: JSON scalars, arrays (tuples) nested at most ``MAX_KEY_DEPTH``
  deep, ``{"bytes": hex}``, ``{"float": "nan"|"inf"|"-inf"}``, ``{"repr": str}``.

Limits on what a small file can make the reader and the renderers do: the
JSON shares each key, task text and stack among the records that use it,
so a few bytes can stand for a long text or a deep stack; ``EXPANSION``
bounds what the records reference by the file's size (``check_run``).

>>> try:
...     check_run({"format": "localsched-run", "version": 7}, "run.json", 100)
... except RunFileError as exc:
...     print(exc)
run.json: version 7 is newer than this localsched reads (1); upgrade localsched
"""

from __future__ import annotations

import math
from numbers import Real

from ..collectors.budgets import check_budgets
from ..reporting.naming import TEXT_LIMIT
from .codec import FORMAT, VERSION
from .runcheck_graphs import check_graphs, check_meta

__all__ = ["RunFileError", "check_run", "EXPANSION", "EXPANSION_SLACK", "TEXT_LIMIT",
           "MAX_KEY_DEPTH", "MAX_TIME"]

#: Referenced text (and stack frames) may be at most this many times the file's size ...
EXPANSION = 64
#: ... plus this many characters (frames): small files are never refused.
EXPANSION_SLACK = 4_000_000
# TEXT_LIMIT (naming): characters of one text counted per reference, what a
# page or trace repeats of it.
#: Arrays (tuple keys) nested deeper than this are refused.
MAX_KEY_DEPTH = 32
#: Times beyond this many seconds from 0 are refused (31,700 years of epoch seconds).
MAX_TIME = 1e12


class RunFileError(ValueError):
    """A saved run that cannot be read: the message names the file, the
    field and what is wrong with it."""


_FORMAT = FORMAT
_VERSION = VERSION

# Column kinds: a code into a table, a time, an amount, text.
_TIME, _TIME_OR_NULL, _AMOUNT, _FINITE, _FINITE_OR_NULL, _TEXT = "time", "time?", \
    "amount", "finite", "finite?", "text"
_SECTIONS = {
    "tasks": {"key": "keys", "task": "task_reprs", "start": _TIME, "end": _TIME,
              "worker": "workers"},
    "failed": {"key": "keys", "task": "task_reprs", "start": _TIME, "end": _TIME,
               "worker": "workers", "exc_type": _TEXT, "message": _TEXT},
    "interrupted": {"key": "keys", "task": "task_reprs", "start": _TIME, "stop": _TIME,
                    "worker": "workers"},
    "transfers": {"key": "keys", "worker": "workers", "send_start": _TIME, "start": _TIME,
                  "end": _TIME, "receive_end": _TIME},
    "resources": {"time": _TIME, "mem": _FINITE, "cpu": _FINITE},
    "cache": {"key": "keys", "task": "task_reprs", "metric": _AMOUNT,
              "cache_time": _TIME, "free_time": _TIME_OR_NULL},
    "activities": {"key": "keys", "activity": "activity_names", "start": _TIME,
                   "stop": _TIME, "worker": "workers"},
    "samples": {"time": _TIME, "worker": "workers", "group": "sample_groups",
                "stack": "stacks", "seconds": _FINITE_OR_NULL},
}
_OPTIONAL_COLUMNS = {("samples", "seconds")}  # (files of an earlier localsched)
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def check_run(data, source, size: int | None = None) -> None:
    """Raise :class:`RunFileError` (naming ``source``) for the first problem
    of the parsed run ``data``; ``size`` (the file's characters) bounds what
    it may reference (None: not bounded).

    Limits on what a small file can make the reader and the renderers do (the
    JSON shares each key, task text and stack among the records that use it,
    so a few bytes per record can stand for a long text or a deep stack):

    * ``EXPANSION`` -- the text the records reference (each reference costs
      the length of the key, worker, task text, activity name or group it
      points to, counted up to ``TEXT_LIMIT`` characters: what the page and the
      trace show of one) may be at most ``EXPANSION`` times the file's size
      plus ``EXPANSION_SLACK`` characters;
    * the frames the samples reference (a sample costs its stack's depth: the
      flame graph walks each) at most ``EXPANSION`` times the file's size plus
      ``EXPANSION_SLACK``.

    Runs localsched records stay far below both (a key is referenced by a few
    records, each also holding its own times; stacks are tens of frames).
    The renderers cut each text they repeat per record to ``TEXT_LIMIT``
    characters (``naming.shown_text``, ``naming.groups_of``) and the trace's stack samples to a
    budget (``trace``), so a page or trace stays within a small multiple of
    the file that made it.
    """
    _Checker(str(source), size).run(data)


class _Checker:
    def __init__(self, source: str, size: int | None):
        self.source = source
        self.size = size

    def fail(self, where: str, what: str):
        place = f"{where}: " if where else ""
        return RunFileError(f"{self.source}: {place}{what}")

    # -- the whole run ---------------------------------------------------------------

    def run(self, data) -> None:
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise self.fail("", f'not a localsched run: expected a JSON object with "format": '
                                f'"{_FORMAT}"')
        version = data.get("version", 0)
        if type(version) is not int or version < 0:
            raise self.fail("version", f"expected a whole number, got {_shown(version)}")
        if version > _VERSION:
            raise self.fail("", f"version {version} is newer than this localsched reads "
                                f"({_VERSION}); upgrade localsched")
        meta = data.get("meta")
        if not isinstance({} if meta is None else meta, dict):
            raise self.fail("meta", f"expected an object, got {_shown(meta)}")
        check_meta(self, meta or {})
        if not isinstance(data.get("cache_metric", "tasks"), str):
            raise self.fail("cache_metric", f"expected text, got {_shown(data['cache_metric'])}")
        weights = self.tables(data)
        text = frames = 0
        for name, columns in _SECTIONS.items():
            t, f = self.section(data, name, columns, weights)
            text += t
            frames += f
        self.metrics(self.field(data, "metrics", list))
        for i, wall in enumerate(self.field(data, "walls", list)):
            times = self.floats(wall, f"walls[{i}]", _TIME)
            if len(times) != 2:
                raise self.fail(f"walls[{i}]", f"expected [start, finish], got {len(times)} "
                                               "values")
        text += check_budgets(data.get("budgets"), self.fail, weights["keys"])
        check_graphs(self, data, len(weights["keys"]))
        self.budget(text, "text referenced by the records", "characters")
        self.budget(frames, "stack frames referenced by the samples", "frames")

    def budget(self, used: int, what: str, unit: str) -> None:
        if self.size is None:
            return
        limit = EXPANSION * self.size + EXPANSION_SLACK
        if used > limit:
            raise self.fail("", f"the {what} add up to {used:,} {unit}, more than the limit "
                                f"of {EXPANSION} times the file's size plus {EXPANSION_SLACK:,} "
                                f"({limit:,}): a crafted file? (see localsched.diagnostics."
                                "runcheck)")

    def field(self, data: dict, name: str, kind: type):
        if name not in data:
            raise self.fail(name, "missing")
        value = data[name]
        if not isinstance(value, kind):
            raise self.fail(name, f"expected {_KIND_NAMES[kind]}, got {_shown(value)}")
        return value

    # -- tables ----------------------------------------------------------------------

    def tables(self, data: dict) -> dict:
        """Each table's per-entry weight (text length up to TEXT_LIMIT; a stack's depth)."""
        weights = {}
        for name in ("keys", "workers"):
            weights[name] = [min(self.key(k, f"{name}[{i}]", 0), TEXT_LIMIT)
                             for i, k in enumerate(self.field(data, name, list))]
        for name, nullable in (("task_reprs", True), ("activity_names", False),
                               ("sample_groups", True)):
            weights[name] = [self.text(v, f"{name}[{i}]", nullable)
                             for i, v in enumerate(self.field(data, name, list))]
        frames = self.field(data, "frames", list)
        for i, frame in enumerate(frames):
            if not (isinstance(frame, list) and len(frame) == 3 and isinstance(frame[0], str)
                    and (frame[1] is None or type(frame[1]) is int)
                    and isinstance(frame[2], str)):
                raise self.fail(f"frames[{i}]", "expected [filename, line, function name], got "
                                                f"{_shown(frame)}")
        weights["stacks"] = []
        for i, stack in enumerate(self.field(data, "stacks", list)):
            where = f"stacks[{i}]"
            self.codes(stack, where, len(frames), "frames")
            weights["stacks"].append(len(stack))
        return weights

    def key(self, value, where: str, depth: int) -> int:
        """Check one key; its text's length."""
        if value is None or isinstance(value, (str, bool, int)):
            return len(value) if isinstance(value, str) else 8
        if isinstance(value, float):
            return 24
        if isinstance(value, list):
            if depth >= MAX_KEY_DEPTH:
                raise self.fail(where, f"a key nested more than {MAX_KEY_DEPTH} deep")
            return 2 + sum(self.key(v, where, depth + 1) for v in value)
        if isinstance(value, dict) and len(value) == 1:
            (kind, text), = value.items()
            if kind == "bytes" and isinstance(text, str) and _is_hex(text):
                return len(text)
            if kind == "float" and text in _NONFINITE:
                return 4
            if kind == "repr" and isinstance(text, str):
                return len(text)
        raise self.fail(where, f"not a key: {_shown(value)}")

    def text(self, value, where: str, nullable: bool) -> int:
        if isinstance(value, str):
            return min(len(value), TEXT_LIMIT)
        if value is None and nullable:
            return 4
        raise self.fail(where, f"expected text, got {_shown(value)}")

    # -- record lists ----------------------------------------------------------------

    def section(self, data: dict, name: str, columns: dict, weights: dict) -> tuple:
        """Check one record list; (text, frames) its records reference."""
        section = self.field(data, name, dict)
        length = None
        text = frames = 0
        for column, kind in columns.items():
            where = f"{name}.{column}"
            if column not in section:
                if (name, column) in _OPTIONAL_COLUMNS:
                    continue
                raise self.fail(where, "missing")
            values = section[column]
            if kind in weights:  # codes into a table
                table = weights[kind]
                self.codes(values, where, len(table), kind)
                used = sum(table[c] for c in values)
                if kind == "stacks":
                    frames += used
                else:
                    text += used
                n = len(values)
            elif kind == _TEXT:
                if not isinstance(values, list):
                    raise self.fail(where, f"expected a list, got {_shown(values)}")
                text += sum(self.text(v, f"{where}[{i}]", False) for i, v in enumerate(values))
                n = len(values)
            else:
                n = len(self.floats(values, where, kind))
            if length is None:
                length = n
            elif n != length:
                raise self.fail(where, f"{n} values where the other columns of {name} have "
                                       f"{length}")
        return text, frames

    def codes(self, values, where: str, size: int, table: str) -> None:
        if not isinstance(values, list):
            raise self.fail(where, f"expected a list of positions in {table}, got "
                                   f"{_shown(values)}")
        for i, c in enumerate(values):
            if type(c) is not int or not 0 <= c < size:
                raise self.fail(f"{where}[{i}]", f"{_shown(c)} is not a position in {table} "
                                                 f"({size} entries)")

    def floats(self, values, where: str, kind: str) -> list:
        """Check a column of numbers (plain or ticks); its values."""
        if isinstance(values, dict):
            values = self.ticks(values, where)
        elif not isinstance(values, list):
            raise self.fail(where, f"expected a list of numbers, got {_shown(values)}")
        else:
            values = [self.number(v, f"{where}[{i}]") for i, v in enumerate(values)]
        null_ok = kind in (_TIME_OR_NULL, _FINITE_OR_NULL)
        for i, v in enumerate(values):
            if v is None:
                if not null_ok:
                    raise self.fail(f"{where}[{i}]", "expected a number, got null")
            elif kind == _TIME:
                if not abs(v) <= MAX_TIME:
                    raise self.fail(f"{where}[{i}]", f"{v!r} is not a time (epoch seconds "
                                                     f"within {MAX_TIME:g} of 0)")
            elif kind == _TIME_OR_NULL:  # (free_time: NaN or infinite when never freed)
                if math.isfinite(v) and not abs(v) <= MAX_TIME:
                    raise self.fail(f"{where}[{i}]", f"{v!r} is not a time (epoch seconds "
                                                     f"within {MAX_TIME:g} of 0)")
            elif v < 0 or (kind != _AMOUNT and not math.isfinite(v)):
                finite = "" if kind == _AMOUNT else "finite "
                raise self.fail(f"{where}[{i}]", f"{v!r} is not an amount (a {finite}number "
                                                 ">= 0)")
        return values

    def number(self, v, where: str):
        if v is None:
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                return float(v)
            except OverflowError:
                raise self.fail(where, f"{_shown(v)} is too large") from None
        if isinstance(v, dict) and len(v) == 1 and v.get("float") in _NONFINITE:
            return _NONFINITE[v["float"]]
        raise self.fail(where, f"expected a number, got {_shown(v)}")

    def ticks(self, column: dict, where: str) -> list:
        base, q, ks = column.get("base"), column.get("q"), column.get("k")
        if not (isinstance(base, Real) and isinstance(q, Real) and isinstance(ks, list)
                and not isinstance(base, bool) and not isinstance(q, bool)
                and math.isfinite(base) and math.isfinite(q) and float(q) > 0):
            raise self.fail(where, 'expected {"base": number, "q": number > 0, "k": '
                                   f"[whole numbers]}}, got {_shown(column)}")
        out = []
        for i, k in enumerate(ks):
            if type(k) is not int or not abs(k) < 2 ** 53:
                raise self.fail(f"{where}.k[{i}]", f"{_shown(k)} is not a whole number below "
                                                   "2**53")
            out.append(base + k * q)
        return out

    # -- fine metrics ----------------------------------------------------------------

    def metrics(self, rows: list) -> None:
        for i, row in enumerate(rows):
            where = f"metrics[{i}]"
            if not (isinstance(row, list) and len(row) == 5 and isinstance(row[0], list)
                    and all(isinstance(s, str) for s in row[0])
                    and (row[1] is None or isinstance(row[1], str))
                    and isinstance(row[2], str) and isinstance(row[3], str)):
                raise self.fail(where, "expected [span, group, activity, unit, value], got "
                                       f"{_shown(row)}")
            self.number(row[4], f"{where}[4]")


_KIND_NAMES: dict = {list: "a list", dict: "an object"}


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


def _shown(value, limit: int = 60) -> str:
    """A short repr of a bad value for an error message."""
    if isinstance(value, (list, dict)):
        kind = "a list" if isinstance(value, list) else "an object"
        text = f"{kind} of {len(value)}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
