"""Tests of sagemeter.measure."""
