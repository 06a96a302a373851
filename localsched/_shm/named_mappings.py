"""Windows named mappings as segments.

A named mapping backed by the paging file (what
``multiprocessing.shared_memory`` makes on Windows) exists while some
process holds a handle to it or a view of it, and Windows frees it with the
last, however its holders end: there is nothing to reap, no owner lock, no
sweep, and nothing to list or rename.  The price is a rule of hand-over: a
worker that writes a result must hold its mapping until the owner holds
one of its own, or the result would vanish in between.  So:

- the owner *adopts* each handle it receives (``adopt``, called where the
  pool's listener unpickles a worker's records): it opens the mapping and
  keeps the handle until it releases the segment, which is what
  ``unlink`` means here (close this process's handle; the OS frees the
  mapping when no handle or view is left);
- a worker holds what it wrote until the pool, having read the job's last
  message, sends ``LET_GO`` (the worker's next job and ``STOP`` do the
  same: the pool sends neither before it has read the job to its end).
  Every record of the job, with every handle in it, came before that last
  message on the same pipe, so by then the owner holds them all.  A
  worker's results therefore outlive the computation by one message;
- a reader maps a copy-on-write view by name (``FILE_MAP_COPY``):
  zero-copy, and a task writing into its input gets private pages, as
  with the files of Linux.

None of this has run on Windows here.  ``usable`` therefore runs a
self-test once per process before the first segment (make a mapping,
write it through one view, read it through a private one, write into that
one and read the mapping again): if any call fails or a byte differs, the
pipes are used with one warning naming the failure, as before.

The tests run the same protocol (``HandOver``) on Linux with POSIX
objects as handles (``tests/support/windows_sim.py``: a kind of theirs, named by
the simulated ``Platform``).
"""

from __future__ import annotations

import mmap
import os
import secrets
from typing import Any

from ..system import platform as _platform
from .kinds import SegmentKind

__all__ = ["HandOver", "NamedMappings"]

_PROBE = b"localsched"


def _copy_in(view, layout: tuple, buffers: list) -> None:
    with memoryview(view) as pages:
        for (off, n), b in zip(layout, buffers, strict=True):
            pages[off:off + n] = memoryview(b).cast("B")


class HandOver(SegmentKind):
    """The protocol both share: handles held per name, adopted by the
    owner, let go by the writer, closed by ``unlink``."""

    prefix = "lsw"
    held_outside_rss = True  # held by a handle, mapped by nobody
    writer_holds = True  # until the pool says LET_GO: see the module note

    def __init__(self) -> None:
        self._held: dict = {}  # name -> this process's handle of it
        self._self_test: str | None = None  # None: not run; "": passed; else why not

    def usable(self, inodes: int) -> tuple[int | None, str]:
        if self._self_test is None:
            self._self_test = self._check()
        return (None, self._self_test) if self._self_test else (-1, "")

    def _check(self) -> str:
        """"" if this process can make, write and read a segment privately."""
        name = f"{self.prefix}check{os.getpid()}_{secrets.token_hex(3)}"
        size = mmap.PAGESIZE
        try:
            self.done_writing(self.create(name, size))
            self.write(name, size, ((0, len(_PROBE)),), [_PROBE])
            first = self.read_private(name, size)
            read = bytes(first[:len(_PROBE)])
            first[0] = 0  # (private: the mapping keeps its byte)
            again = bytes(self.read_private(name, size)[:len(_PROBE)])
        except Exception as exc:
            return f"named mappings failed a self-test ({exc!r})"
        finally:
            self.unlink(name)
        if read != _PROBE or again != _PROBE:
            return "named mappings failed a self-test (copy-on-write views)"
        return ""

    def done_writing(self, token) -> None:
        """(The writer holds its handle until ``let_go`` or ``unlink``.)"""

    def adopt(self, name: str) -> None:
        if name in self._held:
            return
        try:
            self._held[name] = self._open(name)
        except OSError:
            pass  # (gone: its writer died first; reading it will say so)

    def let_go(self, names: list) -> None:
        for name in names:
            self.unlink(name)

    def unlink(self, name: str) -> None:
        handle = self._held.pop(name, None)
        if handle is not None:
            self._close(name, handle)

    def _open(self, name: str):
        raise NotImplementedError

    def _close(self, name: str, handle) -> None:
        raise NotImplementedError


class NamedMappings(HandOver):
    """Segments as Windows named mappings."""

    owner_lock = False  # the OS frees what a dead process held

    def create(self, name: str, size: int) -> Any:
        self._held[name] = _platform.named_mapping_create(name, size)
        return name

    def write(self, name: Any, size: int, layout: tuple, buffers: list) -> None:
        view = _platform.named_mapping_view(name, size, private=False)
        try:
            _copy_in(view, layout, buffers)
        finally:
            view.close()

    def read_private(self, name: str, size: int) -> memoryview:
        handle = self._open(name)  # (so the view below finds it, not a new one)
        try:
            view = _platform.named_mapping_view(name, size, private=True)
        finally:
            self._close(name, handle)
        return memoryview(view)

    def _open(self, name: str):
        return _platform.named_mapping_open(name)

    def _close(self, name: str, handle) -> None:
        _platform.named_mapping_close(handle)
