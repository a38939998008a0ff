"""Every byte the calibration server sends, built once per reply shape and cached.

At 128 streams of 4 ms tokens the server sends about 32,000 chunks a second on one core it
shares with the client under test; building JSON per chunk would make the server the thing
measured, so each chunk is a constant and each reply length is encoded once.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

TOKEN_TEXT = "tok "
MODEL_ID = "truth"
SWAPPED_MODEL_ID = "truth-swapped"  # the other model of the `swap_model_after` fault


class Kind(Enum):
    """Which OpenAI endpoint a reply belongs to: their chunk shapes differ."""

    CHAT = "chat"
    COMPLETION = "completion"


def _dumps(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))


def _http_chunk(data: bytes) -> bytes:
    """One chunk of HTTP/1.1 chunked transfer encoding."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(payload: Any) -> bytes:
    return b"data: " + _dumps(payload).encode() + b"\n\n"


def _envelope(kind: Kind, model: str, choice: dict[str, Any]) -> dict[str, Any]:
    if kind is Kind.CHAT:
        head = {"id": "chatcmpl-truth", "object": "chat.completion.chunk"}
    else:
        head = {"id": "cmpl-truth", "object": "text_completion"}
    return {**head, "created": 0, "model": model, "choices": [choice]}


@dataclass(frozen=True)
class PromptCount:
    """What `usage` says of the prompt: its tokens (None: the key is left out, a server that
    gives no count) and, when the prefix cache is on, how many it served (vLLM's
    `prompt_tokens_details.cached_tokens`)."""

    tokens: int | None = 0
    cached: int | None = None


NO_PROMPT = PromptCount()


def _usage(tokens: int, prompt: PromptCount = NO_PROMPT) -> dict[str, Any]:
    usage: dict[str, Any] = {}
    if prompt.tokens is not None:
        usage["prompt_tokens"] = prompt.tokens
    usage["completion_tokens"] = tokens
    usage["total_tokens"] = tokens + (prompt.tokens or 0)
    if prompt.tokens is not None and prompt.cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": prompt.cached}
    return usage


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


@functools.lru_cache(maxsize=256)
def content_chunk(
    kind: Kind, model: str, first: bool, text: str = TOKEN_TEXT, reasoning: bool = False
) -> bytes:
    """One token's event, framed as an HTTP chunk; `reasoning` puts a chat token in the delta's
    `reasoning` field (a thinking token).

    A chat stream opens as vLLM's does: with the first token comes, just before it, an event
    whose delta only names the role (`{"role": "assistant", "content": ""}`), which is no token.
    """
    if kind is Kind.CHAT:
        delta: dict[str, Any] = {"reasoning": text} if reasoning else {"content": text}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
        event = _event(_envelope(kind, model, choice))
        if first:
            role = {"index": 0, "delta": {"role": "assistant", "content": ""}}
            event = _event(_envelope(kind, model, {**role, "finish_reason": None})) + event
        return _http_chunk(event)
    choice = {"index": 0, "text": text, "finish_reason": None}
    return _http_chunk(_event(_envelope(kind, model, choice)))


@functools.lru_cache(maxsize=1024)
def stream_end(kind: Kind, model: str, tokens: int, prompt: PromptCount = NO_PROMPT) -> bytes:
    """The finish event (finish_reason "length" and usage saying `tokens` and `prompt`),
    `[DONE]`, and the last HTTP chunk."""
    if kind is Kind.CHAT:
        choice: dict[str, Any] = {"index": 0, "delta": {}, "finish_reason": "length"}
    else:
        choice = {"index": 0, "text": "", "finish_reason": "length"}
    final = {**_envelope(kind, model, choice), "usage": _usage(tokens, prompt)}
    return _http_chunk(_event(final) + b"data: [DONE]\n\n") + b"0\r\n\r\n"


def json_response(status: int, payload: Any, close: bool = False, extra_headers: str = "") -> bytes:
    """A whole HTTP/1.1 response with a JSON body."""
    return raw_response(status, "application/json", _dumps(payload).encode(), close, extra_headers)


def raw_response(
    status: int, content_type: str, body: bytes, close: bool = False, extra_headers: str = ""
) -> bytes:
    """A whole HTTP/1.1 response; `extra_headers` are complete lines, CRLF-terminated."""
    reason = {
        200: "OK",
        400: "Bad Request",
        401: "Unauthorized",
        404: "Not Found",
        405: "Method Not Allowed",
        429: "Too Many Requests",
        500: "Internal Server Error",
        503: "Service Unavailable",
    }
    connection = "connection: close\r\n" if close else ""
    head = (
        f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\n{connection}{extra_headers}\r\n"
    )
    return head.encode() + body


def error_response(
    status: int, message: str, close: bool = False, retry_after_s: float | None = None
) -> bytes:
    """OpenAI's error shape, so clients print the reason; `Retry-After` when given."""
    error = {"message": message, "type": "invalid_request_error", "code": status}
    extra = f"retry-after: {retry_after_s:g}\r\n" if retry_after_s is not None else ""
    return json_response(status, {"error": error}, close, extra)


NOT_AN_API_PAGE = raw_response(
    200, "text/html", b"<html><body><h1>Welcome to nginx!</h1></body></html>"
)
NO_CHOICES = json_response(200, {"id": "x", "object": "status", "status": "ok"})


@functools.lru_cache(maxsize=1024)
def whole_reply(
    kind: Kind,
    model: str,
    tokens: int,
    reported: int | None = None,
    prompt: PromptCount = NO_PROMPT,
    head: str = "",
    text: str | None = None,
) -> bytes:
    """A non-streamed reply of `tokens` tokens (after `head`, an echo fault's text); its usage
    says `reported` (default: `tokens`) and `prompt`. `text` (a known question's answer) is
    the whole reply instead, ended by the model ("stop") rather than by the token limit."""
    finish = "length" if text is None else "stop"
    text = head + TOKEN_TEXT * tokens if text is None else text
    if kind is Kind.CHAT:
        body: dict[str, Any] = {
            "id": "chatcmpl-truth",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
            ],
        }
    else:
        body = {
            "id": "cmpl-truth",
            "object": "text_completion",
            "choices": [{"index": 0, "text": text, "finish_reason": finish}],
        }
    usage = _usage(tokens if reported is None else reported, prompt)
    body.update(created=0, model=model, usage=usage)
    return json_response(200, body)


@functools.cache
def models(max_model_len: int | None = None, model_id: str = MODEL_ID) -> bytes:
    """GET /v1/models: the one model, with its context length when the server has one (vLLM's
    `max_model_len`)."""
    model: dict[str, Any] = {"id": model_id, "object": "model", "created": 0}
    model["owned_by"] = "sagemeter"
    if max_model_len is not None:
        model["max_model_len"] = max_model_len
    return json_response(200, {"object": "list", "data": [model]})


MODELS = models()
HEALTH = json_response(200, {"status": "ok"})
