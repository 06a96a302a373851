"""A Python process started with this directory on its ``PYTHONPATH`` runs
as Windows, simulated (``tests/windows_sim.py``: ``install``)."""

from tests.windows_sim import install

install()
