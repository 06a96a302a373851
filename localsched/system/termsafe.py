"""Text that is safe to write to a terminal: names shown, never obeyed.

Task keys, group names, file names and error messages come from users and
from files; written raw, a name holding ``"\\x1b]0;title\\x07"`` sets the
window title, ``"\\x1b[2J"`` clears the screen, ``"\\r"`` overwrites the
line.  ``terminal_text`` writes every control character (C0, DEL, C1),
Unicode bidirectional override and lone surrogate as a visible escape
(``\\x1b``, ``\\r``, ``\\u202e``, ``\\udcff``), so what is printed is what
the name holds and the terminal does nothing.  Printable text (any script)
is left as it is.

>>> terminal_text("load-\\x1b]0;pwned\\x07")
'load-\\\\x1b]0;pwned\\\\x07'
>>> terminal_text("a\\r\\nb\\udcff"), terminal_text("café ✓")
('a\\\\r\\\\nb\\\\udcff', 'café ✓')
"""

from __future__ import annotations

__all__ = ["terminal_text"]


def _escape(code: int) -> str:
    if code <= 0xFF:
        return {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(code, f"\\x{code:02x}")
    return f"\\u{code:04x}"


_UNSAFE = [*range(0x00, 0x20), *range(0x7F, 0xA0),  # C0, DEL, C1 controls
           0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A),  # bidi
           *range(0xD800, 0xE000)]  # lone surrogates (undecodable bytes of file names)
_TABLE = {code: _escape(code) for code in _UNSAFE}


def terminal_text(text) -> str:
    """``str(text)`` with control characters, bidi overrides and lone
    surrogates written as escapes (see the module docstring)."""
    return str(text).translate(_TABLE)
