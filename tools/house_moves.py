"""Move localsched's modules and tests into their folders, and every reference with them.

Run from the repository root, on a clean tree (issue #39)::

    python tools/house_moves.py            # move, rewrite, report
    python tools/house_moves.py --check    # report only: what would move, what is unmapped

One table (``MOVES``) says where each module and test module lives now
(``OLD``) and where it goes (``NEW``).  For every row whose old file still
exists the script ``git mv``-s it; in every text file of the project it
rewrites what names a moved module:

- imports, absolute and relative, at any depth (a relative import is
  resolved against the file's old place, mapped, and written back relative
  to its new place; an absolute one stays absolute);
- any other dotted name (``"localsched.poolloop.X"`` in ``mock.patch``,
  ``monkeypatch.setattr``, lazy-import strings, sphinx ``automodule``, the
  ``[project.scripts]`` entry point, prose in docs and notebooks), by the
  longest moved prefix;
- paths (``localsched/poolloop.py``, ``tests/test_pool.py``);
- in test files that move deeper, ``__file__`` climbs to the repository
  root (``dirname(dirname(abspath(__file__)))``, ``.parent.parent``,
  ``.parents[2]``) get one more step per level;
- a few hand-made edits (``EDITS``) where a file names its neighbours by
  something else than a module name.

Imports the rewrite touched are sorted again with ``ruff --select I --fix``.

It is idempotent: a second run finds nothing at the old paths and no old
name left, and changes nothing.  It prints what it could not map: a module
or test module at an old-style place that no row names (one added after the
table was written: add a row), and any ``__file__`` use in a moved file it
did not adjust (check it by hand).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- the table

_L = "localsched"
_D = "localsched/diagnostics"
_T = "tests"
_TD = "tests/diagnostics"

MOVES: list[tuple[str, str]] = [
    # the plan: the task spec, the static order, fused subgraphs
    (f"{_L}/graph.py", f"{_L}/plan/graph.py"),
    (f"{_L}/order.py", f"{_L}/plan/order.py"),
    (f"{_L}/fused.py", f"{_L}/plan/fused.py"),
    # the run: the loops, the run's state, its records, its memory budget
    (f"{_L}/core.py", f"{_L}/run/core.py"),
    (f"{_L}/machine.py", f"{_L}/run/machine.py"),
    (f"{_L}/lifecycle.py", f"{_L}/run/lifecycle.py"),
    (f"{_L}/inline.py", f"{_L}/run/inline.py"),
    (f"{_L}/poolloop.py", f"{_L}/run/poolloop.py"),
    (f"{_L}/pool_settings.py", f"{_L}/run/pool_settings.py"),
    (f"{_L}/threadloop.py", f"{_L}/run/threadloop.py"),
    (f"{_L}/task_records.py", f"{_L}/run/task_records.py"),
    (f"{_L}/batching.py", f"{_L}/run/batching.py"),
    (f"{_L}/batch_held.py", f"{_L}/run/batch_held.py"),
    (f"{_L}/budget.py", f"{_L}/run/budget.py"),
    (f"{_L}/budget_limits.py", f"{_L}/run/budget_limits.py"),
    (f"{_L}/budget_record.py", f"{_L}/run/budget_record.py"),
    (f"{_L}/spill.py", f"{_L}/run/spill.py"),
    # the worker side: what runs where tasks run, what it sends back
    (f"{_L}/runtime.py", f"{_L}/worker/runtime.py"),
    (f"{_L}/records_wire.py", f"{_L}/worker/records_wire.py"),
    (f"{_L}/budget_worker.py", f"{_L}/worker/budget_worker.py"),
    # the OS: the platform's answers, forks, the users' settings and dask's
    # config, text safe for a terminal
    (f"{_L}/_platform.py", f"{_L}/system/platform.py"),
    (f"{_L}/forking.py", f"{_L}/system/forking.py"),
    (f"{_L}/settings.py", f"{_L}/system/settings.py"),
    (f"{_L}/options.py", f"{_L}/system/options.py"),
    (f"{_L}/termsafe.py", f"{_L}/system/termsafe.py"),
    # the command
    (f"{_L}/cli.py", f"{_L}/command/cli.py"),
    (f"{_L}/cli_compare.py", f"{_L}/command/compare.py"),
    (f"{_L}/demo.py", f"{_L}/command/demo.py"),
    # diagnostics: the collectors
    (f"{_D}/collector.py", f"{_D}/collectors/collector.py"),
    (f"{_D}/records.py", f"{_D}/collectors/records.py"),
    (f"{_D}/literals.py", f"{_D}/collectors/literals.py"),
    (f"{_D}/resource.py", f"{_D}/collectors/resource.py"),
    (f"{_D}/cache.py", f"{_D}/collectors/cache.py"),
    (f"{_D}/metrics.py", f"{_D}/collectors/metrics.py"),
    (f"{_D}/accounting.py", f"{_D}/collectors/accounting.py"),
    (f"{_D}/sampler.py", f"{_D}/collectors/sampler.py"),
    (f"{_D}/stacks.py", f"{_D}/collectors/stacks.py"),
    (f"{_D}/machine_load.py", f"{_D}/collectors/machine_load.py"),
    (f"{_D}/budgets.py", f"{_D}/collectors/budgets.py"),
    (f"{_D}/eta.py", f"{_D}/collectors/eta.py"),
    (f"{_D}/progress_view.py", f"{_D}/collectors/progress_view.py"),
    (f"{_D}/progress_text.py", f"{_D}/collectors/progress_text.py"),
    (f"{_D}/progress_widget.py", f"{_D}/collectors/progress_widget.py"),
    # diagnostics: a run's records as one object, saved, checked, exported
    (f"{_D}/rundata.py", f"{_D}/runs/rundata.py"),
    (f"{_D}/codec.py", f"{_D}/runs/codec.py"),
    (f"{_D}/runcheck.py", f"{_D}/runs/runcheck.py"),
    (f"{_D}/runcheck_graphs.py", f"{_D}/runs/runcheck_graphs.py"),
    (f"{_D}/trace.py", f"{_D}/runs/trace.py"),
    (f"{_D}/outputs.py", f"{_D}/runs/outputs.py"),
    # diagnostics: the pages (the report, visualize) and what they show
    (f"{_D}/perf_report.py", f"{_D}/reporting/perf_report.py"),
    (f"{_D}/page.py", f"{_D}/reporting/page.py"),
    (f"{_D}/plots.py", f"{_D}/reporting/plots.py"),
    (f"{_D}/header.py", f"{_D}/reporting/header.py"),
    (f"{_D}/advice_html.py", f"{_D}/reporting/advice_html.py"),
    (f"{_D}/aggregate.py", f"{_D}/reporting/aggregate.py"),
    (f"{_D}/summary.py", f"{_D}/reporting/summary.py"),
    (f"{_D}/tables.py", f"{_D}/reporting/tables.py"),
    (f"{_D}/naming.py", f"{_D}/reporting/naming.py"),
    # tests: the support folder (helpers, not tests)
    (f"{_T}/browser.py", f"{_T}/support/browser.py"),
    (f"{_T}/live_tab.py", f"{_T}/support/live_tab.py"),
    (f"{_T}/gates.py", f"{_T}/support/gates.py"),
    (f"{_T}/budget_workloads.py", f"{_T}/support/budget_workloads.py"),
    (f"{_T}/memory_sampler.py", f"{_T}/support/memory_sampler.py"),
    (f"{_T}/other_users.py", f"{_T}/support/other_users.py"),
    (f"{_T}/shm_kinds.py", f"{_T}/support/shm_kinds.py"),
    (f"{_T}/macos_sim.py", f"{_T}/support/macos_sim.py"),
    (f"{_T}/windows_sim.py", f"{_T}/support/windows_sim.py"),
    (f"{_T}/cluster_procs.py", f"{_T}/support/cluster_procs.py"),
    (f"{_T}/platform_marks.py", f"{_T}/support/platform_marks.py"),
    (f"{_T}/trace_format.py", f"{_T}/support/trace_format.py"),
    (f"{_TD}/real_session.py", f"{_T}/support/real_session.py"),
    (f"{_TD}/replayed_runs.py", f"{_T}/support/replayed_runs.py"),
    (f"{_TD}/servers.py", f"{_T}/support/servers.py"),
    # tests of the plan
    (f"{_T}/test_graph_and_order.py", f"{_T}/plan/test_graph_and_order.py"),
    (f"{_T}/test_fused.py", f"{_T}/plan/test_fused.py"),
    (f"{_T}/test_planner_shapes.py", f"{_T}/plan/test_planner_shapes.py"),
    (f"{_T}/test_prep.py", f"{_T}/plan/test_prep.py"),
    # tests of the run
    (f"{_T}/test_sched_hardening.py", f"{_T}/run/test_between_runs.py"),
    (f"{_T}/test_robustness.py", f"{_T}/run/test_failure_paths.py"),
    (f"{_T}/test_threads_inplace.py", f"{_T}/run/test_threadloop.py"),
    (f"{_T}/test_task_records.py", f"{_T}/run/test_task_records.py"),
    (f"{_T}/test_lifetimes.py", f"{_T}/run/test_lifetimes.py"),
    (f"{_T}/test_budget.py", f"{_T}/run/test_budget.py"),
    (f"{_T}/test_budget_pause.py", f"{_T}/run/test_budget_pause.py"),
    (f"{_T}/test_sync_plain.py", f"{_T}/run/test_sync_plain.py"),
    (f"{_T}/test_record_layout.py", f"{_T}/run/test_record_layout.py"),
    (f"{_T}/test_budget_workloads.py", f"{_T}/run/test_budget_workloads.py"),
    (f"{_T}/test_spill.py", f"{_T}/run/test_spill.py"),
    # tests of the pool and shared memory
    (f"{_T}/test_pool.py", f"{_T}/pool/test_pool.py"),
    (f"{_T}/test_start_methods.py", f"{_T}/pool/test_start_methods.py"),
    (f"{_T}/test_shared_pools.py", f"{_T}/pool/test_shared_pools.py"),
    (f"{_T}/test_worker_died.py", f"{_T}/pool/test_worker_died.py"),
    (f"{_T}/test_shm.py", f"{_T}/shm/test_shm.py"),
    (f"{_T}/test_shm_lifetime.py", f"{_T}/shm/test_shm_lifetime.py"),
    (f"{_T}/test_shm_other_users.py", f"{_T}/shm/test_shm_other_users.py"),
    (f"{_T}/test_shm_owners.py", f"{_T}/shm/test_shm_owners.py"),
    # tests of the OS
    (f"{_T}/test_platforms.py", f"{_T}/system/test_platforms.py"),
    (f"{_T}/test_platform_value.py", f"{_T}/system/test_platform_value.py"),
    (f"{_T}/test_process_state.py", f"{_T}/system/test_process_state.py"),
    (f"{_T}/test_fork_safety.py", f"{_T}/system/test_fork_safety.py"),
    # tests of the command
    (f"{_T}/test_cli.py", f"{_T}/command/test_cli.py"),
    (f"{_T}/test_cli_outputs.py", f"{_T}/command/test_cli_outputs.py"),
    (f"{_T}/test_compare_cli.py", f"{_T}/command/test_compare_cli.py"),
    (f"{_T}/test_compare_ci.py", f"{_T}/command/test_compare_ci.py"),
    # tests of the cluster tier
    (f"{_T}/test_distributed.py", f"{_T}/distributed/test_distributed.py"),
    (f"{_T}/test_distributed_analysis.py", f"{_T}/distributed/test_analysis.py"),
    (f"{_T}/test_distributed_companion.py", f"{_T}/distributed/test_companion.py"),
    # tests of the diagnostics: collectors
    (f"{_TD}/test_cache.py", f"{_TD}/collectors/test_cache.py"),
    (f"{_TD}/test_resource.py", f"{_TD}/collectors/test_resource.py"),
    (f"{_TD}/test_sampler.py", f"{_TD}/collectors/test_sampler.py"),
    (f"{_TD}/test_metrics.py", f"{_TD}/collectors/test_metrics.py"),
    (f"{_TD}/test_merged_accounting.py", f"{_TD}/collectors/test_merged_accounting.py"),
    (f"{_TD}/test_unmeasurable_sizes.py", f"{_TD}/collectors/test_unmeasurable_sizes.py"),
    # tests of the diagnostics: saved runs
    (f"{_TD}/test_saved_run_files.py", f"{_TD}/runs/test_saved_run_files.py"),
    (f"{_TD}/test_saved_run_fuzz.py", f"{_TD}/runs/test_saved_run_fuzz.py"),
    (f"{_TD}/test_graph_records.py", f"{_TD}/runs/test_graph_records.py"),
    (f"{_TD}/test_analysis_saved.py", f"{_TD}/runs/test_analysis_saved.py"),
    # tests of the diagnostics: the report and its figures
    (f"{_TD}/test_performance_report.py", f"{_TD}/reporting/test_performance_report.py"),
    (f"{_TD}/test_report.py", f"{_TD}/reporting/test_report.py"),
    (f"{_TD}/test_report_cli.py", f"{_TD}/reporting/test_report_cli.py"),
    (f"{_TD}/test_report_header.py", f"{_TD}/reporting/test_report_header.py"),
    (f"{_TD}/test_report_pages.py", f"{_TD}/reporting/test_report_pages.py"),
    (f"{_TD}/test_report_size.py", f"{_TD}/reporting/test_report_size.py"),
    (f"{_TD}/test_budget_view.py", f"{_TD}/reporting/test_budget_view.py"),
    (f"{_TD}/test_plots.py", f"{_TD}/reporting/test_plots.py"),
    (f"{_TD}/test_aggregate.py", f"{_TD}/reporting/test_aggregate.py"),
    (f"{_TD}/test_tables.py", f"{_TD}/reporting/test_tables.py"),
    (f"{_TD}/test_gallery.py", f"{_TD}/reporting/test_gallery_pages.py"),
    # tests of the diagnostics: the analysis
    (f"{_TD}/test_findings.py", f"{_TD}/analysis/test_findings.py"),
    (f"{_TD}/test_findings_applied.py", f"{_TD}/analysis/test_findings_applied.py"),
    (f"{_TD}/test_findings_causes.py", f"{_TD}/analysis/test_findings_causes.py"),
    (f"{_TD}/test_findings_thresholds.py", f"{_TD}/analysis/test_findings_thresholds.py"),
    (f"{_TD}/test_whatif.py", f"{_TD}/analysis/test_whatif.py"),
    # tests of the diagnostics: the live dashboard
    (f"{_TD}/test_dashboard.py", f"{_TD}/live/test_dashboard.py"),
    (f"{_TD}/test_dashboard_browser.py", f"{_TD}/live/test_dashboard_browser.py"),
    (f"{_TD}/test_dashboard_cli.py", f"{_TD}/live/test_dashboard_cli.py"),
    (f"{_TD}/test_dashboard_end.py", f"{_TD}/live/test_dashboard_end.py"),
    (f"{_TD}/test_dashboard_live_counts.py", f"{_TD}/live/test_dashboard_live_counts.py"),
    (f"{_TD}/test_dashboard_findings.py", f"{_TD}/live/test_dashboard_findings.py"),
    (f"{_TD}/test_dashboard_pacing.py", f"{_TD}/live/test_dashboard_pacing.py"),
    (f"{_TD}/test_dashboard_reading.py", f"{_TD}/live/test_dashboard_reading.py"),
    (f"{_TD}/test_dashboard_safety.py", f"{_TD}/live/test_dashboard_safety.py"),
    (f"{_TD}/test_dashboard_updates.py", f"{_TD}/live/test_dashboard_updates.py"),
]

# What stays where it is (an old-style place that is nobody's mistake).
STAYS: set[str] = {
    # dask's public module names, the package's public front
    f"{_L}/__init__.py", f"{_L}/__main__.py", f"{_L}/local.py", f"{_L}/threaded.py",
    f"{_L}/multiprocessing.py", f"{_L}/callbacks.py", f"{_L}/view.py",
    f"{_L}/delayed.py", f"{_L}/metrics.py", f"{_L}/utils.py",
    f"{_D}/__init__.py", f"{_D}/profile.py", f"{_D}/progress.py",
    f"{_D}/profile_visualize.py", f"{_D}/report.py",
    # the project as a whole, and the one cross-scheduler contract
    f"{_T}/test_architecture.py", f"{_T}/test_packaging.py", f"{_T}/test_docs.py",
    f"{_T}/test_notebooks.py", f"{_T}/test_gallery.py", f"{_T}/test_contract.py",
    f"{_T}/test_schedulers.py", f"{_T}/test_dropin.py", f"{_T}/test_dask_interop.py",
    f"{_T}/test_dask_conformance.py", f"{_T}/test_delayed.py", f"{_T}/test_key_split.py",
    f"{_T}/test_state_view.py", f"{_T}/__init__.py",
    f"{_TD}/__init__.py", f"{_TD}/conftest.py", f"{_TD}/test_profile.py",
    f"{_TD}/test_progress.py", f"{_TD}/test_visualize_profilers.py",
    f"{_TD}/test_dask_diagnostics_suite.py", f"{_TD}/test_terminal_names.py",
}

# The folders the moves create, each with its design note.
PACKAGES: dict[str, str] = {
    f"{_L}/plan": "The plan: the task spec, the static order, fused subgraphs.",
    f"{_L}/run": ("The run: one computation from ``get_async`` to its result -- the\n"
                  "loops, the run's state and its moves, the batch planner, callbacks'\n"
                  "lifecycle, the records a run keeps, and the memory budget with its\n"
                  "spill store."),
    f"{_L}/worker": ("The worker side: what runs where tasks run (``runtime.run_batch``)\n"
                     "and the layout of what it sends back (``records_wire``)."),
    f"{_L}/system": ("The operating system and the user's environment: the platform's\n"
                     "answers (``platform``), what a forked child renews (``forking``), the\n"
                     "users' settings and dask's config (``settings``, ``options``), text\n"
                     "safe for a terminal (``termsafe``).  Leaves: they import nothing of\n"
                     "localsched outside this folder."),
    f"{_L}/command": "The ``localsched`` command: ``profile``, ``demo``, ``report``, ``compare``.",
    f"{_D}/collectors": ("The collectors: callbacks that gather records cheaply while a\n"
                         "computation runs, and the plain records they build on read."),
    f"{_D}/runs": ("One run's records as one object (``RunData``): saved as JSON, checked\n"
                   "when read back, exported as a trace, written all or nothing."),
    f"{_D}/reporting": ("The pages: the performance report and ``visualize``, their header,\n"
                        "findings panel, tables and the numbers behind the figures."),
    f"{_T}": "localsched's tests: one folder per folder of the package (see README.md).",
    f"{_T}/support": "What the tests share that is not a test: helpers and simulations.",
    f"{_T}/plan": "Tests of localsched.plan.",
    f"{_T}/run": "Tests of localsched.run.",
    f"{_T}/pool": "Tests of localsched._pool.",
    f"{_T}/shm": "Tests of localsched._shm.",
    f"{_T}/system": "Tests of localsched.system.",
    f"{_T}/command": "Tests of localsched.command.",
    f"{_T}/distributed": "Tests of localsched.distributed.",
    f"{_TD}/collectors": "Tests of localsched.diagnostics.collectors.",
    f"{_TD}/runs": "Tests of localsched.diagnostics.runs.",
    f"{_TD}/reporting": "Tests of localsched.diagnostics.reporting.",
    f"{_TD}/analysis": "Tests of localsched.diagnostics.analysis.",
    f"{_TD}/live": "Tests of localsched.diagnostics.live.",
}

# Hand-made edits, by the file's new path: (old text, new text), applied
# when the old text is there (so a second run finds nothing to do).
EDITS: dict[str, list[tuple[str, str]]] = {
    f"{_L}/run/lifecycle.py": [(
        '_LOOP_FILES = frozenset(os.path.join(os.path.dirname(os.path.abspath(__file__)), name)\n'
        '                        for name in ("inline.py", "poolloop.py", "runtime.py", '
        '"graph.py"))',
        '# (the package\'s root: the loops live in its folders)\n'
        '_LOOP_FILES = frozenset(\n'
        '    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '
        '*name.split("/"))\n'
        '    for name in ("run/inline.py", "run/poolloop.py", "worker/runtime.py", '
        '"plan/graph.py"))'),
    ],
    f"{_L}/worker/runtime.py": [(
        '_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))\n'
        "# The scheduler's own directories (not the diagnostics'): frames there are\n"
        "# the scheduler's.\n"
        '_SCHEDULER_DIRS = frozenset((_PACKAGE_DIR, os.path.join(_PACKAGE_DIR, "_pool")))',
        '_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n'
        "# The scheduler's own directories (not the diagnostics' nor shared memory's):\n"
        "# frames there are the scheduler's.\n"
        '_SCHEDULER_DIRS = frozenset([_PACKAGE_DIR] + [\n'
        '    os.path.join(_PACKAGE_DIR, folder)\n'
        '    for folder in ("_pool", "plan", "run", "worker", "system", "command")])'),
    ],
    f"{_T}/support/budget_workloads.py": [
        ('os.pathsep.join([os.path.dirname(here), here,',
         'os.pathsep.join([os.path.dirname(os.path.dirname(here)), here,'),
    ],
    f"{_T}/support/cluster_procs.py": [
        ('os.pathsep.join([here, os.path.dirname(here), ',
         'os.pathsep.join([here, os.path.dirname(os.path.dirname(here)),\n'
         '                                '),
    ],
    # the benchmark that imports test helpers: the root on sys.path (for
    # tests.support), and the helpers' folder for its child's bare import
    "benchmarks/bench_budget.py": [
        ('sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))',
         'sys.path.insert(0, os.path.dirname(HERE))'),
        ("sys.path.insert(0, {os.path.join(os.path.dirname(HERE), 'tests')!r})",
         "sys.path.insert(0, {os.path.join(os.path.dirname(HERE), 'tests', 'support')!r})"),
    ],
    f"{_L}/command/cli.py": [("(``cli_compare``)", "(``compare``)")],
    # lines the longer names made too long
    f"{_TD}/analysis/test_findings_applied.py": [
        ('"demo", "--blocks", "2", "--block-size", "60",\n         "--no-progress", '
         '"--no-samples", "-o", "demo.html", "--json", "demo.json"],',
         '"demo", "--blocks", "2",\n         "--block-size", "60", "--no-progress", '
         '"--no-samples", "-o", "demo.html",\n         "--json", "demo.json"],'),
    ],
    f"{_TD}/reporting/test_plots.py": [
        ('"import sys, localsched, localsched.diagnostics, '
         'localsched.diagnostics.collectors.records\\n"',
         '"import sys, localsched, localsched.diagnostics\\n"\n'
         '        "import localsched.diagnostics.collectors.records\\n"'),
    ],
    f"{_TD}/test_terminal_names.py": [
        ('"profile", "--group-progress",\n                           "-o", "r.html", "job.py"], '
         'cwd=tmp_path, capture_output=True,',
         '"profile",\n                           "--group-progress", "-o", "r.html", "job.py"],\n'
         '                          cwd=tmp_path, capture_output=True,'),
    ],
    f"{_TD}/collectors/test_sampler.py": [
        ('pkg = os.path.dirname(runtime.__file__) + "/"',
         'pkg = os.path.dirname(os.path.dirname(runtime.__file__)) + "/"'),
    ],
    f"{_TD}/runs/test_analysis_saved.py": [
        ('BEFORE = os.path.join(os.path.dirname(__file__), "data",',
         'BEFORE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",\n'
         '                     '),
    ],
    f"{_TD}/reporting/test_report_header.py": [
        ('os.path.join(HERE, "data", ', 'os.path.join(os.path.dirname(HERE), "data", '),
    ],
}

# Where references are rewritten.
SCAN_DIRS = ["localsched", "tests", "benchmarks", "docs", "notebooks", ".ci", "tools"]
# (not CHANGELOG.md: its entries name the modules as they were)
SCAN_FILES = ["pyproject.toml", "Makefile", "conftest.py", "README.md"]
TEXT_SUFFIXES = {".py", ".md", ".rst", ".toml", ".ipynb", ".txt", ".cfg", ".ini", ".yml",
                 ".yaml", ".json", ".html", ".sh", ""}
SKIP_PARTS = {"_build", "__pycache__", ".git"}
# recorded data (saved runs, pictures' pages) is left as it was recorded
DATA_DIRS = ("docs/_static/", "tests/diagnostics/data/")
THIS = "tools/house_moves.py"


# ---------------------------------------------------------------- names

def dotted(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(path: str) -> str:
    """The package a relative import in ``path`` starts from."""
    name = dotted(path)
    return name if path.endswith("__init__.py") else name.rpartition(".")[0]


MODULE_MAP: dict[str, str] = {dotted(o): dotted(n) for o, n in MOVES if o != n}
PATH_MAP: dict[str, str] = {o: n for o, n in MOVES if o != n}
# Test helpers were imported by bare name too (``from browser import ...``,
# with tests/ on sys.path): in an import, the bare name maps as well.
BARE_MAP: dict[str, str] = {
    Path(o).stem: dotted(n) for o, n in MOVES
    if o.startswith("tests/") and not Path(o).name.startswith("test_")
}
# ... and tests' packages that stay (tests/ itself is now a package)
BARE_MAP["dask_conformance"] = "tests.dask_conformance"


def _check_table() -> None:
    news = [n for _, n in MOVES]
    assert len(set(news)) == len(news), "two rows move to one place"
    for new in MODULE_MAP.values():
        parts = new.split(".")
        for i in range(1, len(parts) + 1):
            assert ".".join(parts[:i]) not in MODULE_MAP, (
                f"{new}: a new name starts with an old one, a second run would move it again")


def map_module(name: str, bare: bool = False) -> str:
    """A module name (or a dotted name below one) at its new place."""
    if bare and name.split(".")[0] in BARE_MAP:
        head, _, rest = name.partition(".")
        return BARE_MAP[head] + ("." + rest if rest else "")
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in MODULE_MAP:
            return ".".join([MODULE_MAP[prefix], *parts[i:]])
    return name


_DOTTED = re.compile(r"(?<![\w.])((?:localsched|tests)(?:\.\w+)+)")
_PATHS = re.compile(r"(?<![\w/.-])((?:localsched|tests)/[\w/]+\.py)\b")


def rewrite_dotted(text: str) -> str:
    text = _DOTTED.sub(lambda m: map_module(m.group(1)), text)
    return _PATHS.sub(lambda m: PATH_MAP.get(m.group(1), m.group(1)), text)


# ---------------------------------------------------------------- imports

def _alias_text(name: str, asname: str | None) -> str:
    return f"{name} as {asname}" if asname and asname != name else name


def _relative(target: str, package: str) -> tuple[int, str] | None:
    """``target`` written relative to ``package``: (level, module), or None
    when they share no top-level package."""
    t, p = target.split("."), package.split(".")
    if t[0] != p[0]:
        return None
    common = 0
    while common < min(len(t), len(p)) and t[common] == p[common]:
        common += 1
    return len(p) - common + 1, ".".join(t[common:])


def _from_text(level: int, module: str, names: list[str]) -> str:
    return f"from {'.' * level}{module} import {', '.join(names)}"


class ImportRewriter:
    """Rewrites one Python file's import statements for its new place."""

    def __init__(self, old_path: str, new_path: str, modules: set[str], bare: bool):
        self.old_package = package_of(old_path)
        self.new_package = package_of(new_path)
        self.modules = modules  # every module name, old and new
        self.bare = bare
        self.lost_comments = 0

    def _is_module(self, name: str) -> bool:
        return name in self.modules

    def statement(self, node: ast.Import | ast.ImportFrom) -> list[str] | None:
        """The statement(s) replacing ``node``, or None to keep it as written."""
        if isinstance(node, ast.Import):
            changed = False
            out = []
            for alias in node.names:
                new = map_module(alias.name, self.bare)
                changed |= new != alias.name
                asname = alias.asname
                if asname is None and new.split(".")[0] != alias.name.split(".")[0]:
                    asname = alias.name  # a bare helper name: keep the name the code uses
                out.append(_alias_text(new, asname))
            return [f"import {', '.join(out)}"] if changed else None
        if node.level:
            base = self.old_package.split(".")
            if node.level > 1:
                base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            full = f"{source}.{alias.name}"
            if alias.name != "*" and self._is_module(full):
                target = map_module(full, self.bare)
                parent, _, name = target.rpartition(".")
                groups.setdefault(parent, []).append(
                    _alias_text(name, alias.asname or (alias.name if name != alias.name
                                                       else None)))
            else:
                groups.setdefault(map_module(source, self.bare), []).append(
                    _alias_text(alias.name, alias.asname))
        same_place = self.old_package == self.new_package or not node.level
        if same_place and list(groups) == [source]:
            return None
        out = []
        for parent, names in groups.items():
            rel = _relative(parent, self.new_package) if node.level else None
            out.append(_from_text(*rel, names) if rel else _from_text(0, parent, names))
        return out

    def rewrite(self, text: str) -> str:
        tree = ast.parse(text)
        lines = text.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        edits = []
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            new = self.statement(node)
            if new is None:
                continue
            assert node.end_lineno is not None and node.end_col_offset is not None
            start = offsets[node.lineno - 1] + _char_col(lines[node.lineno - 1],
                                                         node.col_offset)
            end = offsets[node.end_lineno - 1] + _char_col(lines[node.end_lineno - 1],
                                                           node.end_col_offset)
            if "#" in text[start:end]:
                self.lost_comments += 1
            indent = " " * node.col_offset
            edits.append((start, end, ("\n" + indent).join(new)))
        for start, end, new_text in sorted(edits, reverse=True):
            text = text[:start] + new_text + text[end:]
        return text


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8"))


