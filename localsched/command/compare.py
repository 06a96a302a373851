"""``localsched compare [--repeats N] BEFORE... AFTER...``: did it get slower?

Reads saved runs (``--json``, ``RunData.save_json``, a report page), one a
side or ``--repeats N`` a side, prints the table of
``analysis.comparison.compare`` (each group's CPU seconds, the wall time,
the noise of the repeats, how much slower the after-run's machine was) and
exits with its status, so it can gate a CI job: 0 no regression; 1 a
regression, or a run with failed or interrupted tasks (or none at all); 2
bad input (a file that cannot be read, the wrong number of files); 3
inconclusive (a busy machine, runs without the speed probe: what grew may
be the neighbours).  Names and messages are printed through ``termsafe``
(shown, never obeyed).  ``cli`` only wires it in.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..system.termsafe import terminal_text

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


def _repeats(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def add_compare_parser(sub) -> None:
    """Add the ``compare`` subcommand to ``localsched``'s subparsers."""
    p = sub.add_parser(
        "compare",
        help="compare saved runs group by group; exit 1 on a regression or a failed run",
        description="Compare saved runs (JSON or report pages): each task group's CPU "
                    "seconds (task seconds where it mostly waits) and the wall time, at "
                    "the same machine speed (the speed probe saved with each run). "
                    "Exit 0: no regression; 1: a regression, or a run with failed or "
                    "interrupted tasks; 2: bad input; 3: inconclusive (one run a side on "
                    "a busy machine, or machine speeds that disagree: rerun quieter or "
                    "with --repeats).",
    )
    p.add_argument("runs", metavar="RUN.json", nargs="+",
                   help="BEFORE.json AFTER.json, or with --repeats N: N before-runs "
                        "then N after-runs")
    p.add_argument("--repeats", type=_repeats, default=1, metavar="N",
                   help="runs per side: their spread is the noise a change must exceed "
                        "(default: 1)")
    p.add_argument("--threshold", type=_share, default=None, metavar="THRESHOLD",
                   help="relative growth that counts, e.g. 0.5 or 50%% "
                        "(default: 0.4 at the same machine speed, with repeats 0.1 "
                        "beyond their spread)")
    p.epilog = "exit status: 0 no regression, 1 regression or failed run, 2 bad input, " \
               "3 inconclusive"
    p.add_argument("--min-seconds", type=_seconds, default=0.05, metavar="MIN_SECONDS",
                   help="absolute growth in seconds that counts as well (default: 0.05)")


def run_compare(args) -> int:
    """Run ``localsched compare``; returns the exit status."""
    from ..diagnostics.report import RunData

    n = args.repeats
    if len(args.runs) != 2 * n:
        print(f"localsched: compare takes {2 * n} files with --repeats {n} "
              f"({n} before, {n} after), got {len(args.runs)}", file=sys.stderr)
        return 2
    runs = []
    for path in args.runs:
        try:
            runs.append(RunData.load_json(path))
        except OSError as exc:
            print(f"localsched: cannot read {terminal_text(path)}: "
                  f"{terminal_text(exc.strerror or exc)}", file=sys.stderr)
            return 2
        except ValueError as exc:
            print(f"localsched: {terminal_text(exc)}", file=sys.stderr)
            return 2
    from ..diagnostics.analysis import compare

    result = compare(runs[:n], runs[n:], rel=args.threshold, min_seconds=args.min_seconds)
    names = (os.path.basename(args.runs[0]), os.path.basename(args.runs[n]))
    if names[0] == names[1] or n > 1:
        names = ("before", "after")
    print(result.table(names))
    return result.status

