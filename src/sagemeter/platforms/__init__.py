"""Platforms: where a plan's endpoints are deployed and billed, each a plug-in (registry.py)."""
