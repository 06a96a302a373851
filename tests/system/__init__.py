"""Tests of localsched.system."""
