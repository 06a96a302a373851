"""Everything the analysis says of a run, as one JSON-able dict: what the
saved JSON carries under ``"analysis"`` (for readers without localsched;
localsched recomputes it from the records) and what the report and the
dashboard show.

``{"findings": [...], "critical_path": {"seconds", "keys", "count"} | None,
"memory_peak": {"time", "bytes", "by_group"} | None, "what_if": {"workers":
{"1": s, "2": s, ...}, "floor", "overhead", "recorded"} | None}`` -- None
where the run did not measure what it needs.  Keys are JSON as the codec
writes them (tuples as arrays); the critical path's first ``KEYS_LIMIT``.
"""

from __future__ import annotations

from ..runs.codec import encode_key
from .facts import Facts
from .replay import WHAT_IF_WORKERS, what_if
from .rules import findings

__all__ = ["overview", "KEYS_LIMIT"]

#: How many keys of the critical path the dict keeps (``count`` says how many there are).
KEYS_LIMIT = 1000


def overview(run) -> dict:
    """The analysis of ``run`` (a ``RunData``) as a JSON-able dict (module docstring)."""
    facts = Facts(run)
    cp = facts.critical
    peak = facts.peak
    whatif = what_if(run, WHAT_IF_WORKERS, facts.comps)
    return {
        "findings": [f.as_dict() for f in findings(run, facts)],
        "critical_path": None if cp is None else {
            "seconds": cp.seconds, "count": len(cp.keys),
            "keys": [encode_key(k) for k in cp.keys[:KEYS_LIMIT]]},
        "memory_peak": None if peak is None else {
            "time": peak.time, "bytes": peak.bytes, "by_group": dict(peak.by_group)},
        "what_if": None if whatif is None else {
            **whatif, "workers": {str(n): s for n, s in whatif["workers"].items()}},
    }
