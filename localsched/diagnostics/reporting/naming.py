"""How the diagnostics name and order things: task groups, workers, seconds, task reprs.

Bokeh-free and numpy-free, shared by the summary, the figures, the saved run
data and the trace export, so a group, a worker row or a duration reads the
same everywhere.

>>> groups_of([('x-1a2b3c4d', 0), 'load-1', b'y-2'])
['x', 'load', 'y']
>>> worker_rows([140213, None, 9, 140213])
{9: 0, 140213: 1, None: 2}
>>> shorten('dictitems-frequencies-aggregate', 12)
'dictitems-f\u2026'
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable

from ...utils import funcname, key_split

__all__ = ["printable", "groups_of", "worker_rows", "worker_label", "shorten", "format_seconds",
           "short_repr", "REPR_LIMIT", "TEXT_LIMIT", "shown_text"]


def groups_of(keys: Iterable) -> list:
    """The task group of every key: ``localsched.utils.key_split``, dask's rule
    (cached), cut to ``TEXT_LIMIT`` characters (a name repeated per record)."""
    groups = [key_split(key) for key in keys]
    if groups and max(map(len, groups)) > TEXT_LIMIT:
        groups = [shorten(g, TEXT_LIMIT) for g in groups]
    return groups


#: Characters of a text shown once per record (a key, a group, a frame) on
#: the page and in the trace: a longer one is cut (an ellipsis marks it), so
#: what a page or trace repeats per record stays bounded
#: (``runcheck`` counts saved runs' shared texts up to this length too).
TEXT_LIMIT = 200


def shown_text(value) -> str:
    """``str(value)`` cut to ``TEXT_LIMIT`` characters (see there).

    >>> len(shown_text('k' * 5000)), shown_text(('x', 1))
    (200, "('x', 1)")
    """
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= TEXT_LIMIT else shorten(text, TEXT_LIMIT)


def worker_rows(worker_ids: Iterable) -> dict:
    """``{worker id: row}``: known ids in sorted order (by repr when their types
    differ), then ``None`` (a record no worker could be named for), if present."""
    ids = set(worker_ids)
    known = [w for w in ids if w is not None]
    try:
        known.sort()
    except TypeError:  # ids of mixed types
        known.sort(key=repr)
    if None in ids:
        known.append(None)
    return {worker: row for row, worker in enumerate(known)}


def worker_label(worker, row: int) -> str:
    """What a worker's row is called: thread idents and pids are long and
    meaningless, so rows are numbered.

    >>> worker_label(140213, 0), worker_label(None, 3)
    ('worker 0', 'unknown worker')
    """
    return "unknown worker" if worker is None else f"worker {row}"


def printable(text) -> str:
    r"""``str(text)`` that UTF-8 can encode: a lone surrogate (what a
    non-UTF-8 file name decodes to) as its escape.  A page, ``/metrics``
    and the report encode every string they send; one key that cannot be
    encoded would break them for the dashboard's whole life.

    >>> printable(b"read\xffcsv".decode("utf-8", "surrogateescape")), printable(("x", 1))
    ('read\\udcffcsv', "('x', 1)")
    """
    text = str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "\u2026"


def format_seconds(seconds: float) -> str:
    """
    >>> format_seconds(0.00042), format_seconds(1.5), format_seconds(0.012), format_seconds(0)
    ('420 \u00b5s', '1.5 s', '12 ms', '0 s')
    """
    if seconds >= 1 or seconds == 0:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} \u00b5s"


#: Longest task repr shown in a hover or kept in the JSON; task arguments can be huge arrays.
REPR_LIMIT = 100

_repr = reprlib.Repr()
_repr.maxlevel = 3
_repr.maxstring = 40
_repr.maxother = 40
for _attr in ("maxtuple", "maxlist", "maxarray", "maxdict", "maxset", "maxfrozenset", "maxdeque"):
    setattr(_repr, _attr, 4)


def short_repr(task, limit: int = REPR_LIMIT) -> str:
    """A bounded, readable repr of a task: ``add(1, 'x')`` for tuple tasks.

    What the plots' hovers and the saved JSON show of a task.

    >>> short_repr((max, 1, 'x'))
    "max(1, 'x')"
    >>> len(short_repr(list(range(10**6))) ) < 40
    True
    """
    if isinstance(task, tuple) and task and callable(task[0]):
        text = f"{funcname(task[0])}({', '.join(_repr.repr(arg) for arg in task[1:])})"
    else:
        text = _repr.repr(task)
    return shorten(text, limit)
