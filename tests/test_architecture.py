"""The house's structural rules, checked on the source itself.

- No import circle between localsched's modules, function-level imports
  and ``if TYPE_CHECKING:`` imports included: an import inside a function
  only defers the circle to run time, and one for annotations still ties
  the two modules' designs together.
- No function over 100 lines, no module over 700 lines.
- No module note (the docstring at the top) over 50 lines, no package
  note over 70: a note says what the room does and why; the detail is in
  the docstrings of the functions it concerns, the figures in
  ``benchmarks/README.md``.
- No private name imported from another folder; the lower folders
  (``plan``, ``worker``, ``_pool``, ``_shm``, ``system``) never import the
  loops, the command, the diagnostics or the cluster tier.
- The layout page (``docs/explanation/layout.md``) lists every module and
  every test module, and nothing else.

Each rule lists its offenders by name, so a failure says what to fix.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import localsched

PACKAGE_DIR = Path(localsched.__file__).parent
MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 700
MAX_NOTE_LINES = 50
MAX_PACKAGE_NOTE_LINES = 70


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, tuple[Path, ast.Module]]:
    sources = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        sources[_module_name(path)] = (path, tree)
    return sources


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _imported_modules(
    name: str, path: Path, tree: ast.Module, modules: set[str]
) -> set[str]:
    """The localsched modules ``name`` imports (the most specific module of
    each dotted name: ``from a import b`` names module ``a.b`` when it is
    one, else ``a``)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: -(node.level - 1)]
                base = ".".join(base_parts)
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            candidates = [
                f"{source}.{alias.name}"
                if f"{source}.{alias.name}" in modules
                else source
                for alias in node.names
            ]
        for candidate in candidates:
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def import_graph() -> dict[str, set[str]]:
    sources = _sources()
    modules = set(sources)
    return {
        name: _imported_modules(name, path, tree, modules)
        for name, (path, tree) in sources.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan),
    each given as one concrete circle through its members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(root: str) -> None:
        nonlocal counter
        # iterative Tarjan: (node, iterator over its successors)
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return [_circle_through(graph, set(c)) for c in components]


