"""Tests of sagemeter.engines."""
