"""Server-sent events at the byte level: split raw body bytes into events, parse JSON rarely.

A streamed reply is hundreds of small events; decoding and JSON-parsing each one is most of what
a Python client spends per token. Events are split on the blank line in the raw bytes, a content
event is recognised by one compiled byte pattern, and JSON is parsed only for the few events that
carry something we keep (`usage`, the engine's `timings`, an `error`, a finish reason).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# A non-empty `content` (chat) or `text` (completions) string. Inside a JSON string every quote
# is escaped, so these byte patterns cannot match text the model wrote.
CONTENT_EVENT = re.compile(rb'"(?:content|text)"\s*:\s*"(?!")')
# Events worth a JSON parse: the end marker, a usage object, engine timings, an error, a finish.
SPECIAL_EVENT = re.compile(rb'\[DONE\]|"(?:usage"\s*:\s*\{|timings"|error"|finish_reason"\s*:\s*")')
DONE_MARKER = b"[DONE]"


def _normalise_line_ends(data: bytes) -> bytes:
    """CRLF and lone CR become LF; a trailing CR is kept (its LF may come in the next read)."""
    held = b""
    if data.endswith(b"\r"):
        data, held = data[:-1], b"\r"
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + held


class SseSplitter:
    """Feed raw body bytes as they arrive; get back every event completed by them.

    An event may be split across reads and one read may hold several events; bytes after the
    last blank line wait for the next read. Empty events (extra blank lines) are dropped.
    """

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[bytes]:
        if self._tail:
            data = self._tail + data
        if b"\r" in data:
            data = _normalise_line_ends(data)
        events = data.split(b"\n\n")
        self._tail = events.pop()
        if b"" in events:
            events = [event for event in events if event]
        return events

    def flush(self) -> bytes:
        """The unterminated remainder at the end of the body (an event without its blank line)."""
        tail, self._tail = self._tail.rstrip(b"\r\n"), b""
        return tail


def event_data(event: bytes) -> bytes:
    """The event's `data` field: its data lines joined by LF, one leading space dropped each."""
    parts: list[bytes] = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            parts.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(parts)


@dataclass(slots=True)
class SpecialEvent:
    """What a rare event says: end marker, completion tokens, engine tokens, finish, error."""

    done: bool = False
    usage_tokens: int | None = None
    engine_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message") or error.get("msg") or json.dumps(error)[:200]
        return str(message)
    return str(error)[:200]


def parse_special(event: bytes) -> SpecialEvent:
    """Parse one event that SPECIAL_EVENT matched; malformed JSON becomes an error."""
    data = event_data(event)
    if data.strip() == DONE_MARKER:
        return SpecialEvent(done=True)
    try:
        payload = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return SpecialEvent(error=f"malformed event: {data[:120]!r}")
    special = SpecialEvent()
    if not isinstance(payload, dict):
        return special
    if payload.get("error") is not None or payload.get("object") == "error":
        special.error = _error_text(payload.get("error", payload))
    usage = payload.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        special.usage_tokens = usage["completion_tokens"]
    timings = payload.get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("predicted_n"), int):
        special.engine_tokens = timings["predicted_n"]
    choices = payload.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str):
                special.finish_reason = choice["finish_reason"]
    return special
