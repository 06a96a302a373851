"""The operating system and the user's environment: the platform's
answers (``platform``), what a forked child renews (``forking``), the
users' settings and dask's config (``settings``, ``options``), text
safe for a terminal (``termsafe``), the threads BLAS runs in each worker
process (``blas``).  Leaves: they import nothing of
localsched outside this folder."""
