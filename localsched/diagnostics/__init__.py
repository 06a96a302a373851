"""Diagnostics built on the five scheduler callbacks."""
