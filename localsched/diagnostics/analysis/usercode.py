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

import dis
import functools
import os
import sysconfig
from functools import lru_cache
from types import CodeType

__all__ = ["user_functions", "is_library", "library_of", "started_by_libraries",
           "task_code_files", "task_codes", "task_calls", "has_loop"]

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


def started_by_libraries(stacks) -> int:
    """How many computations a library started on its own, inside a call
    the user's code made for another one: of the callers' ``stacks`` (one
    per computation, outermost frame first; None where not recorded), those
    whose innermost user frame (the line) and first library frame below it
    are another's, with more library frames between them and the scheduler
    -- dask's ``set_index`` computing its divisions while ``compute()``
    lowers the expression, before the computation the line asked for.
    The same line computing again at the same depth (a loop) is the user's.

    >>> user, entry = ('/me/run.py', 9, 'main'), ('/x/site-packages/dask/base.py', 392, 'compute')
    >>> inner = [('/x/site-packages/dask/_expr.py', 440, 'optimize'), entry]
    >>> started_by_libraries([(user, entry), (user, entry, *inner), (user, entry)])
    1
    """
    sites: dict = {}
    places = []
    for stack in stacks:
        place = _entry(stack) if stack else None
        places.append(place)
        if place is not None:
            sites[place[0]] = min(sites.get(place[0], place[1]), place[1])
    return sum(1 for place in places if place is not None and place[1] > sites[place[0]])


def _entry(stack: tuple) -> tuple | None:
    """``((user frame's file and line, first library frame), depth)`` of a
    caller's stack, None without a user frame or a library call below it."""
    for i in range(len(stack) - 1, -1, -1):
        if not is_library(stack[i][0]):
            if i == len(stack) - 1:
                return None  # (the scheduler called straight from the user's code)
            return ((stack[i][0], stack[i][1], tuple(stack[i + 1])), len(stack) - i)
    return None


#: How far ``task_code_files`` looks into a task: nesting, and objects in all.
_TASK_DEPTH = 8
_TASK_OBJECTS = 500


def task_code_files(task) -> list | None:
    """The source files of the Python functions a task spec calls (built-ins
    have none), or None where it cannot say (no spec: a saved run keeps
    only its text).  It looks through tuples, lists and dicts, dask's task
    objects (their ``func``, ``args`` and ``kwargs``, fused subgraphs
    included), ``functools.partial``, compositions (``funcs``) and bound
    methods, ``_TASK_OBJECTS`` objects at most.  ``is_library`` of each
    tells the user's own code from the libraries' (dask's ``sum-partial``:
    NumPy's sum composed with dask's concatenate, no code of the user's).

    >>> import operator
    >>> f = lambda x: x  # (defined here, outside any library)
    >>> files = task_code_files((f, (operator.add, 1, 2)))
    >>> [is_library(name) for name in files], task_code_files('text')
    ([False], None)
    """
    codes = task_codes(task)
    return None if codes is None else [code.co_filename for code in codes]


def task_codes(task) -> list | None:
    """The code objects of the Python functions a task spec calls (as
    ``task_code_files`` finds them), or None where it cannot say."""
    calls = task_calls(task)
    return None if calls is None else [code for code, _called in calls]


def task_calls(task) -> list | None:
    """``(code, called)`` of each Python function in a task spec: ``called``
    where the task runs it itself (a dask task object's ``func``, a task
    tuple's head, a partial of one), not where it hands it to a library
    function as an argument, which may call it once an item (a bag's
    ``map_chunk`` calling the user's lambda).  None where it cannot say.

    >>> f = lambda x: x
    >>> [called for _code, called in task_calls((map, f, [1, 2]))]
    [False]
    >>> [called for _code, called in task_calls((f, 1))]
    [True]
    """
    if task is None or isinstance(task, str):
        return None
    calls: list = []
    _codes(task, calls, 0, [_TASK_OBJECTS], True)
    return calls


#: Opcodes that close a loop (3.11: ``JUMP_BACKWARD``; earlier: ``JUMP_ABSOLUTE``).
_LOOP_OPS = frozenset({"FOR_ITER", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                       "JUMP_ABSOLUTE"})


def has_loop(code: CodeType) -> bool:
    """Whether a function's code loops (a ``for``, a ``while``, a
    comprehension: its own code objects are looked into too).

    >>> has_loop((lambda b: b * 2 - 1).__code__), has_loop((lambda xs: [x for x in xs]).__code__)
    (False, True)
    """
    if any(ins.opname in _LOOP_OPS for ins in dis.get_instructions(code)):
        return True
    return any(has_loop(c) for c in code.co_consts if isinstance(c, CodeType))


def _codes(obj, out: list, depth: int, left: list, called: bool) -> None:
    """Append ``(code, called)`` of the Python functions ``obj`` holds;
    ``called``: ``obj`` is run by the task itself (a task, or its function)."""
    if depth > _TASK_DEPTH or left[0] <= 0:
        return
    left[0] -= 1
    code = getattr(obj, "__code__", None)
    if isinstance(code, CodeType):
        out.append((code, called))
        return
    if isinstance(obj, (str, bytes, int, float, type(None))):
        return
    parts: list
    if isinstance(obj, tuple) and obj and callable(obj[0]) and called:
        parts = [(obj[0], True), *((a, False) for a in obj[1:])]  # (a task tuple)
    elif isinstance(obj, (tuple, list)):
        parts = [(a, False) for a in obj]
    elif isinstance(obj, dict):
        parts = [(v, False) for v in obj.values()]
    elif isinstance(obj, functools.partial):
        parts = [(obj.func, called), *((a, False) for a in obj.args),
                 *((v, False) for v in obj.keywords.values())]
    elif hasattr(obj, "__func__"):  # (a bound method)
        parts = [(obj.__func__, called)]
    elif type(obj).__module__.split(".")[0] in ("dask", "toolz", "tlz", "cytoolz"):
        # (dask's Task runs its func, whatever holds it: a fused subgraph's
        # tasks too; a composition runs each of its funcs as it is run)
        task = hasattr(obj, "args") and hasattr(obj, "kwargs")
        parts = [(getattr(obj, a), (a == "func" and (task or called))
                  or (called and a in ("first", "funcs")))
                 for a in ("func", "args", "kwargs", "first", "funcs") if hasattr(obj, a)]
    else:
        return
    for part, runs in parts:
        if isinstance(part, (tuple, list)) and runs:  # (a composition's funcs)
            for each in part:
                _codes(each, out, depth + 1, left, True)
        else:
            _codes(part, out, depth + 1, left, runs)
