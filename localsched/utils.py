"""Small helpers shared by the scheduler front ends and the diagnostics."""

from __future__ import annotations

import re
from typing import Hashable

__all__ = ["key_split", "funcname", "name_tasks", "add_note"]

_hex_token = re.compile(r"^[0-9a-f]{6,}$")


def key_split(key: Hashable) -> str:
    """The task-group name of a key: its name part, without tokens or indices.

    >>> key_split('add-9f8e7d6c5b4a')
    'add'
    >>> key_split(('sum-aggregate-4c2a9b1e00ff', 3, 1))
    'sum-aggregate'
    >>> key_split(b'load_data-1')
    'load_data-1'
    >>> key_split('x')
    'x'
    >>> key_split(7)
    '7'
    """
    if isinstance(key, tuple):
        if not key:
            return "()"
        key = key[0]
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    if not isinstance(key, str):
        return str(key)
    words = key.split("-")
    kept = [words[0]]
    for word in words[1:]:
        if _hex_token.match(word) and any(c.isdigit() for c in word):
            break
        kept.append(word)
    return "-".join(kept)


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
