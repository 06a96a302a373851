"""Tests of localsched.distributed."""
