"""Small helpers shared by the scheduler front ends and the diagnostics."""

from __future__ import annotations

import re
import sys
from collections.abc import Hashable
from functools import lru_cache

__all__ = ["key_split", "funcname", "name_tasks", "add_note"]

# A 32-character hex name is a content hash (dask's ``tokenize``): "data".
_HEX_NAME = re.compile(r"[a-f0-9]{32}")
# dask drops an 8-letter word that starts with hex letters (a token made only of letters).
_HEX_START = re.compile(r"[a-f]+")


def key_split(key: Hashable) -> str:
    """The task group of a key: dask's ``dask.utils.key_split`` rule, without dask.

    The name part of a key: the words before the first one that is not purely
    alphabetic (a number, a token); the head of a tuple key; bytes decoded.
    A 32-digit hex name is ``'data'``, ``'<module.Class object at 0x..>'``
    is ``'Class'``, and anything that is no string (None, a number) is
    ``'Other'``.  The same key gets the same group here, on a cluster and on
    dask's dashboard.  Results are cached (one cache for every caller).

    >>> key_split('add-9f8e7d6c5b4a'), key_split('load_data-1'), key_split('x-1')
    ('add', 'load_data', 'x')
    >>> key_split(('sum-aggregate-4c2a9b1e00ff', 3, 1)), key_split(b'hello-world-1')
    ('sum-aggregate', 'hello-world')
    >>> key_split(7), key_split(None), key_split('x')
    ('Other', 'Other', 'x')
    """
    if type(key) is tuple:  # (name, index, ...): its name's group; cache names, not keys
        if not key:
            return "Other"
        key = key[0]
    try:
        return _cached_split(key)
    except TypeError:  # an unhashable key: no caching
        return _split(key)


@lru_cache(maxsize=100_000)
def _cached_split(key: Hashable) -> str:
    return _split(key)


def _split(key: object) -> str:
    if type(key) is tuple:
        return key_split(key[0]) if key else "Other"
    if type(key) is bytes:
        try:
            return key_split(key.decode())
        except UnicodeDecodeError:
            return "Other"
    if not isinstance(key, str) or not key:
        return "Other"
    words = key.split("-")
    head = words[0]
    if not head:
        return "Other"
    if not head[0].isalpha():
        # "('x-1', 0)" (a stringified tuple key) or "_(x)": keep the inner name
        head = head.split(",")[0].strip("_'()\"")
    kept = [head]
    for word in words[1:]:
        if not word.isalpha() or (len(word) == 8 and _HEX_START.match(word)):
            break
        kept.append(word)
    name = "-".join(kept)
    if not name:
        return "Other"
    if len(name) == 32 and _HEX_NAME.match(name):
        return "data"
    if name[0] == "<":
        parts = name.strip("<>").split()
        if not parts:
            return "Other"
        name = parts[0].split(".")[-1]
    return sys.intern(name)


def funcname(func) -> str:
    """A short readable name for a callable (unwraps functools.partial).

    >>> from functools import partial
    >>> funcname(partial(max, 1))
    'max'
    """
    while hasattr(func, "func") and not hasattr(func, "__name__"):
        func = func.func
    name = getattr(func, "__name__", None)
    if name is None:
        name = type(func).__name__
    return name


def name_tasks(keys: list) -> str:
    """How an error names the tasks it concerns (at most five named).

    >>> name_tasks(['x'])
    "task 'x'"
    >>> name_tasks(list('abcdefg'))
    "one of tasks 'a', 'b', 'c', 'd', 'e' and 2 more"
    """
    if len(keys) == 1:
        return f"task {keys[0]!r}"
    shown = ", ".join(repr(k) for k in keys[:5])
    more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
    return f"one of tasks {shown}{more}"


def add_note(exc: BaseException, note: str) -> None:
    """Add ``note`` to ``exc`` once (where notes exist: Python 3.11+)."""
    if hasattr(exc, "add_note") and note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
