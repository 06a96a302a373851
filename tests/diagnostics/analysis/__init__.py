"""Tests of localsched.diagnostics.analysis."""
