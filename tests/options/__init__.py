"""Tests of sagemeter.options."""
