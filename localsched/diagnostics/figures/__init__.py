"""The Bokeh figures of the diagnostics, one module a figure.

``base`` (defaults, hover, legends, colours; the bokeh import check),
``tasks`` (task stream), ``resources``, ``cache``, ``metrics`` (fine
metrics), ``accounting`` (the worker-seconds as one bar and one table of
100%), ``flame`` (flame graph), ``durations`` (histograms).  Each
``plot_*`` takes plain records; the ``draw_*`` functions take the tables of
``localsched.diagnostics.reporting.aggregate`` so a page builds them once.  Pages are
put together in ``localsched.diagnostics.reporting.page``.
"""
