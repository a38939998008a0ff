"""Tests of sagemeter.questions."""
