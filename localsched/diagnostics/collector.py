"""What the profilers share: raw records collected cheaply in the hot path,
plain records built on read, ``clear()``, ``visualize()`` and a ``with``
block that starts from a clean slate."""

from __future__ import annotations

import threading
from typing import ClassVar

from ..callbacks import Callback

__all__ = ["Collector"]


class Collector(Callback):
    """Base of the profilers.

    Subclasses append raw tuples to ``self._raw`` from their hooks (one
    ``list.append``, atomic, so computations in several threads can share a
    collector) and implement ``_records(raw)``: the list of records one raw
    entry stands for.
    """

    #: The record class of ``results`` (read by the plotting code).
    record_type: ClassVar[type]

    def __init__(self):
        self._raw: list = []
        # Records built from the first self._done raw entries.
        self._built: list = []
        self._done = 0
        # Guards the lazy build against two readers extending _built at once.
        self._build_lock = threading.Lock()

    def _records(self, raw: tuple) -> list:
        raise NotImplementedError

    def __enter__(self):
        self.clear()
        return super().__enter__()

    @property
    def results(self) -> list:
        """The records so far, oldest first (a copy)."""
        with self._build_lock:
            raw, built = self._raw, self._built
            if self._done < len(raw):
                for entry in raw[self._done:]:
                    built.extend(self._records(entry))
                self._done = len(raw)
            return list(built)

    def clear(self) -> None:
        """Forget all records."""
        with self._build_lock:
            # Rebind rather than .clear(): a computation appending right now
            # then lands in the old list, never half in each.
            self._raw = []
            self._built = []
            self._done = 0

    def visualize(self, **kwargs):
        """Plot the records with bokeh; see ``localsched.diagnostics.plots.visualize``."""
        from .plots import visualize

        return visualize(self, **kwargs)
