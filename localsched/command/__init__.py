"""The ``localsched`` command: ``profile``, ``demo``, ``report``, ``compare``."""
