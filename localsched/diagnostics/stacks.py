"""Stack samples as a call tree: what the flame graph draws.

``stack_tree`` counts samples (``SampleData``: a stack, outermost frame
first) into nested nodes ``{"name", "filename", "line", "count",
"children"}``.  ``fold_imports=True`` cuts a stack at its first frame of
Python's import machinery (``<frozen importlib._bootstrap>``) and puts one
``(import)`` frame in place of the rest: a module imported inside a task
adds dozens of frames no one wants to read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .records import SampleData

__all__ = ["stack_tree", "fold_import_frames", "IMPORT_FRAME"]

#: The frame that stands for a folded import.
IMPORT_FRAME = ("<frozen importlib._bootstrap>", 0, "(import)")


def fold_import_frames(stack: tuple) -> tuple:
    """``stack`` up to its first import-machinery frame, then ``IMPORT_FRAME``.

    >>> f = ('m.py', 1, 'f')
    >>> imp = ('<frozen importlib._bootstrap>', 1176, '_find_and_load')
    >>> fold_import_frames((f, imp, ('lib.py', 3, 'g'))) == (f, IMPORT_FRAME)
    True
    """
    for i, frame in enumerate(stack):
        if frame[0].startswith("<frozen importlib"):
            return (*stack[:i], IMPORT_FRAME)
    return stack


def stack_tree(samples: Iterable[SampleData], group=None, start=None, stop=None, *,
               fold_imports: bool = False) -> dict:
    """Count stack samples into a call tree, the flame graph's input.

    Nodes are ``{"name", "filename", "line", "count", "children"}``; the root
    is ``"all"`` and counts every sample taken; a node's count is the samples
    whose stack passes through it; children are sorted by count, most first.
    ``fold_imports`` folds the import machinery (see the module docstring).
    ``group`` keeps the samples of one task group; ``start``/``stop`` (epoch
    seconds) the window ``start <= time < stop``.  The same tree as
    ``SampleProfiler.tree()`` (``localsched.diagnostics.sampler.tree``), built
    from plain records whatever took them (a cluster's samples too), and
    without recursion, so stacks of any depth work.

    >>> f, g = ('m.py', 1, 'f'), ('m.py', 9, 'g')
    >>> tree = stack_tree([SampleData(0.0, 1, 'x', (f, g)), SampleData(0.1, 1, 'x', (f,))])
    >>> tree['count'], [(c['name'], c['count'], c['children'][0]['name'])
    ...                 for c in tree['children']]
    (2, [('f', 2, 'g')])
    """
    root: dict[str, Any] = {"name": "all", "filename": "", "line": 0, "count": 0,
                            "children": {}}
    for s in samples:
        if group is not None and s.group != group:
            continue
        if start is not None and s.time < start or stop is not None and s.time >= stop:
            continue
        node: dict[str, Any] = root
        node["count"] += 1
        for frame in (fold_import_frames(s.stack) if fold_imports else s.stack):
            children = node["children"]
            child = children.get(frame)
            if child is None:
                filename, line, name = frame
                child = children[frame] = {"name": name, "filename": filename, "line": line,
                                           "count": 0, "children": {}}
            child["count"] += 1
            node = child
    return _listed(root)


def _listed(root: dict) -> dict:
    """Children dicts to sorted lists, in place; a loop, not recursion, since a
    deeply recursive program's stacks can be deeper than Python's recursion limit."""
    todo = [root]
    while todo:
        node = todo.pop()
        node["children"] = sorted(node["children"].values(),
                                  key=lambda c: (-c["count"], c["name"]))
        todo.extend(node["children"])
    return root

