"""A Python process started with this directory on its ``PYTHONPATH`` runs
as Windows, simulated (``tests/support/windows_sim.py``: ``install``)."""

from tests.support.windows_sim import install

install()
