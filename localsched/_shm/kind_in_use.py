"""The kind of segment of a platform value (``kinds``,
``named_mappings``): made once per ``Platform`` and process from what the
platform names, and held by the store made for that platform (and by a
worker's side, for its pool's).  A forked child makes its own (the
parent's kind object holds the parent's handles)."""

from __future__ import annotations

import functools
import os

from ..system import platform as _platform
from .kinds import DevShmFiles, PosixObjects, SegmentKind
from .named_mappings import NamedMappings

__all__ = ["kind_of"]

_BY_NAME = {"files": DevShmFiles, "posix": PosixObjects, "named": NamedMappings}


def kind_of(platform: _platform.Platform) -> SegmentKind | None:
    """``platform``'s kind of segment (one object per process), or None
    (no shared memory: the pipes)."""
    return _made(platform, os.getpid())


@functools.cache
def _made(platform: _platform.Platform, pid: int) -> SegmentKind | None:
    which = platform.segment_kind
    if which is None:
        return None
    # (a name of the kinds here, or a kind's class: a simulated one, the tests')
    make = _BY_NAME[which] if isinstance(which, str) else which
    return make()
