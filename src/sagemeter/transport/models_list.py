"""Reading a server's `/v1/models` answer: the one place its shape is checked.

Servers answer anything here (an HTML page, `{"data": 7}`, ids that are numbers or empty), and
every command that talks to a server reads this list: to pick the model, to name the engine,
to notice the server changed. Each reads it through `model_entries`, so a reply of the wrong
shape is "no model listed" everywhere, never a traceback and never a model called `5`.
"""

from __future__ import annotations

from typing import Any

MAX_ID_CHARS = 512  # a model id is a name or a path; anything longer is not a model's id


def model_entries(payload: Any) -> list[dict[str, Any]]:
    """The entries of a `/v1/models` answer that name a model (`id` a non-empty string), in
    the server's order; empty for an answer that is no model list."""
    models = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(models, list):
        return []
    return [
        entry
        for entry in models
        if isinstance(entry, dict)
        and isinstance(entry.get("id"), str)
        and 0 < len(entry["id"].strip()) <= MAX_ID_CHARS
    ]


def first_model(payload: Any) -> dict[str, Any] | None:
    """The first entry naming a model, or None."""
    entries = model_entries(payload)
    return entries[0] if entries else None


def model_ids(payload: Any) -> list[str]:
    """Every listed model's id."""
    return [str(entry["id"]) for entry in model_entries(payload)]
