"""Tests of sagemeter.fidelity."""
