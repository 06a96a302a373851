"""The kind of segment this process uses (``kinds``,
``named_mappings``), chosen once from what ``localsched._platform`` says the
platform has; a forked child chooses afresh (the parent's kind object holds
the parent's handles)."""

from __future__ import annotations

import os

from .. import _platform
from .kinds import DevShmFiles, PosixObjects, SegmentKind
from .named_mappings import NamedMappings, SimulatedNamedMappings

__all__ = ["kind"]

_kind: list = []  # [the kind, or None]: chosen on first use


def kind() -> SegmentKind | None:
    """This platform's kind of segment, or None (no shared memory)."""
    if not _kind:
        made: SegmentKind | None = None
        which = _platform.shared_memory_kind()
        if which == "files":
            made = DevShmFiles()
        elif which == "posix":
            made = PosixObjects()
        elif which == "named":
            made = NamedMappings()
        elif which == "named-simulated":
            made = SimulatedNamedMappings()
        _kind.append(made)
    return _kind[0]


def _after_fork_in_child() -> None:
    _kind.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
