"""Backends: where a model runs and its lifecycle (plan, deploy, wait, status, logs, delete)."""
