"""Writing an output file (report page, saved run, trace) all or nothing.

``write_text(path, text)`` writes to a temporary file beside ``path`` and
renames it over ``path`` once every byte is on disk: a failure part-way (a
full disk, an unencodable character, Ctrl-C) leaves any older file at
``path`` as it was and no truncated page, and the temporary file is
removed.  The temporary file is created with ``open(..., "x")``, so it gets
the permissions the umask gives a new file (not ``mkstemp``'s 0600).

Text is encoded as UTF-8 with ``errors="backslashreplace"``: a lone
surrogate (a file name that was not valid UTF-8, decoded by Python with
``surrogateescape``) is written as the six characters ``\\udcff`` instead of
failing.  JSON written by localsched is ASCII already (``json.dumps``'s
``ensure_ascii`` escapes surrogates as ``\\udcff``, which reads back as the
same string), so a page and the JSON inside it show the same escape.

``check_writable(path)`` says, before any work is done, why ``path`` could
not be written (its directory missing or read-only, ``path`` a directory),
or None.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), 'page.html')
>>> write_text(path, 'caf\\u00e9 \\udcff')
>>> open(path, 'rb').read()
b'caf\\xc3\\xa9 \\\\udcff'
>>> check_writable(os.path.join(path + '.d', 'x.html'))  # doctest: +ELLIPSIS
'no such directory: ...page.html.d'
"""

from __future__ import annotations

import os
import secrets

__all__ = ["write_text", "check_writable", "ENCODING_ERRORS"]

#: How characters UTF-8 cannot encode (lone surrogates) are written.
ENCODING_ERRORS = "backslashreplace"


def write_text(path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8) through a temporary file and a
    rename: ``path`` is either its old self or the whole new text."""
    path = os.fspath(path)
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temp, "x", encoding="utf-8", errors=ENCODING_ERRORS) as f:
            f.write(text)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def check_writable(path) -> str | None:
    """Why ``path`` cannot be written as an output file, or None if it can
    (as far as can be told before writing)."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        what = "not a directory" if os.path.exists(folder) else "no such directory"
        return f"{what}: {folder}"
    if os.path.isdir(path):
        return f"is a directory: {path}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"directory not writable: {folder}"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        # (a rename would replace it anyway; refuse as open() would)
        return f"file not writable: {path}"
    return None
