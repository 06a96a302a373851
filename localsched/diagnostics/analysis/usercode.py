"""The user's own code behind a task group: its function and line, from the
sampler's stacks, so that a finding names ``udf_score (my_script.py:12)``
rather than a hashed key.

Each sample's innermost frame outside libraries (site-packages, the
standard library, Python's import machinery, localsched itself but for its
demo; a comprehension is named by the function around it) is where the
user's code was; per group, the one with the most
seconds of samples wins.  The line is the function's first line (what the
sampler keeps: ``co_firstlineno``).

>>> from localsched.diagnostics.collectors.records import SampleData
>>> lib = ('/x/site-packages/pandas/frame.py', 40, 'apply')
>>> s = [SampleData(0.0, 1, 'score', (('/me/run.py', 12, 'udf_score'), lib), 0.01)]
>>> user_functions(s)
{'score': 'udf_score (run.py:12)'}
"""

from __future__ import annotations

import os
import sysconfig
from functools import lru_cache

__all__ = ["user_functions", "is_library", "library_of"]

_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_STDLIB = tuple({os.path.normcase(p) for p in (sysconfig.get_paths().get("stdlib"),
                                               sysconfig.get_paths().get("platstdlib")) if p})


def is_library(filename: str) -> bool:
    """Whether ``filename`` is a library's (not the user's own code)."""
    if filename.startswith("<frozen") or not filename:
        return True
    path = os.path.normcase(filename)
    if "site-packages" in path or "dist-packages" in path or path.startswith(_STDLIB):
        return True
    return path.startswith(_PACKAGE + os.sep) and not path.endswith("demo.py")


@lru_cache(maxsize=4096)
def library_of(filename: str) -> str | None:
    """The library ``filename`` belongs to -- its top-level package
    (``pandas``, ``numpy``; a standard library module's name; ``python``
    for the import machinery; ``localsched``) -- or None for the user's
    own code (as ``is_library`` says).

    >>> library_of('/x/site-packages/pandas/core/frame.py'), library_of('/me/run.py')
    ('pandas', None)
    """
    if not is_library(filename):
        return None
    if filename.startswith("<") or not filename:
        return "python"
    path = os.path.normcase(filename)
    for marker in ("site-packages", "dist-packages"):
        if marker in path:
            return _top(path.split(marker, 1)[1])
    if path.startswith(_PACKAGE + os.sep):
        return "localsched"
    for prefix in _STDLIB:
        if path.startswith(prefix):
            return _top(path[len(prefix):])
    return "python"


def _top(rest: str) -> str:
    name = rest.strip(os.sep).split(os.sep)[0]
    return name[:-3] if name.endswith(".py") else name or "python"


def user_functions(samples) -> dict:
    """``{group: "function (file:line)"}`` of each sampled group whose
    stacks reach the user's code."""
    seconds: dict = {}
    library: dict = {}
    for s in samples:
        if s.group is None or not s.stack:
            continue
        frame = None
        for fr in reversed(s.stack):
            if fr[2] in _COMPREHENSIONS:  # (named by the function around it)
                continue
            known = library.get(fr[0])
            if known is None:
                known = library[fr[0]] = is_library(fr[0])
            if not known:
                frame = fr
                break
        if frame is not None:
            per = seconds.setdefault(s.group, {})
            per[frame] = per.get(frame, 0.0) + (s.seconds or 1.0)
    return {g: f"{fr[2]} ({os.path.basename(fr[0])}:{fr[1]})"
            for g, per in seconds.items()
            for fr in (max(per, key=per.__getitem__),)}
