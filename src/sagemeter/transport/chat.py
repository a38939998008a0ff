"""What a measurement asks of any wire, and what every wire gives back.

Measurements build `ChatRequest`s and read `RequestRecord`s (`sagemeter.request_record`); they
never learn which server or backend answered. `ChatClient` is the interface both wires implement:
the OpenAI-compatible HTTP engine (`openai.py`) and the SageMaker runtime (`sagemaker.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from sagemeter.request_record import LiveRecord, RequestRecord
from sagemeter.transport.bad_json import BAD_JSON
from sagemeter.transport.json_values import number


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


def chat_body(request: ChatRequest, model: str | None) -> dict[str, Any]:
    """The chat-completions body for `request`; `model` is named when the server needs it."""
    body: dict[str, Any] = {
        "messages": request.messages(),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": request.stream,
    }
    if model:
        body["model"] = model
    if request.seed is not None:
        body["seed"] = request.seed
    if request.ignore_eos:
        body["ignore_eos"] = True
    if request.stream:
        body["stream_options"] = {"include_usage": True}
    return body


def plain_reply(payload: Any) -> tuple[str, str | None, int | None, float | None]:
    """(text, finish_reason, completion_tokens, engine rate) from an OpenAI or TGI/LMI body."""
    if isinstance(payload, list) and payload and isinstance(payload[0], dict):
        payload = payload[0]
    if not isinstance(payload, dict):
        raise ValueError("not a JSON object")
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens = usage.get("completion_tokens")
    tokens = tokens if isinstance(tokens, int) else None
    timings = payload.get("timings")
    rate = timings.get("predicted_per_second") if isinstance(timings, dict) else None
    rate = number(rate)
    if "choices" in payload:
        choice = payload["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or choice.get("text") or ""
        return str(text), choice.get("finish_reason"), tokens, rate
    if "generated_text" in payload:
        details = payload.get("details")
        details = details if isinstance(details, dict) else {}
        generated = details.get("generated_tokens")
        return (
            str(payload["generated_text"]),
            details.get("finish_reason"),
            generated if isinstance(generated, int) else tokens,
            rate,
        )
    raise ValueError("no choices or generated_text")


def read_plain_reply(record: LiveRecord) -> LiveRecord:
    """Fill a whole (non-streamed) reply's text, finish and tokens from its JSON body."""
    if record.error is not None:
        return record
    raw = record.body or b""
    try:
        payload = json.loads(raw)
    except BAD_JSON:
        record.error = f"answered something that is not JSON: {raw[:120]!r}"
        return record
    try:
        text, finish, tokens, rate = plain_reply(payload)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        record.error = f"answered JSON without chat `choices`: {raw[:120]!r}"
        return record
    record.pieces = [text]
    record.finish_reason = finish
    record.usage_tokens = tokens
    record.engine_rate = rate
    record.done = True
    model = payload.get("model") if isinstance(payload, dict) else None
    record.model = model if isinstance(model, str) else None
    return record


@dataclass
class BatchRun:
    """Requests sent at once, and whether the client kept up while they ran.

    `limits` lists the reasons the client may have set the pace (its loop late, a worker or the
    machine's cores saturated); empty when it kept up. `failure` says why the batch could not be
    sent at all (no records then). Records are on the client's timeline.
    """

    records: list[RequestRecord]
    workers: int
    client_cpu_s: float
    loop_lag_p99_s: float | None = None
    limits: list[str] = field(default_factory=list)
    failure: str | None = None

    @property
    def wall_s(self) -> float:
        """First send to the last byte of the batch."""
        if not self.records:
            return 0.0
        start = min(record.send_us for record in self.records)
        end = max(record.end_us for record in self.records)
        return (end - start) * 1e-6


class Unreachable(Exception):
    """The preflight found that the target does not answer as a chat API; the message says how."""


class ChatClient(Protocol):
    """An open connection to one endpoint. Implementations never raise for a bad response."""

    async def chat(self, request: ChatRequest) -> RequestRecord:
        """One request (sent again while it fails transiently), one record."""
        ...

    async def batch(self, requests: list[ChatRequest]) -> BatchRun:
        """Every request sent at the same instant; returns when all have ended."""
        ...

    async def preflight(self) -> None:
        """One short request proving the target speaks the chat API; else `Unreachable`."""
        ...

    async def describe(self) -> dict[str, Any]:
        """What the server says about itself (engine, version, model), best effort."""
        ...

    async def aclose(self) -> None: ...
