"""Tests of localsched.diagnostics.runs."""