# ---------------------------------------------------------------- __file__

_DIRNAMES = re.compile(
    r"((?:os\.path\.dirname\(){1,})((?:os\.path\.abspath\()?__file__\)?)(\)+)")
_PARENTS = re.compile(r"(Path\(__file__\)(?:\.resolve\(\)|\.absolute\(\))?)((?:\.parent)+)")
_PARENTS_I = re.compile(r"(Path\(__file__\)(?:\.resolve\(\)|\.absolute\(\))?\.parents\[)(\d+)\]")


def adjust_file_climbs(text: str, old_path: str, new_path: str) -> tuple[str, list[str]]:
    """Climbs from ``__file__`` to the repository root (or above) get one
    step per level the file went down; other ``__file__`` uses are listed."""
    old_depth = len(Path(old_path).parts) - 1
    delta = len(Path(new_path).parts) - 1 - old_depth
    if delta == 0:
        return text, []

    def dirnames(m: re.Match) -> str:
        n = m.group(1).count("dirname(")
        if n - 1 < old_depth:
            return m.group(0)
        n += delta
        return "os.path.dirname(" * n + m.group(2) + m.group(3) + ")" * delta

    def parents(m: re.Match) -> str:
        k = m.group(2).count(".parent")
        return m.group(0) if k - 1 < old_depth else m.group(1) + ".parent" * (k + delta)

    def parents_i(m: re.Match) -> str:
        i = int(m.group(2))
        return m.group(0) if i < old_depth else f"{m.group(1)}{i + delta}]"

    text = _DIRNAMES.sub(dirnames, text)
    text = _PARENTS.sub(parents, text)
    text = _PARENTS_I.sub(parents_i, text)
    left = [f"{new_path}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
            if "__file__" in line and not _climbs_root(line, old_depth + delta)]
    return text, left


