"""Tests of localsched.run."""
