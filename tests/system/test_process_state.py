"""Process-wide state has a reset in a forked child, or says why not.

``os.fork()`` copies every module's state into the child: a lock held by a
thread the child does not have, a pool whose listener is gone, the parent's
descriptors.  localsched resets such state through one mechanism,
``localsched.system.forking`` (``at_fork_in_child`` for module state, beside the
global it resets; ``renew_in_child`` for objects).  This scan keeps that
true as the code grows: every module-level mutable of ``localsched/`` (a
list, dict, set or instance assigned at module level, or a name a
function rebinds with ``global``) is either

- a constant by its name (``UPPER_CASE``) that its module never changes,
- touched by a function of its own module registered with
  ``at_fork_in_child``, or
- listed in ``ALLOWED`` below with the reason a child may keep it as is.

It also checks that no module calls ``os.register_at_fork`` but
``forking`` itself (one mechanism).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import localsched

PACKAGE_DIR = Path(localsched.__file__).parent

# Calls whose result cannot change (or is a value, not state).
IMMUTABLE_CALLS = {"frozenset", "tuple", "compile", "Struct", "namedtuple", "TypeVar", "object",
                   "getLogger", "NewType", "str", "int", "float", "bytes", "bool", "getattr",
                   "MappingProxyType", "startswith", "ContextVar", "Path", "dirname", "join",
                   "exists", "get", "environ_flag", "cache"}
MUTATORS = {"append", "extend", "insert", "pop", "popleft", "remove", "clear", "update", "add",
            "discard", "setdefault", "appendleft", "sort", "reverse"}
CONSTANT_NAME = re.compile(r"^_?[A-Z][A-Z0-9_]*$")

#: State a forked child may keep as it is, and why ("module:name": reason).
ALLOWED: dict[str, str] = {
    "localsched._pool.job:notes":
        "a worker's warnings for the job it runs, sent before the job's end: empty "
        "between jobs, and a child a task forks runs no job of the pool's",
    "localsched._pool.pool:_pool_tokens":
        "a counter (one C call per pool): a child's pools go on counting, their "
        "segment names are under the child's own store's owner",
    "localsched._pool.workers:_starting_without_main":
        "a thread-local flag, set only around starting a forkserver worker in "
        "that thread",
    "localsched._shm.store:_warnings":
        "one warning per process tree: a child inherits that its parent warned "
        "(a worker's warnings go to the caller, who warns once)",
    "localsched.run.batching:_learned":
        "task durations learned: as true in the child (its lock is renewed)",
    "localsched.callbacks:_global_active":
        "the callbacks a user registered: a user's os.fork child keeps them, as "
        "with dask's registry; a pool worker forgets them (forget_registered)",
    "localsched.callbacks:_holds": "as _global_active (how many holds each has)",
    "localsched.callbacks:_dask_mirrors":
        "as _global_active (the mirrors of those callbacks in dask's registry)",
    "localsched.callbacks:_registration_listeners":
        "functions told of (un)registrations: module code, as valid in the child",
    "localsched.delayed:process_default_scheduler":
        "the user's default scheduler name: a setting, as valid in the child",
    "localsched.diagnostics.live.patch:_by_id":
        "a weak cache of documents' models: the child's documents are its own",
    "localsched.diagnostics.live.recorder:_run_numbers":
        "a counter (one C call per run): numbers stay unique in the child",
    "localsched.diagnostics.reporting.naming:_repr":
        "a reprlib.Repr configured once at import, never changed",
    "localsched.distributed._clusters:_exit_hooked":
        "whether the exit hook is registered: atexit hooks survive a fork",
    "localsched.distributed._route:_saved":
        "what dask's named schedulers held before the hook: dask's module state, "
        "copied with it into the child",
    "localsched.metrics:_cachey_nbytes":
        "a function found once (cachey.nbytes or sys.getsizeof): as valid in the child",
    "localsched.metrics:_local":
        "per thread: the child's one thread is the forking one, in the state it "
        "was in",
    "localsched.multiprocessing:_shared":
        "a SharedPools, which renews itself in the child (renew_in_child: it "
        "forgets its parent's pools)",
    "localsched.worker.runtime:_warm":
        "whether this worker has run a batch: true of the child's copy too",
    "localsched.worker.runtime:running_tasks":
        "thread ident -> task, read only for threads that exist: the child's "
        "sampler (renewed above) finds its own threads only",
}


def _top_level(body):
    for s in body:
        if isinstance(s, ast.If):
            yield from _top_level(s.body)
            yield from _top_level(s.orelse)
        elif isinstance(s, ast.Try):
            yield from _top_level(s.body)
            for handler in s.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(s.orelse)
        else:
            yield s


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _is_mutable(value: ast.expr) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
                          ast.SetComp)):
        return True
    return isinstance(value, ast.Call) and _called(value) not in IMMUTABLE_CALLS


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names}


def _mutated(tree: ast.Module) -> set[str]:
    """Names the module changes: rebinds with ``global``, assigns into, or
    calls a mutating method of."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            out.update(node.names)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    out.add(t.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MUTATORS and isinstance(node.func.value, ast.Name):
            out.add(node.func.value.id)
    return out


