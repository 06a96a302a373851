"""The widget progress bar: a :class:`Progress` as ipywidgets in Jupyter.

ipywidgets is imported when the first widget is built, never before;
``in_notebook`` says whether to pick the widget at all, importing nothing.
"""

from __future__ import annotations

import html
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from .progress_view import FINISHED, Progress, short_name, timing_text

__all__ = ["WidgetRenderer", "in_notebook", "import_ipywidgets"]


class WidgetRenderer:
    """Draw progress as ipywidgets: one ``FloatProgress`` and an HTML label,
    plus one bar per task group.

    The widgets of a computation are built and shown on its first render and
    stay readable afterwards as ``box``, ``bar``, ``label`` and
    ``group_bars`` (a dict name -> FloatProgress) until the next computation
    starts.  ``bar.value`` counts finished tasks out of ``bar.max``; a
    final render sets ``bar_style`` to ``'success'`` or ``'danger'``.

    Parameters
    ----------
    display : callable, optional
        Shows a widget; None means ``IPython.display.display`` (imported on
        first use).  Inject a function to use the renderer without a notebook.

    >>> shown = []
    >>> r = WidgetRenderer(display=shown.append)
    >>> r.render(Progress(2, 4, 0.5))
    >>> r.render(Progress(4, 4, 1.0, status="finished"))
    >>> shown == [r.box], r.bar.value, r.bar.max, r.bar.bar_style
    (True, 4.0, 4.0, 'success')
    """

    def __init__(self, *, display: Callable[[Any], Any] | None = None):
        self._display = display
        self._live = False
        # (ipywidgets objects, built on a computation's first render)
        self.box: Any = None
        self.bar: Any = None
        self.label: Any = None
        self.group_bars: dict = {}
        self._group_labels: list = []

    def render(self, progress: Progress) -> None:
        """Update the widgets (built and shown on a computation's first render)."""
        if not self._live:
            self._build(progress)
        self.bar.value = progress.done
        self.label.value = (
            f"<tt>{progress.done}/{progress.total} tasks | {progress.percent}% Completed"
            f" | {html.escape(timing_text(progress))}</tt>"
        )
        for g, count in zip(progress.groups, self._group_labels, strict=False):
            self.group_bars[g.name].value = g.done
            count.value = f"<tt>{g.done}/{g.total}</tt>"
        if progress.final:
            ok = progress.status == FINISHED
            self.bar.bar_style = "success" if ok else "danger"
            # After an error, groups that had finished still show as such.
            for g in progress.groups:
                done = ok or g.done >= g.total
                self.group_bars[g.name].bar_style = "success" if done else "danger"
            self._live = False

    def _build(self, progress: Progress) -> None:
        ipywidgets = import_ipywidgets()
        self.bar = ipywidgets.FloatProgress(value=0, min=0, max=max(progress.total, 1))
        self.label = ipywidgets.HTML()
        rows = [ipywidgets.HBox([self.bar, self.label])]
        self.group_bars = {}
        self._group_labels = []
        for g in progress.groups:
            bar = ipywidgets.FloatProgress(value=0, min=0, max=max(g.total, 1))
            count = ipywidgets.HTML()
            name = ipywidgets.HTML(f"<tt>{html.escape(short_name(g.name))}</tt>")
            name.layout.width = "12em"
            rows.append(ipywidgets.HBox([name, bar, count]))
            self.group_bars[g.name] = bar
            self._group_labels.append(count)
        self.box = ipywidgets.VBox(rows)
        show = self._display
        if show is None:
            from IPython.display import display

            show = display
        show(self.box)
        self._live = True


def import_ipywidgets():
    try:
        import ipywidgets
    except ImportError as exc:
        raise ImportError(
            "ProgressBar(display='widget') needs ipywidgets: "
            "pip install ipywidgets (or localsched[notebook])"
        ) from exc
    return ipywidgets


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel that can show ipywidgets.

    Imports nothing: a kernel has already imported IPython and ipykernel,
    so if they are not in ``sys.modules`` this is no notebook.
    """
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    try:
        from ipykernel.zmqshell import ZMQInteractiveShell

        shell = ipython.get_ipython()
        return (
            isinstance(shell, ZMQInteractiveShell)
            and importlib.util.find_spec("ipywidgets") is not None
        )
    except Exception:  # a half-initialised or exotic shell: fall back to text
        return False

