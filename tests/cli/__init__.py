"""Tests of sagemeter.cli."""
