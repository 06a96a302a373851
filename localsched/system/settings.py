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

Read live, and cheaply: every read asks the environment as it is now (a
script, or a test's ``monkeypatch``, may change it between two reads), and
an unset name -- the usual case, read several times per process job --
costs no exception.  ``os.environ.get`` raises and catches a ``KeyError``
for it inside (about 1 µs); ``_raw`` looks the name up in the mapping
``os.environ`` keeps (CPython's ``_Environ._data``, with its own key
encoding), falling back on ``os.environ.get`` wherever that mapping is not
there (another implementation, or ``os.environ`` rebound to a dict).

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


# The mapping behind ``os.environ`` at import, its key encoding and decoding
# (CPython's ``_Environ``; None elsewhere), and our names' keys in it.
_ENVIRON = os.environ
_ENV_DATA = getattr(_ENVIRON, "_data", None)
_DECODE = getattr(_ENVIRON, "decodevalue", None)
_ENCODED = ({name: _ENVIRON.encodekey(name) for name in ENVIRONMENT}
            if isinstance(_ENV_DATA, dict) and callable(_DECODE)
            and callable(getattr(_ENVIRON, "encodekey", None)) else None)


def _raw(name: str) -> str | None:
    """``os.environ.get(name)``, without an exception for an unset name where
    ``os.environ`` is still the ``_Environ`` of import (see above)."""
    if _ENCODED is None or os.environ is not _ENVIRON:  # (elsewhere, or rebound)
        return os.environ.get(name)
    value = _ENV_DATA.get(_ENCODED[name])  # type: ignore[union-attr]
    return None if value is None else _DECODE(value)  # type: ignore[misc]

#: dask's config keys localsched reads (``dask_config``).
CONFIG = ("localsched.dashboard", "localsched.memory-limit", "localsched.memory.target",
          "localsched.memory.pause", "localsched.memory.spill",
          "localsched.memory.spill-directory", "localsched.memory.max-spill")


def text(name: str) -> str | None:
    """Environment variable ``name`` (one of ``ENVIRONMENT``), stripped, or
    its default where unset or empty."""
    value = (_raw(name) or "").strip()
    default = ENVIRONMENT[name].default
    return value or (default if isinstance(default, str) else None)


def flag(name: str) -> bool:
    """Whether ``name`` is on: unset or empty, its default; ``0``, ``off``,
    ``false``, ``no``, ``none``: off; anything else: on."""
    value = (_raw(name) or "").strip().lower()
    return bool(ENVIRONMENT[name].default) if not value else value not in _OFF


def integer(name: str) -> int:
    """``name`` as an int, at least its minimum; its default where unset or
    not an int."""
    setting = ENVIRONMENT[name]
    value = _raw(name)
    if value is None:  # (the common case)
        return int(setting.default or 0)
    try:
        return max(setting.minimum, int(value.strip()))
    except ValueError:
        return int(setting.default or 0)
