"""Execute every notebook in ``notebooks/`` in a fresh Jupyter kernel.

A notebook passes when every cell runs without error; the walkthrough's
outputs are also checked, so a notebook that runs but shows nothing (no plot,
wrong counts) fails too.  Cells to check are found by their ``tags``
metadata, not by position, so prose can be added without breaking the test.

Notebooks are stored without outputs (the test executes them, in memory, with
a temporary directory as the working directory, so nothing is written into
the repository).  The kernel is a child process of pytest: nbclient shuts it
down at the end of ``execute()``, and the test checks that it is gone.

Without ipykernel/nbclient the tests are skipped locally and fail in CI
(``CI`` set), where the test extras must be installed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
from pathlib import Path

import psutil
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

#: Seconds a single cell may run (the whole walkthrough takes ~15 s on 2 cores).
CELL_TIMEOUT = 300
#: Seconds the kernel's process gets to be gone after nbclient shut it down.
REAP_TIMEOUT = 10

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _require(module: str):
    """Import ``module``; skip without it locally, fail without it in CI."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"{module} is needed to execute the notebooks: pip install 'localsched[notebook]'"
        if IN_CI:
            pytest.fail(f"{message} ({exc})")
        pytest.skip(message)


def _execute(path: Path, cwd: Path):
    """The notebook at ``path``, executed in a fresh ``python3`` kernel run in ``cwd``.

    Raises nbclient's CellExecutionError (with the cell's traceback) on the
    first cell that fails.
    """
    _require("ipykernel")
    nbformat = _require("nbformat")
    nbclient = _require("nbclient")
    nb = nbformat.read(path, as_version=4)
    me = psutil.Process()
    children_before = {p.pid for p in me.children(recursive=True)}
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT,
        allow_errors=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    try:
        client.execute()  # starts the kernel, runs every cell, shuts the kernel down
    finally:
        # Also after a failing cell: nbclient has waited for the kernel to
        # exit; reap what is left (the kernel, or a process the notebook
        # started in it) so a failure is reported once, as itself.
        left = _reap_new_children(me, children_before)
    assert not left, f"{path.name}: processes still running after the kernel shut down: {left}"
    return nb


def _reap_new_children(me: psutil.Process, before: set) -> list:
    """Wait for (and so reap) the children not in ``before``; kill and list
    those still running after REAP_TIMEOUT seconds."""
    left = []
    for proc in me.children(recursive=True):
        if proc.pid in before:
            continue
        try:
            proc.wait(timeout=REAP_TIMEOUT)
        except psutil.TimeoutExpired:
            left.append(f"{proc.pid} {' '.join(proc.cmdline())[:200]}")
            proc.kill()
            proc.wait(timeout=REAP_TIMEOUT)
        except psutil.NoSuchProcess:
            pass
    return left


# -- helpers to read an executed notebook ---------------------------------------


def _cell(nb, tag: str):
    cells = [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", ())]
    assert len(cells) == 1, f"expected one cell tagged {tag!r}, found {len(cells)}"
    return cells[0]


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs
                   if o.output_type == "stream" and o.name == "stdout")


def _number(text: str, label: str) -> int:
    match = re.search(rf"^{re.escape(label)}:\s+(\d+)\s*$", text, re.MULTILINE)
    assert match, f"no line {label!r} in:\n{text}"
    return int(match.group(1))


def _assert_bokeh_plot(cell, groups=()) -> None:
    """The cell displayed a Bokeh layout inline, with BokehJS embedded (offline)."""
    outputs = [o for o in cell.outputs if o.output_type in ("display_data", "execute_result")]
    loads = [o.data["application/javascript"] for o in outputs
             if "application/vnd.bokehjs_load.v0+json" in o.data]
    assert loads, "BokehJS was not loaded into the notebook"
    # INLINE resources: the library itself is in the output, not a CDN link.
    assert all("cdn.bokeh.org" not in js for js in loads)
    assert max(map(len, loads)) > 100_000
    execs = [o for o in outputs if "application/vnd.bokehjs_exec.v0+json" in o.data]
    assert len(execs) == 1, f"expected one Bokeh plot, got {len(execs)}"
    root_id = execs[0].metadata["application/vnd.bokehjs_exec.v0+json"]["id"]
    html = "".join(o.data.get("text/html", "") for o in outputs)
    assert f'data-root-id="{root_id}"' in html, "no element for the plot to render into"
    doc = execs[0].data["application/javascript"]
    for title in ("Task stream", "Resources", "Cache"):
        assert f'"{title}"' in doc, f"the plot has no {title!r} figure"
    for group in groups:
        assert f'"{group}"' in doc, f"task group {group!r} is not in the plot"


