"""What a result keeps of the server's identity (measure/identity.py reads it), with the result
schema."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ServerIdentity(BaseModel):
    """Who answered: `/v1/models` read before the first phase and again at each boundary."""

    model: str | None = Field(None, description="the first model's id as first read")
    models_sha256: str = Field(
        description="SHA-256 of the whole model list (each entry's `created` left out)"
    )
    process: str | None = Field(
        None, description="the server process sagemeter started (pid), as first read"
    )
    process_start_time_s: float | None = Field(
        None,
        description="the server's start (Unix seconds): /metrics process_start_time_seconds, "
        "or a SageMaker endpoint's CreationTime, as first read; None: the server does not give it",
    )
    checked: list[str] = Field(
        default_factory=list, description="the phase boundaries where it was read again"
    )
    changed: str | None = Field(
        None, description="the first change seen, and where; the later phases were not measured"
    )
