"""Tests of localsched.diagnostics.reporting."""
