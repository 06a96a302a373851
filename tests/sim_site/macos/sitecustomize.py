"""A Python process started with this directory on its ``PYTHONPATH`` runs
as macOS, simulated (``tests/support/macos_sim.py``: ``install``; the answers,
without ``MACOS_LIKE``'s rules)."""

from tests.support.macos_sim import install

install()
