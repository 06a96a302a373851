"""Where a computation was asked for: the caller's stack at its ``start`` hook.

A collector calls ``caller_stack()`` from its ``start`` hook, which runs in
the thread that handed the graph over.  It keeps the frames outside
localsched, outermost first, as ``(filename, line, function)`` (the shape
of a sample's stack, ``SampleData.stack``), at most ``LIMIT`` of them, the
innermost kept: the user's line and the library calls between it and the
scheduler.  The analysis reads them (``analysis.facts``: a computation that
a library started from inside another call of the same line -- dask's
``set_index`` computing its divisions while it lowers the expression -- is
no computation of the user's own).  About 10 µs a computation, nothing per
task.

>>> def user_line():
...     return caller_stack()
>>> user_line()[-1][2]
'user_line'
"""

from __future__ import annotations

import os
import sys
from types import FrameType

__all__ = ["caller_stack", "LIMIT"]

#: Frames kept at most (the innermost): deeper stacks are cut at the outer end.
LIMIT = 64

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def caller_stack() -> tuple:
    """The calling thread's frames outside localsched's own innermost ones,
    outermost first (see the module note)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # (the hook, the callbacks, the scheduler's call)
    out: list = []
    while frame is not None and len(out) < LIMIT:
        code = frame.f_code
        out.append((code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    out.reverse()
    return tuple(out)
