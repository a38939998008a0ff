"""Tests of sagemeter.results."""
