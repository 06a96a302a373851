"""Tests of localsched.command."""
