"""What every client takes and gives back, whatever wire it speaks.

Measurements build `ChatRequest`s and read `RequestRecord`s; they never learn which server or
backend answered. Times are `time.perf_counter()` seconds: `sent_at` is absolute (so batches can be
lined up), every other time is relative to `sent_at`.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

TokenSource = Literal["usage", "chunks", "none"]


class ChatRequest(BaseModel):
    """One chat completion, as a measurement wants it sent."""

    prompt: str
    max_tokens: int = Field(gt=0)
    temperature: float = 0.0
    seed: int | None = 0
    ignore_eos: bool = False
    stream: bool = True
    system_prompt: str | None = None

    def messages(self) -> list[dict[str, str]]:
        messages = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": self.prompt})
        return messages


class RequestRecord(BaseModel):
    """Everything observed about one request; a failure is a record too, with its reason."""

    ok: bool
    error: str | None = None
    streamed: bool
    max_tokens: int
    sent_at: float = Field(description="perf_counter() when the request was handed to the wire")
    first_token_s: float | None = Field(None, description="seconds from send to first content")
    chunk_arrivals_s: list[float] = Field(
        default_factory=list, description="seconds from send to each content chunk"
    )
    total_s: float = Field(description="seconds from send to the end of the response")
    completion_tokens: int | None = None
    tokens_source: TokenSource = "none"
    finish_reason: str | None = None
    text: str = ""
    engine_timings: dict[str, Any] | None = Field(
        None, description="the engine's own timing block where it sends one (llama.cpp `timings`)"
    )

    @property
    def honoured_length(self) -> bool:
        """True when the server produced every token asked for (ignore_eos was honoured)."""
        return self.completion_tokens is not None and self.completion_tokens >= self.max_tokens

    def inter_token_gaps_s(self) -> list[float]:
        """Gaps between consecutive content chunks, first chunk excluded."""
        times = self.chunk_arrivals_s
        return [b - a for a, b in itertools.pairwise(times)]


class ChatClient(Protocol):
    """An open connection to one endpoint. Implementations never raise for a bad response."""

    async def chat(self, request: ChatRequest) -> RequestRecord: ...

    async def aclose(self) -> None: ...

    async def describe(self) -> dict[str, Any]:
        """What the server says about itself (engine, version, model), best effort."""
        ...
