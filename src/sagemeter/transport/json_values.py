"""JSON values as servers send them, read strictly: Python's `True` is an `int`, but a JSON
`true` is never a count or a rate."""

from __future__ import annotations

from typing import Any


def whole(value: Any) -> int | None:
    """A JSON integer; None for anything else (booleans too)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (booleans too)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