def _climbs_root(line: str, depth: int) -> bool:
    m = _DIRNAMES.search(line)
    if m and m.group(1).count("dirname(") - 1 >= depth:
        return True
    m = _PARENTS.search(line)
    if m and m.group(2).count(".parent") - 1 >= depth:
        return True
    m = _PARENTS_I.search(line)
    return bool(m and int(m.group(2)) >= depth)


# ---------------------------------------------------------------- the run

def project_files() -> list[str]:
    out = [f for f in SCAN_FILES if (ROOT / f).is_file()]
    for d in SCAN_DIRS:
        for path in sorted((ROOT / d).rglob("*")):
            rel = path.relative_to(ROOT)
            if (path.is_file() and not path.is_symlink() and path.suffix in TEXT_SUFFIXES
                    and not SKIP_PARTS & set(rel.parts) and rel.as_posix() != THIS
                    and not (rel.as_posix().startswith(DATA_DIRS) and path.suffix != ".py")):
                out.append(rel.as_posix())
    return out


def all_modules() -> set[str]:
    """Every module name, at its old place and its new one."""
    names = set(MODULE_MAP) | set(MODULE_MAP.values())
    for top in ("localsched", "tests"):
        for path in (ROOT / top).rglob("*.py"):
            names.add(dotted(path.relative_to(ROOT).as_posix()))
    names |= {dotted(pkg + "/__init__.py") for pkg in PACKAGES}
    return names


