"""Tests of sagemeter.compare."""