def _check_walkthrough(nb) -> None:
    from localsched.command.demo import blocked_workload

    # The profiled run: every task of the graph was profiled and cached once.
    summary = _stdout(_cell(nb, "profile-summary"))
    total, ok = blocked_workload(blocks=4, block_size=1)  # the notebook's graph, tiny blocks
    graph_size = len(total.dask.keys() | ok.dask.keys())
    assert _number(summary, "tasks in the graph") == graph_size
    assert _number(summary, "Profiler records") == graph_size
    assert _number(summary, "CacheProfiler records") == graph_size
    # One sample when sampling starts and one when it stops, at least.
    assert _number(summary, "ResourceProfiler samples") >= 2
    assert 1 <= _number(summary, "workers that ran tasks") <= (os.cpu_count() or 1)
    assert re.search(r"^identity held on every block:\s+True$", summary, re.MULTILINE)
    assert re.search(r"^\s+matmul\s+\d+\.\d+$", summary, re.MULTILINE)

    _assert_bokeh_plot(_cell(nb, "visualize"), groups=("matmul", "random_block", "add"))

    # The dask section runs whenever dask is installed (the kernel runs this
    # interpreter's environment), and says so when it is not.
    dask_line = _stdout(_cell(nb, "dask-import"))
    if importlib.util.find_spec("dask") is not None:
        assert dask_line.startswith("dask "), dask_line
    if dask_line.startswith("dask "):
        run = _stdout(_cell(nb, "dask-run"))
        assert "q @ r == a: True" in run, run
        assert re.search(r"^\d+ tasks in \d+ groups$", run, re.MULTILINE), run
        _assert_bokeh_plot(_cell(nb, "dask-visualize"))
    else:
        assert "dask is not installed" in dask_line
        assert not _cell(nb, "dask-visualize").outputs

    # The custom callback, on the synchronous scheduler: keys in order.
    assert _stdout(_cell(nb, "callback")) == (
        "starting y\n   ended y -> 11\n"
        "starting z\n   ended z -> 22\n"
        "starting w\n   ended w -> 33\n"
        "result: 33\n"
    )

    # The text progress bar, with one line per task group at the end.
    progress = _stdout(_cell(nb, "progress-text"))
    assert "100% Completed" in progress
    assert re.search(r"^  matmul\s+\[#+\] 27/27$", progress, re.MULTILINE), progress
    assert re.search(r"^  random_block\s+\[#+\] 18/18$", progress, re.MULTILINE), progress


def _check_distributed(nb) -> None:
    """notebooks/distributed.ipynb: the QR example on a LocalCluster."""
    run = _stdout(_cell(nb, "cluster-run"))
    assert "q @ r == a: True" in run, run
    assert int(re.search(r"^(\d+) tasks in \d+ groups$", run, re.MULTILINE).group(1)) > 20, run
    workers = re.search(r"^workers: \[(.*)\]$", run, re.MULTILINE).group(1)
    assert workers.count("tcp://127.0.0.1:") >= 1, run
    assert "'compute'" in run, run
    assert re.search(r"^fine metrics: [1-9]\d* entries", run, re.MULTILINE), run
    _assert_bokeh_plot(_cell(nb, "visualize"))
    default = _stdout(_cell(nb, "default-client"))
    assert "sum matches: True" in default and not default.startswith("0 tasks"), default


def _shares(text: str, label: str) -> dict:
    """The ``{activity: share}`` dict printed after ``label`` on one line."""
    match = re.search(rf"{re.escape(label)}\s*(\{{[^}}]*\}})", text)
    assert match, f"no {label!r} in:\n{text}"
    return ast.literal_eval(match.group(1))


