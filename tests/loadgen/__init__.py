"""Tests of sagemeter.loadgen."""
