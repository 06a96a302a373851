"""The run: one computation from ``get_async`` to its result -- the
loops, the run's state and its moves, the batch planner, callbacks'
lifecycle, the records a run keeps, and the memory budget with its
spill store."""
