"""Tests of sagemeter.inspect."""
