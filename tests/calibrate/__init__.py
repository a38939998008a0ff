"""Tests of sagemeter.calibrate."""
