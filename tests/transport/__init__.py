"""Tests of sagemeter.transport."""
