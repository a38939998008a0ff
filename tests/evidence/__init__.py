"""Tests of sagemeter.evidence."""
