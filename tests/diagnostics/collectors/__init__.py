"""Tests of localsched.diagnostics.collectors."""