def _wall(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}\s+wall (\d+\.\d+) s", text, re.MULTILINE)
    assert match, f"no wall time of {name!r} in:\n{text}"
    return float(match.group(1))


def _check_where_the_time_went(nb, cwd: Path) -> None:
    try:  # the repository root is on sys.path (python -m pytest), or tests/ is
        from tests.support.trace_format import check_trace
    except ImportError:
        from tests.support.trace_format import check_trace

    # 1. The GIL: on threads the pure-Python loop waits (noncpu) for the lock
    # the other thread holds; on processes it computes.
    gil = _stdout(_cell(nb, "gil"))
    lines = gil.splitlines()
    on_threads = _shares(lines[0], "python_loop:")
    on_processes = _shares(lines[1], "python_loop:")
    assert on_threads.get("thread-noncpu", 0) >= 0.2, gil
    # (on processes the loop computes; how much of its wall time depends on
    # whether other programs leave the two cores free, so no share is asserted)
    assert on_processes.get("thread-cpu", 0) > 0, gil
    flame = _cell(nb, "gil-flame")
    assert re.search(r"most sampled functions: \[[^\]]*python_loop", _stdout(flame)), _stdout(flame)
    assert "python_loop" in _stdout(flame).split("samples by group:")[1]
    assert any("application/vnd.bokehjs_exec.v0+json" in o.get("data", {})
               for o in flame.outputs), "no flame graph displayed"

    # 2. I/O: all waiting, whatever the thread count; more threads, less wall.
    io = _stdout(_cell(nb, "io"))
    for line in io.splitlines():
        assert _shares(line, "fetch:").get("thread-noncpu", 0) >= 0.9, io
    assert _wall(io, "16 threads") < _wall(io, "2 threads"), io
    metered = _stdout(_cell(nb, "io-metered"))
    assert _shares(metered, "fetch_metered:").get("I/O", 0) >= 0.9, metered
    assert "('fetch_metered', 'downloaded'): 16000.0" in metered, metered
    assert "('metered',)" in metered, metered

    # 3. Big inputs: processes spend time moving data, threads none.
    big = _stdout(_cell(nb, "big-inputs"))
    moving = dict(re.findall(r"^(\w+)\s+wall .* moving data (\d+\.\d+) s", big, re.MULTILINE))
    assert float(moving["threads"]) == 0.0 and float(moving["processes"]) > 0.0, big
    assert {"serialize", "transfer"} <= set(_shares(big, "processes, make_rows:")), big

    # The report, its JSON and its trace.
    report = _stdout(_cell(nb, "report"))
    assert "JSON round trip equal: True" in report, report
    assert "spans: [('big inputs',), ('gil',), ('io',)]" in report, report
    assert "'serialize'" in report and "'I/O'" in report, report
    assert (cwd / "where-the-time-went.html").stat().st_size > 100_000
    with open(cwd / "trace.json", encoding="utf-8") as f:
        assert check_trace(json.load(f)) == []


#: Extra checks of an executed notebook's outputs, by file name: check(nb, cwd).
CHECKS = {"walkthrough.ipynb": lambda nb, cwd: _check_walkthrough(nb),
          "where_the_time_went.ipynb": _check_where_the_time_went,
          "distributed.ipynb": lambda nb, cwd: _check_distributed(nb)}


# -- the tests ------------------------------------------------------------------


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"
    assert NOTEBOOK_DIR / "walkthrough.ipynb" in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    # Plain JSON: this check needs no Jupyter package.
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    dirty = [i for i, c in enumerate(cells)
             if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: clear the outputs of cells {dirty} before committing"


@pytest.mark.timeout(CELL_TIMEOUT * 2)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    notebook_dir_before = sorted(NOTEBOOK_DIR.iterdir())
    nb = _execute(path, cwd=tmp_path)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    check = CHECKS.get(path.name)
    if check is not None:
        check(nb, tmp_path)
    # The kernel ran in tmp_path (not in notebooks/, nbclient's default), so
    # files a notebook writes, say a saved report, stay out of the repository.
    assert sorted(NOTEBOOK_DIR.iterdir()) == notebook_dir_before