def unmapped() -> list[str]:
    """Modules at an old-style place (the flat folders) that no row names."""
    known = set(STAYS) | set(PATH_MAP) | {n for _, n in MOVES}
    found = []
    for folder in (_L, _D, _T, _TD):
        for path in sorted((ROOT / folder).glob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in known:
                found.append(rel)
    return found


def rewrite_text(rel: str, new_rel: str, text: str, modules: set[str],
                 notes: list[str]) -> str:
    if rel.endswith(".py"):
        bare = rel.startswith(("tests/", "benchmarks/"))
        rewriter = ImportRewriter(rel, new_rel, modules, bare)
        try:
            text = rewriter.rewrite(text)
        except SyntaxError as e:
            notes.append(f"{rel}: not parsed ({e}); imports left as they are")
        if rewriter.lost_comments:
            notes.append(f"{new_rel}: {rewriter.lost_comments} rewritten import(s) had a "
                         "comment inside; check them")
        text = rewrite_dotted(text)
        if rel != new_rel:
            text, left = adjust_file_climbs(text, rel, new_rel)
            if new_rel not in EDITS:  # (those were checked by hand)
                notes.extend(f"check by hand (__file__): {line}" for line in left)
    elif rel.endswith(".ipynb"):
        nb = json.loads(text)
        changed = False
        for cell in nb.get("cells", []):
            src = cell.get("source", [])
            joined = "".join(src) if isinstance(src, list) else src
            new = _rewrite_text_imports(rewrite_dotted(joined))
            if new != joined:
                cell["source"] = new.splitlines(keepends=True) if isinstance(src, list) else new
                changed = True
        if changed:
            text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    else:
        text = _rewrite_text_imports(rewrite_dotted(text))
    for old, new in EDITS.get(new_rel, []):
        if old in text:
            text = text.replace(old, new)
        elif new not in text:
            notes.append(f"{new_rel}: a hand-made edit found neither its old nor its new "
                         f"text, do it by hand: {old!r} -> {new!r}")
    return text


_TEXT_FROM = re.compile(r"from (localsched(?:\.\w+)*) import (\w+)\b(?!\s*,)")


def _rewrite_text_imports(text: str) -> str:
    """``from localsched import machine`` in prose and notebooks (one name)."""
    def sub(m: re.Match) -> str:
        full = f"{m.group(1)}.{m.group(2)}"
        if full not in MODULE_MAP:
            return m.group(0)
        parent, _, name = MODULE_MAP[full].rpartition(".")
        asname = m.group(2) if name != m.group(2) else None
        return f"from {parent} import {_alias_text(name, asname)}"
    return _TEXT_FROM.sub(sub, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report only, change nothing")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    _check_table()

    missing = unmapped()
    for rel in missing:
        print(f"UNMAPPED: {rel} (add a row to MOVES, or to STAYS)")
    to_move = [(o, n) for o, n in MOVES if o != n and Path(o).exists()]
    clash = [n for o, n in to_move if Path(n).exists()]
    if clash:
        print("STOP: both the old and the new file exist: " + ", ".join(clash))
        return 2
    if args.check:
        for o, n in to_move:
            print(f"would move {o} -> {n}")
        return 1 if missing else 0

    modules = all_modules()
    new_place = dict(to_move)
    notes: list[str] = []
    changed_py: list[str] = []
    for rel in project_files():
        path = ROOT / rel
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new_rel = new_place.get(rel, rel)
        new_text = rewrite_text(rel, new_rel, text, modules, notes)
        if new_text != text:
            path.write_text(new_text, encoding="utf-8")
            if rel.endswith(".py"):
                changed_py.append(new_rel)
            print(f"rewrote {rel}")

    for folder, note in PACKAGES.items():
        init = ROOT / folder / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(f'"""{note}"""\n', encoding="utf-8")
            subprocess.run(["git", "add", str(init.relative_to(ROOT))], check=True)
            print(f"created {init.relative_to(ROOT)}")
    for old, new in to_move:
        Path(new).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", old, new], check=True)
        print(f"moved {old} -> {new}")

    if changed_py:
        done = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "I", "--fix",
                               "--quiet", *changed_py], capture_output=True, text=True)
        if done.returncode not in (0, 1):
            notes.append("ruff could not sort the imports: run "
                         "`ruff check --select I --fix` on the rewritten files")
    for note in notes:
        print(note)
    for rel in missing:
        print(f"UNMAPPED: {rel} (add a row to MOVES, or to STAYS)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
