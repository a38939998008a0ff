"""Tests of sagemeter.experiment."""