def _circle_through(graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """A shortest circle from the component's first module back to itself."""
    start = min(members)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    return paths[node] + [start]
                if succ not in paths:
                    paths[succ] = paths[node] + [succ]
                    following.append(succ)
        frontier = following
    return sorted(members)


def test_the_graph_sees_function_level_imports():
    # the checker itself: an import inside a function is an edge
    tree = ast.parse("def f():\n    from . import b\n")
    modules = {"pkg", "pkg.a", "pkg.b"}
    assert _imported_modules("pkg.a", Path("a.py"), tree, modules) == {"pkg.b"}
    graph = {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg": set()}
    assert _cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_no_import_circle():
    cycles = _cycles(import_graph())
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _room(module: str) -> str:
    # a folder, or a top-level module (each is a room of its own)
    return module.split(".")[1] if "." in module else module


def test_no_two_rooms_import_each_other():
    """Between rooms (a folder, or one of the front's top-level modules)
    the arrows point one way: a module-level circle is caught above, but
    ``run -> view -> run`` through different modules still ties the two
    rooms' designs together."""
    edges: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        edges.setdefault(_room(module), set())
        for target in targets:
            if _room(module) != _room(target):
                edges.setdefault(_room(module), set()).add(_room(target))
    assert _cycles(edges) == []


def test_shared_memory_sits_between_the_pool_and_the_platform():
    """Imports run ``_pool -> _shm -> _platform``, never back: the shared
    memory package knows nothing of the process pool or the scheduler, and
    the platform nothing of either (issue #35).  The users' settings
    (``settings``) and the fork mechanism (``forking``) are leaves beside
    the platform: used from anywhere, importing nothing of localsched; so
    are the records' layouts (``records_wire``), which shared memory reads
    records by."""
    graph = import_graph()
    leaves = ("localsched.system.platform", "localsched.system.settings",
              "localsched.system.forking", "localsched.worker.records_wire")
    wrong = []
    for module, imported in graph.items():
        for target in imported:
            if module.startswith("localsched._shm") and not (
                    target.startswith("localsched._shm") or target in leaves):
                wrong.append(f"{module} -> {target}")
            if module in leaves and target != module:
                wrong.append(f"{module} -> {target}")
    assert not wrong, wrong
    assert any(t.startswith("localsched._shm") for m, ts in graph.items()
               if m.startswith("localsched._pool") for t in ts)


def _long_functions() -> list[str]:
    found = []
    for name, (_path, tree) in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                first = min(
                    [node.lineno] + [d.lineno for d in node.decorator_list]
                )
                length = node.end_lineno - first + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}.{node.name} ({length} lines)")
    return found


def test_no_function_over_100_lines():
    assert _long_functions() == []


def test_no_module_over_700_lines():
    long_modules = [
        f"{name} ({n} lines)"
        for name, (path, _tree) in _sources().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert long_modules == []


def _note_lines(tree: ast.Module) -> int:
    """How many lines the module's note (its docstring) spans, 0 for none."""
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return 0
    assert first.end_lineno is not None
    return first.end_lineno - first.lineno + 1


def test_module_notes_are_short():
    """A module note says what the room does and why, briefly (issue #39):
    a newcomer reads it in one screen.  A package's note may also draw its
    rooms, hence a higher cap."""
    long_notes = []
    for name, (path, tree) in _sources().items():
        cap = MAX_PACKAGE_NOTE_LINES if path.name == "__init__.py" else MAX_NOTE_LINES
        if (n := _note_lines(tree)) > cap:
            long_notes.append(f"{name} ({n} lines, cap {cap})")
    assert long_notes == [], "move the detail to the functions' docstrings"


def test_the_design_notes_on_which_loop_drives_runstate_match_the_imports():
    # machine.py and core.py: the local loops drive RunState, the cluster
    # loop follows the cluster's scheduler in its own ClusterState, and all
    # three share the lifecycle.
    graph = import_graph()
    cluster = {m for m in graph if m.startswith("localsched.distributed")}
    assert all("localsched.run.machine" not in graph[m] for m in cluster)
    assert any("localsched.run.lifecycle" in graph[m] for m in cluster)
    for local_loop in ("localsched.run.inline", "localsched.run.poolloop"):
        assert "localsched.run.machine" in graph[local_loop]


# -- the layout page lists every module ---------------------------------------

REPO_DIR = PACKAGE_DIR.parent
LAYOUT_PAGE = REPO_DIR / "docs" / "explanation" / "layout.md"
_HEADING = re.compile(r"^### `([\w/]+)/`\s*$")
_ROW = re.compile(r"^\| `([\w]+\.py)` \|")


def _listed_in_layout() -> set[str]:
    listed, folder = set(), None
    for line in LAYOUT_PAGE.read_text(encoding="utf-8").splitlines():
        if m := _HEADING.match(line):
            folder = m.group(1)
        elif (m := _ROW.match(line)) and folder is not None:
            listed.add(f"{folder}/{m.group(1)}")
    return listed


def _modules_on_disk() -> set[str]:
    found = set()
    for top in ("localsched", "tests"):
        for path in (REPO_DIR / top).rglob("*.py"):
            rel = path.relative_to(REPO_DIR)
            if path.name != "__init__.py" and "sim_site" not in rel.parts:
                found.add(rel.as_posix())
    return found


def test_the_layout_page_lists_every_module_and_test_module():
    """docs/explanation/layout.md has one table per folder, one row per
    module: a newcomer finds any room, and its tests, from there."""
    listed, on_disk = _listed_in_layout(), _modules_on_disk()
    assert sorted(on_disk - listed) == [], "add a row to docs/explanation/layout.md"
    assert sorted(listed - on_disk) == [], "rows of modules that are gone"


# -- rooms keep their private names -------------------------------------------

def _folder(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def test_no_private_name_is_imported_from_another_folder():
    """A name with a leading underscore is its folder's own business: no
    ``from ..other import _name``.  (A private folder such as ``_pool`` is
    imported through the public names of its modules.)"""
    sources = _sources()
    wrong = []
    for name, (path, tree) in sources.items():
        folder = _folder(name, path)
        for node in _import_nodes(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = folder.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "localsched" or source not in sources:
                continue
            source_folder = _folder(source, sources[source][0])
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and source_folder != folder:
                    wrong.append(f"{name}: from {source} import {alias.name}")
    assert wrong == []


def test_the_lower_folders_never_import_the_loops_or_the_diagnostics():
    """``plan/``, ``worker/``, ``_pool/``, ``_shm/`` and ``system/`` sit
    under the run: none imports ``run/``, the command, the diagnostics or
    the cluster tier, so each can be read (and tested) without them."""
    lower = ("plan", "worker", "_pool", "_shm", "system")
    upper = ("run", "command", "diagnostics", "distributed")
    wrong = [
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        if module.split(".")[1:2] and module.split(".")[1] in lower
        for target in targets
        if target.split(".")[1:2] and target.split(".")[1] in upper
    ]
    assert wrong == []