def _reset_functions(tree: ast.Module) -> list[ast.AST]:
    """Functions of the module registered with ``at_fork_in_child``."""
    registered = {node.args[0].id for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and _called(node) == "at_fork_in_child"
                  and node.args and isinstance(node.args[0], ast.Name)}
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            and (node.name in registered
                 or any(getattr(d, "id", getattr(d, "attr", "")) == "at_fork_in_child"
                        for d in node.decorator_list))]


@functools.cache
def module_state() -> dict[str, str]:
    """``{"module:name": how it is accounted for}`` of every module-level
    mutable of localsched ("constant", "reset", "allowed" or "UNACCOUNTED")."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
        names = set()
        for s in _top_level(tree.body):
            if isinstance(s, ast.Assign):
                targets, value = s.targets, s.value
            elif isinstance(s, ast.AnnAssign) and s.value is not None:
                targets, value = [s.target], s.value
            else:
                continue
            if _is_mutable(value):
                names.update(t.id for t in targets
                             if isinstance(t, ast.Name) and not t.id.startswith("__"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                names.update(node.names)
        mutated = _mutated(tree)
        reset = set().union(*(_names_in(f) for f in _reset_functions(tree)))
        for name in sorted(names):
            key = f"{module}:{name}"
            if CONSTANT_NAME.match(name) and name not in mutated:
                found[key] = "constant"
            elif name in reset:
                found[key] = "reset"
            elif key in ALLOWED:
                found[key] = "allowed"
            else:
                found[key] = "UNACCOUNTED"
    return found


def mutable_globals() -> list[str]:
    """The module-level mutables that are state (not constants)."""
    return sorted(k for k, how in module_state().items() if how != "constant")


def test_every_module_level_mutable_is_reset_in_a_child_or_says_why_not():
    unaccounted = [k for k, how in module_state().items() if how == "UNACCOUNTED"]
    assert not unaccounted, (
        "module-level state with no reset in a forked child (reset it with "
        "localsched.system.forking.at_fork_in_child beside it, or add it to ALLOWED with "
        f"the reason): {unaccounted}")


def test_the_allow_list_names_only_what_exists():
    state = module_state()
    assert not [k for k in ALLOWED if state.get(k) != "allowed"]


def test_one_fork_mechanism():
    direct = [str(path.relative_to(PACKAGE_DIR.parent)) for path in PACKAGE_DIR.rglob("*.py")
              if path.name != "forking.py" and "register_at_fork(" in path.read_text("utf-8")]
    assert not direct, ("modules registering fork handlers outside "
                        f"localsched.system.forking: {direct}")


def test_the_scan_sees_state_and_its_reset(tmp_path, monkeypatch):
    """The scan itself: a dict is state, a constant table is not, a
    registered reset accounts for what it touches."""
    tree = ast.parse(
        "from .forking import at_fork_in_child\n"
        "TABLE = {1: 2}\n_seen = {}\n_kept = []\n_lock = Lock()\n"
        "@at_fork_in_child\ndef _renew():\n    global _lock\n    _lock = Lock()\n"
        "    _seen.clear()\n")
    assert {f.name for f in _reset_functions(tree)} == {"_renew"}
    assert "_kept" not in set().union(*(_names_in(f) for f in _reset_functions(tree)))
    assert _mutated(tree) >= {"_lock", "_seen"} and "TABLE" not in _mutated(tree)
