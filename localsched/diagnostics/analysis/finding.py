"""One finding: a cause of lost time (or memory), and what to change.

The record every rule returns (``rules``, ``causes``), with the few
phrasings they share: quoted group names, shares, megabytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..reporting.naming import shorten

__all__ = ["Finding", "names", "pct", "mb"]


@dataclass
class Finding:
    """One cause of lost time (or memory), and what to change."""

    kind: str
    title: str
    seconds: float
    groups: list = field(default_factory=list)
    fix: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"[{self.kind}] {self.title} Fix: {self.fix}"


def names(groups) -> str:
    """``'a', 'b'``: task groups as a finding quotes them."""
    return ", ".join(f"'{shorten(str(g), 40)}'" for g in groups)


def pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "-"


def mb(n: float) -> str:
    """Bytes as megabytes, to a tenth below 10 MB."""
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:,.1f} MB"
