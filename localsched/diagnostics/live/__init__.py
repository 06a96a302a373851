"""A live view of running local computations: a dashboard with no cluster.

::

    from localsched.diagnostics import Dashboard
    with Dashboard() as dash:          # prints dash.link, http://127.0.0.1:PORT/status
        x.compute()

How it is built (one idea per module, imports point down the list)::

    recorder.py   the hooks: one append per finished task (its record) to the
                  current run's list (scheduler thread; nothing else runs there)
    bins.py       tiny tasks merged per lane, group and time bin (numpy), the
                  groups of a bin side by side
    resource_probe.py  CPU and memory of this process and its workers
    feed.py       the one pass over those lists, on demand, at most once per
                  interval: counts per group, running tasks, merged task-stream
                  rectangles, resource samples, lifetime counters, the ETA
    component.py  what a component is (root, update(), period)
    findings.py   the findings of a finished run (once per run, ``analysis``),
                  listed under the summary strip
    summary.py, groups.py, taskstream.py, resources.py, memory.py,
    finemetrics.py, flame.py      one component each
    patch.py      one PATCH-DOC message naming only the models it changes
    pages.py      /status and the /individual-* pages (a Bokeh document per tab):
                  the summary every 100 ms, the heavy parts within a CPU budget
                  (Cadence, Pacer), one message per update
    routes.py     plain HTTP: /json/progress.json, /metrics, /individual-plots.json,
                  /report.html -- no Bokeh session
    hosts.py      which Host a request may name (403 otherwise: DNS rebinding)
    server.py     the Bokeh server on its own thread and event loop
    dash.py       Dashboard (the Callback), dashboard() (the shared one),
                  from_environment() (LOCALSCHED_DASHBOARD)

The scheduler never waits for the browser: readers pull from append-only
lists with cursors (``len`` first, then a slice), and with no page open and
no probe the server thread sleeps.  With a page open, its summary strip
refreshes every 100 ms (its clocks; its counts are those of the last
take-in, which progress per group shows too), and the heavy updates stay
within a budget of server CPU per task finished (or a small share of a
core), and at most twice a second while tasks finish fast (the browser's
redraws run on the same cores), so a flood of tasks slows the task stream
and the groups, not the computation nor the summary.  A long-lived
dashboard keeps a bounded history of runs (``history``).  An update sends only what
changed (new task-stream rows, numbers inline) in one message; taking in the
finished tasks (about a quarter of a microsecond each, done by a full
update) is most of what a page costs on a run of tiny tasks.  Sessions with
no connection are reaped after half a second, so closed tabs and plain GETs stop costing at once.
"""

from __future__ import annotations

from .dash import ENV_VAR, Dashboard, dashboard, from_environment

__all__ = ["Dashboard", "dashboard", "from_environment", "ENV_VAR"]
