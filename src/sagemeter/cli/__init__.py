"""The command line face: `sagemeter …` (`app` assembles the groups, one module each)."""

from sagemeter.cli.app import app, main

__all__ = ["app", "main"]
