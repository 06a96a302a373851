"""A task's record is read by name on its whole way (issue #39).

The layouts of a record (what a worker sends, its probe, the scheduler's
``TaskRecord``, the run's rows) are declared once, in
``localsched.worker.records_wire``, with the position of each field; the code on
the records' way reads them by unpacking, by attribute or through those
positions, never by a bare number (``probe[5]  # (Probe.nbytes)`` had the
field named only in a comment).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import localsched
from localsched import view
from localsched._pool import listener, worker
from localsched._shm import handles, oob
from localsched.diagnostics import profile, progress
from localsched.diagnostics.collectors import accounting, cache, collector, metrics
from localsched.diagnostics.live import findings, recorder
from localsched.diagnostics.reporting import summary
from localsched.run import budget, inline, lifecycle, poolloop, task_records, threadloop
from localsched.view import TaskRecord as ViewTaskRecord
from localsched.worker import records_wire, runtime
from localsched.worker.records_wire import Probe, Record, TaskRecord

PACKAGE_DIR = Path(localsched.__file__).parent

#: The modules a task's record passes through, worker to profiler.
CORRIDOR = [
    records_wire, task_records, runtime, inline, poolloop, threadloop, budget, view,
    lifecycle, worker, listener, oob, handles, collector, profile, cache, metrics, summary,
    accounting, progress, recorder, findings,
]

#: Names that hold a record (or a part of one) on the corridor.
RECORD_NAMES = {"r", "rec", "record", "probe", "arrival", "task", "t", "e", "row", "run"}


def _positions(prefix: str) -> list[tuple[str, int]]:
    return sorted(((name, value) for name, value in vars(records_wire).items()
                   if name.startswith(prefix) and name != "ROW_WIDTH"),
                  key=lambda item: item[1])


def test_each_position_is_its_fields_place():
    """``REC_VALUE`` is where ``Record.value`` sits, and so on for every
    layout: the positions cannot drift from the classes."""
    for prefix, fields in (("REC_", Record._fields), ("PROBE_", Probe._fields),
                           ("TASK_", TaskRecord._fields)):
        positions = _positions(prefix)
        assert [value for _, value in positions] == list(range(len(fields))), prefix
        assert [name[len(prefix):].lower() for name, _ in positions] == list(fields), prefix
    rows = _positions("ROW_")
    assert [name[4:].lower() for name, _ in rows][:4] == list(TaskRecord._fields[:4])
    assert len(rows) == records_wire.ROW_WIDTH


def test_task_record_is_declared_once():
    """Callbacks find ``TaskRecord`` in ``localsched.view``; it is the
    layouts module's class, not a copy."""
    assert ViewTaskRecord is TaskRecord
    declared = [path for path in PACKAGE_DIR.rglob("*.py")
                if "class TaskRecord(" in path.read_text()]
    assert declared == [Path(inspect.getsourcefile(records_wire) or "")]


def _index_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """Subscripts of a record name by a literal integer (or a slice with one)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Subscript) or not isinstance(node.value, ast.Name):
            continue
        if node.value.id not in RECORD_NAMES:
            continue
        index = node.slice
        bounds = (index.lower, index.upper) if isinstance(index, ast.Slice) else (index,)
        if any(isinstance(b, ast.Constant) and isinstance(b.value, int) for b in bounds):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_checker_sees_a_record_read_by_number():
    tree = ast.parse("size = probe[5]\nrest = task[:8]\nvalue = r[REC_VALUE]\n")
    assert [text for _, text in _index_reads(tree)] == ["probe[5]", "task[:8]"]


def test_no_record_is_read_by_a_bare_number():
    """On the corridor a record is unpacked, read by attribute or through
    ``records_wire``'s positions (``probe[PROBE_NBYTES]``)."""
    wrong = []
    for module in CORRIDOR:
        source = inspect.getsource(module)
        for line, text in _index_reads(ast.parse(source)):
            wrong.append(f"{module.__name__}:{line}: {text}")
    assert not wrong, wrong
