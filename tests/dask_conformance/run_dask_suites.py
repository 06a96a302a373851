"""Run dask's collection test suites with localsched as the default scheduler.

Slow (minutes), so not part of the test suite: pytest does not collect it, and
it runs nothing when imported.  From the repository root::

    .venv/bin/python tests/dask_conformance/run_dask_suites.py            # default sample
    .venv/bin/python tests/dask_conformance/run_dask_suites.py --compare  # + dask's own run;
                                                  # report only failures dask does not have
    .venv/bin/python tests/dask_conformance/run_dask_suites.py -k compute_forward_kwargs
    .venv/bin/python tests/dask_conformance/run_dask_suites.py --scheduler sync --named \\
        dask/bag/tests/test_bag.py
    .venv/bin/python tests/dask_conformance/run_dask_suites.py --scheduler like-dask --compare

(dask.dataframe needs pyarrow; without it that suite is one collection error:
``pip install --target DIR pyarrow`` and put DIR on PYTHONPATH for the run.)

Paths are relative to the installed dask package's parent (site-packages).
The run sets ``dask.config.set(scheduler=<localsched get>)`` for the whole
pytest session (``localsched_default``), uses pytest-xdist (``-n``), and
prints the failures grouped by their error line, most frequent first, with a
few test ids each.  ``--json FILE`` keeps every outcome.

>>> normalize("assert <Foo object at 0x7f3a2b1c> == 3 (core.py:12)")
'assert <Foo object at 0x…> == 3 (core.py:…)'
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

DEFAULT_SUITES = (
    "dask/array/tests/test_array_core.py",
    "dask/bag/tests/test_bag.py",
    "dask/tests/test_delayed.py",
    "dask/dataframe/tests/test_dataframe.py",
)


def normalize(message: str) -> str:
    """An error line without what differs between instances of one cause."""
    message = re.sub(r"0x[0-9a-f]+", "0x…", message)
    return re.sub(r"\.py:\d+\)", ".py:…)", message)


def run(suites, scheduler: str, named: bool, workers: int, extra: list, timeout: float,
        per_test_timeout: int):
    import os

    from tests.dask_conformance import harness

    site_packages = harness.dask_tests_dir().parent.parent
    workdir = Path(tempfile.mkdtemp(prefix="dask-suites-"))
    os.environ["LOCALSCHED_DEFAULT"] = scheduler
    os.environ["LOCALSCHED_SWAP_NAMED"] = "1" if named else "0"
    try:
        harness.write_ini(workdir, timeout=per_test_timeout)
        args = [str(site_packages / s) for s in suites]
        args += [f"--confcutdir={site_packages}", *extra]
        plugins = ["dask_conformance.localsched_default"]
        if workers:
            plugins.append("xdist.plugin")
            args += ["-n", str(workers)]
        return harness.run_pytest(args, workdir, timeout, workdir / "report.jsonl",
                                  plugins=plugins, rootdir=site_packages)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def failures(result) -> dict:
    return {o.nodeid: o for o in result.outcomes
            if o.outcome in ("failed", "error", "hung")}


def print_groups(failed: dict, title: str, examples: int = 4) -> None:
    groups = defaultdict(list)
    for o in failed.values():
        groups[normalize(o.message)].append(o.nodeid)
    print(f"\n{title}: {len(failed)} failures, {len(groups)} distinct error lines")
    for message, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"\n[{len(ids)}] {message}")
        for nodeid in sorted(ids)[:examples]:
            print(f"      {nodeid}")
        if len(ids) > examples:
            print(f"      ... and {len(ids) - examples} more")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="*", default=list(DEFAULT_SUITES),
                        help="test files, relative to site-packages (default: a sample)")
    parser.add_argument("--scheduler", default="threads",
                        choices=["threads", "sync", "processes", "like-dask"],
                        help="localsched get set as dask's default; like-dask: each collection's "
                             "own default, swapped for localsched's")
    parser.add_argument("--named", action="store_true",
                        help='scheduler="threads"/"sync"/"processes" also resolve to localsched')
    parser.add_argument("--compare", action="store_true",
                        help="also run on dask's schedulers; report only localsched's own failures")
    parser.add_argument("-n", "--workers", type=int, default=2,
                        help="pytest-xdist workers (0: none)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--timeout", type=float, default=3600, help="whole run, seconds")
    parser.add_argument("--per-test-timeout", type=int, default=120)
    parser.add_argument("--json", type=Path, help="write every outcome here")
    options = parser.parse_args(argv)

    # Test the checkout this file is in (not an installed localsched), with
    # the harness package next to this file.
    here = Path(__file__).resolve()
    sys.path[:0] = [str(here.parents[2]), str(here.parents[1])]
    extra = ["-k", options.keyword] if options.keyword else []
    runs = {"localsched": options.scheduler}
    if options.compare:
        runs["dask"] = "dask"
    results = {}
    for name, scheduler in runs.items():
        result = run(options.suites, scheduler, options.named, options.workers, extra,
                     options.timeout, options.per_test_timeout)
        results[name] = result
        counts = defaultdict(int)
        for o in result.outcomes:
            counts[o.outcome] += 1
        print(f"{name} ({scheduler}): {dict(counts)}"
              + (" -- KILLED AT TIMEOUT" if result.timed_out else ""))
        if not result.outcomes:
            print(result.output[-3000:])

    ours = failures(results["localsched"])
    if options.compare:
        theirs = failures(results["dask"])
        print_groups({k: v for k, v in ours.items() if k not in theirs},
                     "localsched only (dask passes these)")
        print_groups({k: v for k, v in theirs.items()}, "dask's own failures (environment)")
    else:
        print_groups(ours, "localsched")
    if options.json:
        options.json.write_text(json.dumps(
            {name: [o.__dict__ for o in r.outcomes] for name, r in results.items()}, indent=1),
            encoding="utf-8")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
