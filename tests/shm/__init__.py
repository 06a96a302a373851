"""Tests of localsched._shm."""
