"""localsched's tests: one folder per folder of the package (see README.md)."""
