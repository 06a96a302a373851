"""One run's records: saved as JSON, rendered as one HTML page, exported as a
trace that Perfetto UI and chrome://tracing open.

The names of this module, each from the module that holds it:

* :class:`RunData`, ``load_json``, ``to_chrome_trace`` -- ``rundata``;
* :class:`RunFileError` (a saved run that cannot be read) -- ``runcheck``;
* the JSON layout, ``FORMAT``, ``VERSION``, ``DATA_ELEMENT_ID`` -- ``codec``;
* the trace export -- ``trace``;
* ``stack_tree`` -- ``stacks``;
* ``performance_report`` -- ``perf_report``.

>>> from localsched.diagnostics.collectors.records import TaskData
>>> run = RunData(tasks=[TaskData(('inc-1a2b', 0), None, 10.0, 10.5, 1)])
>>> RunData.from_json(run.to_json()).tasks == run.tasks
True
"""

from __future__ import annotations

from .collectors.stacks import stack_tree
from .reporting.perf_report import performance_report
from .runs.codec import DATA_ELEMENT_ID, FORMAT, VERSION
from .runs.rundata import RunData, RunFileError, load_json, to_chrome_trace

__all__ = ["RunData", "RunFileError", "performance_report", "to_chrome_trace", "load_json",
           "stack_tree", "FORMAT", "VERSION", "DATA_ELEMENT_ID"]
