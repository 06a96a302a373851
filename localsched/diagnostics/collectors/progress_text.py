"""The text progress bar: a :class:`Progress` as one line, redrawn in place.

Group lines are redrawn with ANSI cursor movement on a terminal, and
written once at the end elsewhere (a log holds no escape codes).  Group
names are written through ``termsafe.terminal_text``: a control character
in a task's name is shown as an escape, never sent to the terminal.
"""

from __future__ import annotations

import sys
from typing import Any

from ...system.termsafe import terminal_text
from .progress_view import FORMATS, Progress, format_time, short_name, timing_text

__all__ = ["TextRenderer"]


class TextRenderer:
    """Draw progress as text, redrawn in place with ``'\\r'``.

    The main line looks like
    ``[####################                    ] | 50% Completed | 00:01<00:01, 812.0 tasks/s``
    (``style="dask"``: ``... | 50% Completed |  1.2s``, dask's line) and a
    final render ends it with a newline.  Group lines (with
    ``group_by``) are redrawn in place with ANSI cursor movement when ``out``
    is a terminal; otherwise (a file, a notebook stream) they are written
    once, after the final main line, so a log holds no escape codes.

    Parameters
    ----------
    out : file-like, optional
        Where to write; None means ``sys.stdout`` as it is when a
        computation's first line is drawn (so redirections made after the
        renderer was built, e.g. by pytest, are honoured).
    width : int
        Characters of each bar.
    tty : bool, optional
        Whether ``out`` is a terminal; None asks ``out.isatty()``.
    style : "tqdm" or "dask"
        The end of the main line: ``elapsed<remaining, rate`` or dask's
        elapsed time alone.

    >>> import io
    >>> out = io.StringIO()
    >>> r = TextRenderer(out, width=10, style="dask")
    >>> r.render(Progress(3, 10, 1.25))
    >>> r.render(Progress(10, 10, 2.0, status="finished"))
    >>> out.getvalue()
    '\\r[###       ] | 30% Completed |  1.2s\\r[##########] | 100% Completed |  2.0s\\n'
    >>> TextRenderer(width=10).bar_line(Progress(3, 10, 1.25, remaining=3.0, rate=2.4))
    '[###       ] | 30% Completed | 00:01<00:03, 2.4 tasks/s'
    """

    def __init__(self, out=None, width: int = 40, *, tty: bool | None = None,
                 style: str = "tqdm"):
        if style not in FORMATS:
            raise ValueError(f"style must be one of {FORMATS}, got {style!r}")
        self.out = out
        self.width = width
        self.tty = tty
        self.style = style
        self._stream: Any = None  # the stream of the current computation
        self._height = 0  # lines of the block drawn last (tty group mode)

    def render(self, progress: Progress) -> None:
        """Draw ``progress``; a final one ends the display with a newline."""
        out = self._stream
        if out is None:
            out = self._stream = sys.stdout if self.out is None else self.out
        main = self.bar_line(progress)
        groups = self.group_lines(progress.groups)
        if groups and self._is_tty(out):
            # Back to the block's first line, then rewrite every line.
            up = f"\x1b[{self._height - 1}A" if self._height > 1 else ""
            text = "\r" + up + "\n".join("\x1b[2K" + line for line in [main, *groups])
            self._height = 1 + len(groups)
        else:
            text = "\r" + main
            if groups and progress.final:
                text += "\n" + "\n".join(groups)
        if progress.final:
            text += "\n"
            self._stream = None
            self._height = 0
        out.write(text)
        out.flush()

    def bar_line(self, progress: Progress) -> str:
        """The main line, without ``'\\r'``."""
        width = self.width
        filled = progress.done * width // progress.total if progress.total else width
        head = f"[{'#' * filled:<{width}}] | {progress.percent}% Completed | "
        if self.style == "dask":
            return head + format_time(progress.elapsed)
        return head + timing_text(progress)

    def group_lines(self, groups) -> list:
        """One line per group: name, bar, ``done/total``."""
        if not groups:
            return []
        # (names come from keys: escaped, so a name cannot drive the terminal)
        names = [short_name(terminal_text(g.name)) for g in groups]
        name_w = max(map(len, names))
        count_w = len(str(max(g.total for g in groups)))
        width = self.width
        lines = []
        for name, g in zip(names, groups, strict=False):
            filled = g.done * width // g.total if g.total else width
            lines.append(
                f"  {name:<{name_w}} [{'#' * filled:<{width}}] {g.done:>{count_w}}/{g.total}"
            )
        return lines

    def _is_tty(self, out) -> bool:
        if self.tty is not None:
            return self.tty
        try:
            return bool(out.isatty())
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            return False

