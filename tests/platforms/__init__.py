"""Tests of sagemeter.platforms."""
