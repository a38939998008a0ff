"""Server-sent events at the byte level, and the one rule for what counts as a token event.

A streamed reply is hundreds of small events; decoding and JSON-parsing each one is most of what
a Python client spends per token. Events are split on the blank line in the raw bytes, each event
is classified by a few compiled byte patterns, and JSON is parsed only for the few events that
carry something we keep (`usage`, the engine's `timings`, an `error`, a finish reason).

The token-event rule (every wire uses `classify`, so TTFT and inter-token gaps mean one thing):
a token event is a streamed choice delta that carries a token, whether its text is non-empty or
empty: `content` (chat), `text` (completions, and TGI/LMI `token` lines), `reasoning` or
`reasoning_content` (a reasoning model's thinking, counted apart). Servers send empty text for
special tokens and for bytes held back until a UTF-8 character is whole; those are tokens too.
Not token events: the opening delta that only announces the role (`{"role": "assistant",
"content": ""}`), deltas whose fields are `null` or absent, usage-only events, `[DONE]`. An event
whose only field is empty *and* which carries the finish reason is ambiguous (llama.cpp's and the
OpenAI completions API's closing event looks like that, and so does vLLM's last token when it
renders as nothing): it is kept aside and counted as a token only when the server's `usage` says
one token is otherwise missing (see `record.LiveRecord.settle`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sagemeter.transport.bad_json import BAD_JSON
from sagemeter.transport.json_values import number, whole
from sagemeter.transport.upstream import one_line

# Inside a JSON string every quote is escaped, so none of these byte patterns can match text the
# model wrote; `"content":[` (chat logprobs) and `"text_offset"` do not match either.
_TEXT_FIELDS = rb'"(?:content|text)"\s*:\s*"'
_REASONING_FIELDS = rb'"(?:reasoning|reasoning_content)"\s*:\s*"'
CONTENT_TOKEN = re.compile(_TEXT_FIELDS + rb'(?!")')
REASONING_TOKEN = re.compile(_REASONING_FIELDS + rb'(?!")')
EMPTY_TEXT = re.compile(_TEXT_FIELDS + rb'"')
EMPTY_REASONING = re.compile(_REASONING_FIELDS + rb'"')
ROLE = re.compile(rb'"role"\s*:')
FINISH = re.compile(rb'"finish_reason"\s*:\s*"')
# Events worth a JSON parse: the end marker, a usage object, engine timings, an error, a finish,
# and TGI/LMI's closing `details`.
SPECIAL_EVENT = re.compile(
    rb'\[DONE\]|"(?:usage"\s*:\s*\{|timings"|error"|finish_reason"\s*:\s*"|details"\s*:\s*\{)'
)
DONE_MARKER = b"[DONE]"

# What `classify` says about one event.
NOT_A_TOKEN = 0
CONTENT = 1
REASONING = 2
MAYBE_TOKEN = 3  # an empty field beside the finish reason: a token only if usage says so


def classify(event: bytes) -> int:
    """The token-event rule (module docstring) applied to one event's raw bytes."""
    if CONTENT_TOKEN.search(event) is not None:
        return CONTENT
    if REASONING_TOKEN.search(event) is not None:
        return REASONING
    empty_text = EMPTY_TEXT.search(event) is not None
    if not empty_text and EMPTY_REASONING.search(event) is None:
        return NOT_A_TOKEN
    if ROLE.search(event) is not None:
        return NOT_A_TOKEN  # the opening delta that only names the role
    if FINISH.search(event) is not None:
        return MAYBE_TOKEN
    return CONTENT if empty_text else REASONING


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
    With `lines=True` every line is an event of its own (LMI's JSON lines, no blank lines).
    """

    __slots__ = ("_separator", "_tail")

    def __init__(self, lines: bool = False) -> None:
        self._tail = b""
        self._separator = b"\n" if lines else b"\n\n"

    def feed(self, data: bytes) -> list[bytes]:
        if self._tail:
            data = self._tail + data
        if b"\r" in data:
            data = _normalise_line_ends(data)
        events = data.split(self._separator)
        self._tail = events.pop()
        if b"" in events:
            events = [event for event in events if event]
        return events

    def flush(self) -> bytes:
        """The unterminated remainder at the end of the body (an event without its blank line)."""
        tail, self._tail = self._tail.rstrip(b"\r\n"), b""
        return tail


def event_data(event: bytes) -> bytes:
    """The event's `data` field: its data lines joined by LF, one leading space dropped each.

    A bare JSON line (LMI's JSON lines, no `data:` prefix) is its own data.
    """
    if event.startswith((b"{", b"[")):
        return event
    parts: list[bytes] = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            parts.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(parts)


@dataclass(slots=True)
class SpecialEvent:
    """What a rare event says: end marker, completion tokens, engine figures, finish, error."""

    done: bool = False
    usage_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    engine_tokens: int | None = None
    engine_rate: float | None = None
    engine_prompt_rate: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    model: str | None = None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message") or error.get("msg") or json.dumps(error)
        return one_line(str(message))
    return one_line(str(error))


def _read_usage(special: SpecialEvent, usage: dict[str, Any]) -> None:
    """Completion tokens, and the prompt's count and cached share where the server says them."""
    if (completion := whole(usage.get("completion_tokens"))) is not None:
        special.usage_tokens = completion
    if (prompt := whole(usage.get("prompt_tokens"))) is not None:
        special.prompt_tokens = prompt
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and (cached := whole(details.get("cached_tokens"))) is not None:
        special.cached_prompt_tokens = cached


def parse_special(event: bytes) -> SpecialEvent:
    """Parse one event that SPECIAL_EVENT matched; malformed JSON becomes an error."""
    data = event_data(event)
    if data.strip() == DONE_MARKER:
        return SpecialEvent(done=True)
    try:
        payload = json.loads(data)
    except BAD_JSON:
        return SpecialEvent(error=f"malformed event: {data[:120]!r}")
    special = SpecialEvent()
    if not isinstance(payload, dict):
        return special
    if payload.get("error") is not None or payload.get("object") == "error":
        special.error = _error_text(payload.get("error", payload))
    usage = payload.get("usage")
    if isinstance(usage, dict):
        _read_usage(special, usage)
    if isinstance(model := payload.get("model"), str):
        special.model = model
    timings = payload.get("timings")
    if isinstance(timings, dict):
        if isinstance(timings.get("predicted_n"), int):
            special.engine_tokens = timings["predicted_n"]
        special.engine_rate = number(timings.get("predicted_per_second"))
        special.engine_prompt_rate = number(timings.get("prompt_per_second"))
        if special.cached_prompt_tokens is None:
            special.cached_prompt_tokens = whole(timings.get("cache_n"))  # llama.cpp's reuse
    choices = payload.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str):
                special.finish_reason = choice["finish_reason"]
    details = payload.get("details")  # TGI/LMI's closing line
    if isinstance(details, dict):
        if isinstance(details.get("finish_reason"), str):
            special.finish_reason = details["finish_reason"]
        if isinstance(details.get("generated_tokens"), int):
            special.usage_tokens = details["generated_tokens"]
    return special


def event_text(event: bytes) -> str:
    """The answer text a token event carries (`content`, `text`, a TGI token's text; not the
    reasoning).

    Parses the event's JSON, so it is for callers that keep the reply's text, not for the hot path.
    """
    try:
        payload = json.loads(event_data(event))
    except BAD_JSON:
        return ""
    if not isinstance(payload, dict):
        return ""
    pieces: list[str] = []
    for choice in payload.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        source = delta if isinstance(delta, dict) else choice
        for key in ("content", "text"):
            value = source.get(key)
            if isinstance(value, str):
                pieces.append(value)
    token = payload.get("token")
    if isinstance(token, dict) and isinstance(token.get("text"), str) and not token.get("special"):
        pieces.append(token["text"])
    return "".join(pieces)
