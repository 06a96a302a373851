"""What a memory budget is: ``memory_limit=`` parsed, its thresholds, the machine's memory.

A budget is off by default.  It is set by the ``memory_limit=`` keyword of
every local get function (``dask.compute(..., memory_limit=...)`` forwards
it), else by the config key ``localsched.memory-limit`` (dask's config, when
dask is imported; ``DASK_LOCALSCHED__MEMORY_LIMIT`` in the environment
reaches it that way).  A limit is one of:

- a number of bytes (an int above 1);
- a string with a unit: ``"4GB"`` (10**9), ``"4GiB"`` (2**30), ``"512 MB"``;
- a fraction of the machine's memory: a float in (0, 1], or ``"50%"``;
- ``"auto"``: the container's limit where one is set (cgroup v2
  ``memory.max``, v1 ``memory.limit_in_bytes``), else the machine's RAM;
- None, 0, False or ``"none"``: no budget.

Its thresholds carry distributed's worker names, as fractions of the limit,
read from dask's config (``localsched.memory.*``) when the run starts:
``target`` (0.6: spilling starts there, so the real memory stays below the
limit while tasks run), ``pause`` (0.8: tasks that would add to what is held
wait), ``spill`` (False: spilling to disk is opt-in, as it has filled users'
disks elsewhere), ``spill-directory`` (None: the temp dir) and ``max-spill``
(None: no cap; bytes or a string as above).

>>> parse_memory_limit("4GB"), parse_memory_limit("1 KiB"), parse_memory_limit(2048)
(4000000000, 1024, 2048)
>>> parse_memory_limit(None), parse_memory_limit(0), parse_memory_limit("none")
(None, None, None)
>>> parse_memory_limit(0.5, total=1000), parse_memory_limit("25%", total=1000)
(500, 250)
"""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

from ..system.options import dask_config

__all__ = ["parse_memory_limit", "parse_bytes", "configured_limit", "thresholds",
           "Thresholds", "machine_memory", "container_limit"]

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_BYTES = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$")
_OFF = (None, False, 0, "", "none", "None", "0")


def parse_bytes(text: str) -> int:
    """``"4GB"`` -> 4000000000 (decimal and binary units, case-insensitive).

    >>> parse_bytes("1.5 MiB")
    1572864
    """
    m = _BYTES.match(text.lower())
    if m is None or m.group(2) not in _UNITS:
        raise ValueError(f"cannot read {text!r} as a number of bytes "
                         f"(e.g. 4GB, 512MiB, 1e9)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def parse_memory_limit(value: Any, total: int | None = None) -> int | None:
    """A ``memory_limit`` in bytes, or None for no budget (see the module
    docstring for the forms).  ``total``: the machine's memory, for
    fractions (default: ``container_limit()`` else ``machine_memory()``)."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        if value in _OFF:
            return None
        if not isinstance(value, str):
            raise ValueError(f"memory_limit={value!r} is not a limit (use bytes, '4GB', "
                             f"a fraction of memory, or 'auto')")
        text = value.strip()
        if text.lower() == "auto":
            return _system_total() if total is None else total
        if text.endswith("%"):
            return parse_memory_limit(float(text[:-1]) / 100, total)
        limit = parse_bytes(text)
    elif isinstance(value, float):
        if value == 0:
            return None
        if 0 < value <= 1:
            return int(value * (_system_total() if total is None else total))
        limit = int(value)
    elif isinstance(value, int):
        limit = value
    else:
        raise TypeError(f"memory_limit must be bytes, a string or a fraction, "
                        f"got {type(value).__name__}")
    if limit == 0:
        return None
    if limit < 0:
        raise ValueError(f"memory_limit must be positive, got {value!r}")
    return limit


def configured_limit(memory_limit: Any) -> int | None:
    """The run's limit: the keyword if given, else ``localsched.memory-limit``."""
    if memory_limit is None:
        memory_limit = dask_config("localsched.memory-limit")
    return parse_memory_limit(memory_limit)


class Thresholds(NamedTuple):
    """A budget's settings, in bytes (see the module docstring)."""

    limit: int
    target: int
    pause: int
    spill: bool
    spill_directory: str | None
    max_spill: int | None


def _fraction(name: str, default: float) -> float:
    value = dask_config(f"localsched.memory.{name}", default)
    if value is False:  # (distributed's way of switching a threshold off)
        return 1.0
    value = float(value)
    if not 0 < value <= 1:
        raise ValueError(f"localsched.memory.{name} must be a fraction in (0, 1], got {value!r}")
    return value


def thresholds(limit: int) -> Thresholds:
    """The budget's thresholds for ``limit``, from dask's config or the defaults."""
    target = _fraction("target", 0.6)
    pause = max(target, _fraction("pause", 0.8))
    max_spill = dask_config("localsched.memory.max-spill")
    if isinstance(max_spill, str):
        max_spill = parse_bytes(max_spill) if max_spill.lower() not in ("none", "") else None
    elif max_spill is False:
        max_spill = None
    return Thresholds(limit, int(limit * target), int(limit * pause),
                      bool(dask_config("localsched.memory.spill", False)),
                      dask_config("localsched.memory.spill-directory"),
                      int(max_spill) if max_spill is not None else None)


def machine_memory() -> int:
    """The machine's RAM in bytes."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # (not POSIX)
        import psutil

        return int(psutil.virtual_memory().total)


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # ("max": none)


def container_limit() -> int | None:
    """The memory limit of this process's cgroup (v2, else v1), if one is set."""
    group = ""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    group = line[3:].strip()
    except OSError:
        pass
    for path in (f"/sys/fs/cgroup{group}/memory.max", "/sys/fs/cgroup/memory.max",
                 "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        limit = _read_int(path)
        if limit is not None:
            return limit
    return None


def _system_total() -> int:
    """What ``"auto"`` and fractions measure against: the container's
    limit when it is below the machine's RAM, else the RAM."""
    total = machine_memory()
    limit = container_limit()
    return limit if limit is not None and 0 < limit < total else total
