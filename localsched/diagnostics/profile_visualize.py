"""dask's ``dask.diagnostics.profile_visualize`` names, so imports port by one word.

``from dask.diagnostics.profile_visualize import visualize`` becomes
``from localsched.diagnostics.profile_visualize import visualize``.  The
plotting itself lives in :mod:`localsched.diagnostics.reporting.plots`; this module
adds dask's small helpers and imports bokeh only when one is called.

>>> unquote((dict, [['a', 1], ['b', (list, [2, 3])]]))
{'a': 1, 'b': [2, 3]}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["visualize", "plot_tasks", "plot_resources", "plot_cache", "get_colors", "unquote",
           "BOKEH_VERSION"]


def visualize(profilers, filename="profile.html", show=True, save=True, mode=None, **kwargs):
    """See :func:`localsched.diagnostics.reporting.plots.visualize`."""
    from .reporting.plots import visualize as _visualize

    return _visualize(profilers, filename=filename, show=show, save=save, mode=mode, **kwargs)


def plot_tasks(results, *args, **kwargs):
    """See :func:`localsched.diagnostics.reporting.plots.plot_tasks`."""
    from .reporting.plots import plot_tasks as _plot_tasks

    return _plot_tasks(results, *args, **kwargs)


def plot_resources(results, *args, **kwargs):
    """See :func:`localsched.diagnostics.reporting.plots.plot_resources`."""
    from .reporting.plots import plot_resources as _plot_resources

    return _plot_resources(results, *args, **kwargs)


def plot_cache(results, *args, **kwargs):
    """See :func:`localsched.diagnostics.reporting.plots.plot_cache`."""
    from .reporting.plots import plot_cache as _plot_cache

    return _plot_cache(results, *args, **kwargs)


def BOKEH_VERSION():  # noqa: N802 -- dask's name
    """The installed bokeh's version, as a ``packaging`` Version (``.major`` ...)."""
    import bokeh
    from packaging.version import Version

    return Version(bokeh.__version__)


def get_colors(palette: str, funcs: Iterable) -> list:
    """One colour per item of ``funcs``, equal items equal colours, from the
    bokeh palette family ``palette`` (e.g. ``"Viridis"``).

    Distinct items get distinct colours as far as the family's largest
    palette allows; as many distinct items as one of its palettes has get
    exactly that palette, in order of first appearance.

    >>> get_colors('Blues', ['a', 'b', 'a'])[0] == get_colors('Blues', ['a', 'b', 'a'])[2]
    True
    """
    from bokeh.palettes import all_palettes, linear_palette

    funcs = list(funcs)
    distinct = list(dict.fromkeys(funcs))
    family = all_palettes[palette]
    n = len(distinct)
    if n in family:
        colours = list(family[n])
    else:
        largest = family[max(family)]
        if n <= len(largest):
            colours = list(linear_palette(largest, max(n, 1)))
        else:  # more items than colours: spread them over all of them
            colours = [largest[i * len(largest) // n] for i in range(n)]
    colour_of = dict(zip(distinct, colours, strict=False))
    return [colour_of[f] for f in funcs]


def unquote(expr: Any) -> Any:
    """The value a task spelling a literal container stands for.

    dask writes literal containers holding keys as tasks: ``(dict, [[k, v],
    ...])``, ``(list, [...])``, ``(tuple, [...])``, ``(set, [...])``.  Anything
    else is returned unchanged.

    >>> unquote((tuple, [1, (list, [2])]))
    (1, [2])
    >>> unquote([1, 2])
    [1, 2]
    """
    if type(expr) is tuple and len(expr) == 2 and isinstance(expr[1], list):
        head, items = expr
        if head in (list, tuple, set):
            return head(unquote(item) for item in items)
        if head is dict and all(isinstance(item, list) and len(item) == 2 for item in items):
            return {unquote(k): unquote(v) for k, v in items}
    return expr
