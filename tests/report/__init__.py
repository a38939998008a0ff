"""Tests of sagemeter.report."""
