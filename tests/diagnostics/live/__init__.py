"""Tests of localsched.diagnostics.live."""
