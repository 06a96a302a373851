"""``localsched compare BEFORE.json AFTER.json``: did a task group get slower?

Reads two saved runs (``--json``, ``RunData.save_json``, a report page),
prints the per-group table of ``RunData.compare`` and exits 1 when a group
regressed -- its task seconds grew by more than ``--threshold`` (a share,
default 0.10) and by more than ``--min-seconds`` (default 0.05) -- so it can
gate a CI job; 0 otherwise, 2 when a file cannot be read.  Names and
messages are printed through ``termsafe`` (shown, never obeyed).  ``cli``
only wires it in.
"""

from __future__ import annotations

import argparse
import os
import sys

from .termsafe import terminal_text

__all__ = ["add_compare_parser", "run_compare"]


def _share(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def add_compare_parser(sub) -> None:
    """Add the ``compare`` subcommand to ``localsched``'s subparsers."""
    p = sub.add_parser(
        "compare",
        help="compare two saved runs group by group; exit 1 on a regression",
        description="Compare two saved runs (JSON or report pages) task group by task "
                    "group, print the table, and exit 1 when a group's task seconds grew "
                    "by more than THRESHOLD and by more than MIN_SECONDS (a regression), "
                    "0 otherwise.",
    )
    p.add_argument("before", metavar="BEFORE.json", help="the reference run")
    p.add_argument("after", metavar="AFTER.json", help="the run to judge")
    p.add_argument("--threshold", type=_share, default=0.10, metavar="THRESHOLD",
                   help="relative growth that counts, e.g. 0.1 or 10%% (default: 0.1)")
    p.add_argument("--min-seconds", type=_seconds, default=0.05, metavar="MIN_SECONDS",
                   help="absolute growth in seconds that counts as well (default: 0.05)")


def run_compare(args) -> int:
    """Run ``localsched compare``; returns the exit status."""
    from .diagnostics.report import RunData

    runs = []
    for path in (args.before, args.after):
        try:
            runs.append(RunData.load_json(path))
        except OSError as exc:
            print(f"localsched: cannot read {terminal_text(path)}: "
                  f"{terminal_text(exc.strerror or exc)}", file=sys.stderr)
            return 2
        except ValueError as exc:
            print(f"localsched: {terminal_text(exc)}", file=sys.stderr)
            return 2
    result = runs[0].compare(runs[1], rel=args.threshold, min_seconds=args.min_seconds)
    names = (os.path.basename(args.before), os.path.basename(args.after))
    if names[0] == names[1]:
        names = ("before", "after")
    print(result.table(names))
    return 1 if result.regressions else 0
