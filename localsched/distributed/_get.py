"""The front doors of companion mode: ``get`` (localsched's get on a
cluster) and ``observe`` (dask's own ``client.get``, with localsched's
callbacks listening), both one ``ClusterComputation`` in one lifecycle."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..run.lifecycle import Computation
from ._clusters import default_client
from ._computation import ClusterComputation, LazyGraph
from ._detail import Detail

#: distributed's own ``Client.get`` keywords, passed on to it by ``get``.
CLIENT_OPTIONS = ("workers", "allow_other_workers", "resources", "retries", "priority",
                  "fifo_timeout", "actors")


def get(dsk: Any, keys: Any, client=None, address: str | None = None, *,
        callbacks: Iterable | None = None, **options):
    """Compute ``keys`` of ``dsk`` on a dask.distributed cluster.

    Parameters
    ----------
    dsk : Mapping, HighLevelGraph, dask expression or object with ``__dask_graph__``
        A dask-spec graph: tuples, aliases, containers, dask's Task objects;
        its tasks may refer to Futures, and to keys this Client holds
        futures of (persisted data).
    keys : key or nested list of keys
        The result has the same nesting, lists becoming tuples.
    client : distributed.Client, optional
    address : str, optional
        The scheduler's address; see ``localsched.distributed`` for which
        cluster runs the graph when neither is given.
    callbacks : iterable of Callback or 5-tuples, optional
        Fired for this call instead of the registered ones.
    **options
        distributed's ``Client.get`` keywords (``workers``, ``resources``,
        ``retries``, ``priority``, ...) are passed on;
        ``rerun_exceptions_locally=True`` gathers the failed task's inputs
        from the cluster and runs that task again in the caller, so that a
        debugger stops in it; other keywords dask schedulers take are
        accepted and ignored; a near miss is a TypeError.

    >>> from distributed import LocalCluster, Client
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as lc, \\
    ...         Client(lc) as c:
    ...     get({'x': 2, 'y': (pow, 'x', 10)}, [['y'], 'x'], client=c)
    ((1024,), 2)
    """
    from ..system.options import check_options, dask_config

    if options:
        check_options(options, "localsched.distributed.get")
    client_options = {k: options[k] for k in CLIENT_OPTIONS if k in options}
    rerun = options.get("rerun_exceptions_locally")
    if rerun is None:
        rerun = dask_config("rerun_exceptions_locally", False)
    client = default_client(client, address)
    graph = _sendable(dsk, client)
    try:
        # (the outputs are checked inside the lifecycle: a refused graph
        # still gets start and finish, with an empty state, as locally)
        result = observe(client, graph, keys, client_options, callbacks=callbacks,
                         rerun=bool(rerun), check=lambda: _check_outputs(graph, keys, client))
    except RuntimeError as exc:
        if "Cycle detected" in str(exc) and isinstance(graph, Mapping):
            _raise_cycle(graph, keys, exc)
        raise
    return _as_tuples(keys, result)


def _raise_cycle(graph: Mapping, keys, exc: BaseException) -> None:
    """localsched's CycleError (naming the cycle, as every localsched get
    does) for a cycle the scheduler refused."""
    from ..plan.graph import compile_graph, flatten_keys
    from ..plan.order import order_and_consumers

    g = compile_graph(graph)
    outputs = [g.index[k] for k in flatten_keys(keys, []) if k in g.index]
    order_and_consumers(g.deps, g.is_data, outputs, g.keys)  # raises CycleError
    raise exc


def observe(client, graph, keys, options: dict, callbacks=None, rerun: bool = False,
            check=None):
    """``client.get(graph, keys, **options)``, with the callbacks fired
    from the cluster's events (see ``_computation``); ``check`` (refusing
    a graph) runs once the callbacks have started."""
    dsk = LazyGraph(graph)
    with Computation(dsk, callbacks) as life:
        if check is not None:
            check()
        detail = Detail(client, life.needs)
        comp = ClusterComputation(client, graph, keys, life, options, rerun=rerun,
                                  timed_groups=bool(life.needs.sample))
        try:
            return comp.run()
        finally:
            detail.collect(comp.state)


def _sendable(dsk, client):
    """What ``client.get`` takes: dicts, HighLevelGraphs and dask
    expressions as they are; any other Mapping or ``__dask_graph__`` owner
    as a dict.  Keys of this Client's futures that tasks of a dict graph
    refer to but the graph lacks become those futures."""
    from dask.highlevelgraph import HighLevelGraph

    if isinstance(dsk, (dict, HighLevelGraph)):
        graph = dsk
    else:
        try:
            from dask._expr import Expr
        except ImportError:  # (older dask)
            Expr = ()
        if isinstance(dsk, Expr):
            return dsk
        from ..plan.graph import as_mapping

        graph = dict(as_mapping(dsk))
    if isinstance(graph, dict) and client.futures:
        held = [k for k in client.futures if k not in graph]
        if held:
            used = _referenced(graph, set(held))
            if used:
                from distributed import Future

                graph = dict(graph)
                graph.update((k, Future(k, client)) for k in used)
    return graph


def _referenced(graph: dict, candidates: set) -> set:
    """The candidate keys some task of the graph refers to."""
    found: set = set()
    todo = list(graph.values())
    while todo:
        x = todo.pop()
        deps = getattr(x, "dependencies", None)
        if isinstance(deps, (set, frozenset)):  # dask's Task objects
            found.update(d for d in deps if d in candidates)
            continue
        if isinstance(x, (tuple, list)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
        else:
            try:
                if x in candidates:
                    found.add(x)
            except TypeError:
                pass
    return found


def _check_outputs(graph, keys, client) -> None:
    """A requested key neither in the graph nor held on the cluster by this
    Client would wait forever: a KeyError naming it."""
    from ..plan.graph import flatten_keys

    if not isinstance(graph, Mapping):
        return
    for k in flatten_keys(keys, []):
        try:
            inside = k in graph or k in client.futures
        except TypeError:
            raise TypeError(f"key {k!r} is unhashable; keys are str, bytes, int, "
                            f"float or tuples of these") from None
        if not inside:
            raise KeyError(f"key {k!r} is not in the graph")


def _as_tuples(keys, result):
    if type(keys) is list:
        return tuple(_as_tuples(k, r) for k, r in zip(keys, result, strict=False))
    return result
