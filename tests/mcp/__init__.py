"""Tests of sagemeter.mcp."""
