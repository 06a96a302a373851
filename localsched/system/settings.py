"""What users may set, read in one place, one way.

Every environment variable a user may set for localsched is listed here
(``ENVIRONMENT``) and read through ``flag``, ``integer`` or ``text``: when
used (workers read theirs when they start), so a script may set one before
the computation it concerns; a value that cannot be read as its kind means
the default, never an error.  dask's config keys (``localsched.*``: the
dashboard, the memory budget, listed in ``CONFIG``) are read through
``localsched.system.options.dask_config`` when dask is imported.  One table in the
docs (``docs/guides/settings.md``) lists both; a test checks that it lists
exactly these.

>>> flag("LOCALSCHED_SHM"), integer("LOCALSCHED_SHM_THRESHOLD") > 0
(True, True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Setting", "ENVIRONMENT", "CONFIG", "flag", "integer", "text"]

_OFF = ("0", "off", "false", "no", "none")


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, kind ("flag", "int", "text"),
    default and, for an int, the least value taken."""

    name: str
    kind: str
    default: bool | int | str | None
    minimum: int = 0


ENVIRONMENT = {s.name: s for s in (
    Setting("LOCALSCHED_SHM", "flag", True),
    Setting("LOCALSCHED_SHM_THRESHOLD", "int", 64 * 1024, minimum=1),
    Setting("LOCALSCHED_SHM_RESERVE", "int", 16 * 1024 * 1024),
    Setting("LOCALSCHED_WORKER_MALLOC", "flag", True),
    Setting("LOCALSCHED_DASHBOARD", "text", None),
    Setting("DASK_LOCALSCHED__DASHBOARD", "text", None),
    Setting("LOCALSCHED_DASHBOARD_ALLOWED_HOSTS", "text", None),
    Setting("LOCALSCHED_DASHBOARD_LINK", "text", None),
)}

#: dask's config keys localsched reads (``dask_config``).
CONFIG = ("localsched.dashboard", "localsched.memory-limit", "localsched.memory.target",
          "localsched.memory.pause", "localsched.memory.spill",
          "localsched.memory.spill-directory", "localsched.memory.max-spill")


def text(name: str) -> str | None:
    """Environment variable ``name`` (one of ``ENVIRONMENT``), stripped, or
    its default where unset or empty."""
    value = os.environ.get(name, "").strip()
    default = ENVIRONMENT[name].default
    return value or (default if isinstance(default, str) else None)


def flag(name: str) -> bool:
    """Whether ``name`` is on: unset or empty, its default; ``0``, ``off``,
    ``false``, ``no``, ``none``: off; anything else: on."""
    value = os.environ.get(name, "").strip().lower()
    return bool(ENVIRONMENT[name].default) if not value else value not in _OFF


def integer(name: str) -> int:
    """``name`` as an int, at least its minimum; its default where unset or
    not an int."""
    setting = ENVIRONMENT[name]
    value = os.environ.get(name)
    if value is None:  # (the common case, without the cost of an exception)
        return int(setting.default or 0)
    try:
        return max(setting.minimum, int(value.strip()))
    except ValueError:
        return int(setting.default or 0)
