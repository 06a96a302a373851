"""Tests of localsched._pool."""
