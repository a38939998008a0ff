"""OpenAI-style chat payloads, shared by every wire that carries them (HTTP, SageMaker runtime).

`chat_body` builds the request body; `StreamState` accumulates a streamed reply's events (OpenAI
chunks, plus the TGI/LMI `token` lines some SageMaker containers send) and turns them into a
`RequestRecord`; `failed_record` is the one shape of a failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sagemeter.clients.base import ChatRequest, RequestRecord, TokenSource

TextCallback = Callable[[str], None]


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


def failed_record(request: ChatRequest, sent_at: float, reason: str) -> RequestRecord:
    return RequestRecord(
        ok=False,
        error=reason,
        streamed=request.stream,
        max_tokens=request.max_tokens,
        sent_at=sent_at,
        total_s=time.perf_counter() - sent_at,
    )


def usage_tokens(payload: dict[str, Any]) -> int | None:
    usage = payload.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return int(usage["completion_tokens"])
    return None


def plain_reply(payload: Any) -> tuple[str, str | None, int | None]:
    """(text, finish_reason, completion_tokens) from an OpenAI or TGI/LMI non-streamed body."""
    if isinstance(payload, list) and payload and isinstance(payload[0], dict):
        payload = payload[0]
    if not isinstance(payload, dict):
        raise ValueError("not a JSON object")
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens = usage.get("completion_tokens")
    tokens = tokens if isinstance(tokens, int) else None
    if "choices" in payload:
        choice = payload["choices"][0]
        message = choice.get("message") or {}
        text = (
            message.get("content") or message.get("reasoning_content") or choice.get("text") or ""
        )
        return str(text), choice.get("finish_reason"), tokens
    if "generated_text" in payload:
        details = payload.get("details")
        details = details if isinstance(details, dict) else {}
        generated = details.get("generated_tokens")
        return (
            str(payload["generated_text"]),
            details.get("finish_reason"),
            generated if isinstance(generated, int) else tokens,
        )
    raise ValueError("no choices or generated_text")


def plain_record(request: ChatRequest, sent_at: float, total_s: float, raw: bytes) -> RequestRecord:
    """A non-streamed reply's body as a record, or a failure naming what was malformed."""
    try:
        payload = json.loads(raw)
        text, finish, tokens = plain_reply(payload)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return failed_record(request, sent_at, f"malformed response: {raw[:120]!r}")
    timings = payload.get("timings") if isinstance(payload, dict) else None
    return RequestRecord(
        ok=True,
        streamed=False,
        max_tokens=request.max_tokens,
        sent_at=sent_at,
        total_s=total_s,
        completion_tokens=tokens,
        tokens_source="usage" if tokens is not None else "none",
        finish_reason=finish,
        text=text,
        engine_timings=timings if isinstance(timings, dict) else None,
    )


class StreamState:
    """What a stream has said so far; `error` is set at the first event that breaks it."""

    def __init__(self, on_text: TextCallback | None = None) -> None:
        self.arrivals: list[float] = []
        self.pieces: list[str] = []
        self.finish: str | None = None
        self.usage_tokens: int | None = None
        self.timings: dict[str, Any] | None = None
        self.done = False
        self.error: str | None = None
        self._on_text = on_text

    def line(self, line: str, now: float) -> None:
        """One line of a line-oriented stream: SSE `data:` (vLLM) or bare JSON (LMI jsonlines)."""
        text = line.strip()
        if not text or text.startswith((":", "event:", "id:", "retry:")):
            return
        self.data(text[5:].strip() if text.startswith("data:") else text, now)

    def data(self, payload: str, now: float) -> None:
        """The data of one event, `now` seconds after the request was sent."""
        if payload.strip() == "[DONE]":
            self.done = True
            return
        try:
            event = json.loads(payload)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            self.error = f"malformed event: {payload[:120]!r}"
            return
        self.event(event, now)

    def event(self, event: dict[str, Any], now: float) -> None:
        if "error" in event:
            self.error = f"server error in stream: {event['error']}"
            return
        tokens = usage_tokens(event)
        if tokens is not None:
            self.usage_tokens = tokens
        if isinstance(event.get("timings"), dict):
            self.timings = event["timings"]
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            self._content(delta.get("content") or delta.get("reasoning_content") or "", now)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        token = event.get("token")
        if isinstance(token, dict) and not token.get("special"):  # LMI / TGI-style lines
            self._content(str(token.get("text") or ""), now)
        details = event.get("details")
        if isinstance(details, dict):
            if details.get("finish_reason"):
                self.finish = str(details["finish_reason"])
            if isinstance(details.get("generated_tokens"), int):
                self.usage_tokens = int(details["generated_tokens"])

    def _content(self, content: str, now: float) -> None:
        if content:
            self.arrivals.append(now)
            self.pieces.append(content)
            if self._on_text:
                self._on_text(content)

    def record(self, request: ChatRequest, sent_at: float) -> RequestRecord:
        """The finished stream as a record: a failure if it broke or ended without a finish."""
        if self.error:
            return failed_record(request, sent_at, self.error)
        if not self.done and self.finish is None:
            return failed_record(request, sent_at, "stream ended before a finish_reason or [DONE]")
        source: TokenSource = "usage" if self.usage_tokens is not None else "chunks"
        return RequestRecord(
            ok=True,
            streamed=True,
            max_tokens=request.max_tokens,
            sent_at=sent_at,
            first_token_s=self.arrivals[0] if self.arrivals else None,
            chunk_arrivals_s=self.arrivals,
            total_s=time.perf_counter() - sent_at,
            completion_tokens=self.usage_tokens if source == "usage" else len(self.arrivals),
            tokens_source=source,
            finish_reason=self.finish,
            text="".join(self.pieces),
            engine_timings=self.timings,
        )
