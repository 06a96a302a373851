"""``rerun_exceptions_locally=True`` on a cluster: the task the scheduler
blames for a failure runs again, alone, in the caller, on its inputs
gathered from the cluster (computed there again when the cluster already
released them), so that a debugger stops in it.  Its upstream graph never
runs in the caller.

The task re-run is the caller's own, from the caller's own graph: its
function is the object the caller made, with its module's globals and its
source (the scheduler's copy was unpickled: a function from ``__main__`` or
a notebook came back as a copy, ``<dynamic-code>`` in a debugger, its
globals a copy too).  Only a task the caller's graph does not hold (the
cluster built it, e.g. fused from an expression) runs from the scheduler's
copy, as does one that does not use the inputs the cluster's did (a
Future inside the task, which the cluster replaced by its key)."""

from __future__ import annotations


def rerun_locally(client, comp, exc: Exception) -> None:
    """Run the task the scheduler blames, alone, in the caller, on its
    inputs gathered from the cluster (computed there again if the cluster
    released them): it raises again, with its own frames."""
    from . import _plugin

    errored = [f.key for f in comp.futures if f.status == "error"]
    if not errored or client.status != "running":
        return
    cause = client.run_on_scheduler(_plugin.error_cause, errored)
    if cause is None:
        return
    key, run_spec, deps = cause
    values = _gather_inputs(client, comp, list(deps))
    own = _own_task(comp.life.dsk, key, deps, values)
    if own is not None:
        own()  # raises the task's own exception, here
    else:
        run_spec(values)
    exc.add_note(f"task {key!r} failed on the cluster but succeeded when re-run locally")


def _own_task(graph, key, deps: list, values: dict):
    """The caller's own task ``key`` of its ``graph``, ready to run on
    ``values`` (its inputs); None if the graph lacks it, or it does not
    use the inputs the cluster's task used (e.g. a Future inside the
    task, which the cluster replaced by its key)."""
    from ..plan.graph import compile_graph, execute

    if key not in graph:
        return None
    compiled = compile_graph({key: graph[key]}, known=values)
    i = compiled.index[key]
    if {compiled.keys[d] for d in compiled.deps[i]} != set(deps):
        return None
    spec = compiled.specs[i]
    return lambda: execute(spec, values)


def _gather_inputs(client, comp, deps: list) -> dict:
    """The values of ``deps`` from the cluster: gathered where the cluster
    still holds them; computed there again (from the graph's own specs)
    where it released them after the failure."""
    from distributed.client import FutureCancelledError

    def fetch(graph):
        futures = client.get(graph, deps, sync=False)
        try:
            return dict(zip(deps, client.gather(futures), strict=False))
        finally:
            for f in futures:
                f.release()

    try:
        return fetch({})
    except FutureCancelledError:  # ("lost dependencies": released)
        from dask.core import get_dependencies

        graph = comp.life.dsk
        needed: dict = {}
        todo = list(deps)
        while todo:
            k = todo.pop()
            if k in needed or k not in graph:
                continue
            needed[k] = graph[k]
            todo.extend(get_dependencies(graph, k))
        return fetch(needed)


