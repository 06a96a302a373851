"""localsched: fast local task-graph scheduling with detailed diagnostics."""
__version__ = "0.1.0"
