"""Stack samples as a call tree: what the flame graph draws.

``stack_tree`` adds samples (``SampleData``: a stack, outermost frame
first) into nested nodes ``{"name", "filename", "line", "count",
"seconds", "children"}``: a node's ``count`` is the samples whose stack
passes through it and its ``seconds`` the time they stand for (each
sample's ``seconds``, the sampler's real period: see ``sample_seconds``).
A flame graph sizes frames by seconds, never by count, since the sampler's
real period varies (it waits for the GIL while tasks run Python).
``fold_imports=True`` cuts a stack at its first frame of Python's import
machinery (``<frozen importlib._bootstrap>``) and puts one ``(import)``
frame in place of the rest: a module imported inside a task adds dozens of
frames no one wants to read.  ``by_group=True`` roots each stack at its
task group (a frame named after the sampled task's group, ``BETWEEN_TASKS``
for a sample taken between two tasks), as distributed's profiler keeps a
tree per key: time spent in C code the task calls directly (NumPy's matmul),
whose stack below the task is empty, is still attributed to its group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .records import SampleData

__all__ = ["stack_tree", "sample_seconds", "width_key", "fold_import_frames", "IMPORT_FRAME",
           "group_frame", "BETWEEN_TASKS", "GROUP_FILE"]

#: The frame that stands for a folded import.
IMPORT_FRAME = ("<frozen importlib._bootstrap>", 0, "(import)")
#: The "file" of a task group's frame (``by_group``): no source to show.
GROUP_FILE = "<task group>"
#: The group frame of a sample taken between two tasks (handing results over).
BETWEEN_TASKS = "(between tasks)"


def group_frame(group: str | None) -> tuple:
    """The frame a stack is rooted at with ``by_group``.

    >>> group_frame('sum'), group_frame(None)
    (('<task group>', 0, 'sum'), ('<task group>', 0, '(between tasks)'))
    """
    return (GROUP_FILE, 0, BETWEEN_TASKS if group is None else str(group))


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


def sample_seconds(samples: Sequence[SampleData], interval: float | None = None) -> list:
    """The seconds each of ``samples`` stands for: its own ``seconds``; for
    a sample that does not say (a run saved before samples carried them),
    ``interval`` if given, else the mean of those that say, else 0.0.

    >>> f = ('m.py', 1, 'f')
    >>> sample_seconds([SampleData(0.0, 1, 'x', (f,), 0.3), SampleData(0.1, 1, 'x', (f,))])
    [0.3, 0.3]
    >>> sample_seconds([SampleData(0.0, 1, 'x', (f,))], interval=0.01)
    [0.01]
    """
    known = [s.seconds for s in samples if s.seconds is not None]
    if len(known) == len(samples):
        return known
    if interval is None:
        interval = sum(known) / len(known) if known else 0.0
    return [interval if s.seconds is None else s.seconds for s in samples]


def stack_tree(samples: Iterable[SampleData], group: str | None = None,
               start: float | None = None, stop: float | None = None, *,
               fold_imports: bool = False, interval: float | None = None,
               by_group: bool = False) -> dict:
    """Add stack samples into a call tree, the flame graph's input.

    Nodes are ``{"name", "filename", "line", "count", "seconds",
    "children"}``; the root is ``"all"`` and holds every sample taken; a
    node's count is the samples whose stack passes through it, its seconds
    the time they stand for (``sample_seconds``: ``interval`` for a sample
    that does not say); children are sorted by seconds, most first.
    ``fold_imports`` folds the import machinery, ``by_group`` roots each
    stack at its task group's frame (see the module docstring).
    ``group`` keeps the samples of one task group; ``start``/``stop`` (epoch
    seconds) the window ``start <= time < stop``.  The same tree as
    ``SampleProfiler.tree()`` (``localsched.diagnostics.collectors.sampler.tree``), built
    from plain records whatever took them (a cluster's samples too), and
    without recursion, so stacks of any depth work.

    >>> f, g = ('m.py', 1, 'f'), ('m.py', 9, 'g')
    >>> tree = stack_tree([SampleData(0.0, 1, 'x', (f, g), 0.03),
    ...                    SampleData(0.1, 1, 'x', (f,), 0.01)])
    >>> tree['count'], tree['seconds'], [(c['name'], c['count'], c['seconds'],
    ...                                   c['children'][0]['name']) for c in tree['children']]
    (2, 0.04, [('f', 2, 0.04, 'g')])
    >>> rooted = stack_tree([SampleData(0.0, 1, 'matmul', (), 0.05),
    ...                      SampleData(0.1, 1, 'x', (f,), 0.01)], by_group=True)
    >>> [(c['name'], c['seconds']) for c in rooted['children']]
    [('matmul', 0.05), ('x', 0.01)]
    """
    chosen = [s for s in samples
              if (group is None or s.group == group)
              and (start is None or s.time >= start) and (stop is None or s.time < stop)]
    root: dict[str, Any] = {"name": "all", "filename": "", "line": 0, "count": 0,
                            "seconds": 0.0, "children": {}}
    # Samples of one stack object first added up, then each stack walked
    # once: samples share their stacks (a saved run stores each once), so
    # the walk costs the distinct stacks' depth, not every sample's.
    shared: dict = {}  # (id(stack), group or None) -> [stack, group, count, seconds]
    for s, seconds in zip(chosen, sample_seconds(chosen, interval), strict=True):
        root["count"] += 1
        root["seconds"] += seconds
        entry = shared.get((id(s.stack), s.group if by_group else None))
        if entry is None:
            shared[(id(s.stack), s.group if by_group else None)] = [s.stack, s.group, 1, seconds]
        else:
            entry[2] += 1
            entry[3] += seconds
    for stack, sampled_group, count, seconds in shared.values():
        node: dict[str, Any] = root
        frames = fold_import_frames(stack) if fold_imports else stack
        if by_group:
            frames = (group_frame(sampled_group), *frames)
        for frame in frames:
            children = node["children"]
            child = children.get(frame)
            if child is None:
                filename, line, name = frame
                child = children[frame] = {"name": name, "filename": filename, "line": line,
                                           "count": 0, "seconds": 0.0, "children": {}}
            child["count"] += count
            child["seconds"] += seconds
            node = child
    return _listed(root)


def width_key(tree: Mapping) -> str:
    """What a flame graph sizes the frames of ``tree`` by: ``"seconds"``
    (the time their samples stand for), or ``"count"`` when no sample says
    its seconds (older saved runs).

    >>> width_key({'count': 2, 'seconds': 0.02}), width_key({'count': 2, 'seconds': 0.0})
    ('seconds', 'count')
    """
    return "seconds" if tree.get("seconds") else "count"


def _listed(root: dict) -> dict:
    """Children dicts to sorted lists (widest first), in place, seconds
    rounded to the nanosecond (sums of floats); a loop, not recursion, since
    a deeply recursive program's stacks can be deeper than Python's
    recursion limit."""
    root["seconds"] = round(root["seconds"], 9)
    todo = [root]
    while todo:
        node = todo.pop()
        children = list(node["children"].values())
        for child in children:
            child["seconds"] = round(child["seconds"], 9)
        children.sort(key=lambda c: (-c["seconds"], -c["count"], c["name"]))
        node["children"] = children
        todo.extend(children)
    return root
