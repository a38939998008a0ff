"""Tests of sagemeter.figures."""
