"""The findings of the dashboard's finished run: what the report's panel
says (``localsched.diagnostics.analysis``), as a short list under the
summary strip, computed once per finished run from what the recorder kept
(each task's times and worker, the graph's dependencies at the finish) --
in the page's thread, never the scheduler's."""

from __future__ import annotations

__all__ = ["run_findings"]


def run_findings(log) -> list:
    """The findings (dicts) of a finished :class:`~.recorder.RunLog`."""
    from ..records import GraphData, TaskData
    from ..rundata import RunData

    finished = log.finished
    ends = list(log.ends)
    tasks = [TaskData(e[0], None, e[1], e[2], e[3]) for e in ends]
    graphs = []
    graph, workers = log.graph or (None, None)
    if graph is not None:
        keys, deps, order = graph
        graphs.append(GraphData(keys, deps, order, log.started, finished, workers))
    run = RunData(tasks=tasks, graphs=graphs, walls=[(log.started, finished)])
    return [f.as_dict() for f in run.findings()]
