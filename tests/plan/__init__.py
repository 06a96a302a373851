"""Tests of localsched.plan."""
