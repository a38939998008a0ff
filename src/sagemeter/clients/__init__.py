"""Clients: how one request reaches a running endpoint and how it is timed."""
