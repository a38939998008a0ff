"""What one streamed event does to a request's record, the same on every wire.

The HTTP connection and the SageMaker runtime stream both split their bytes into events and hand
each one here with the instant its bytes arrived: token events are time-stamped (reasoning ones
counted apart), and the rare events that carry usage, the engine's own figures, a finish reason,
an error or the end marker are parsed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from sagemeter.request_record import LiveRecord
from sagemeter.transport.bad_json import BAD_JSON
from sagemeter.transport.sse import (
    CONTENT,
    MAYBE_TOKEN,
    NOT_A_TOKEN,
    REASONING,
    SPECIAL_EVENT,
    classify,
    event_data,
    event_text,
    parse_special,
)

TextCallback = Callable[[str], None]


def take_event(
    record: LiveRecord, event: bytes, now: float, on_text: TextCallback | None = None
) -> int:
    """Apply one event to `record`; returns its kind (sse.CONTENT, REASONING, …).

    With `on_text` (or `record.pieces` set), the answer text is kept as well: that parses the
    event's JSON, so the hot path leaves both unset.
    """
    kind = classify(event)
    if kind == CONTENT:
        record.arrivals.append(now)
        if record.pieces is not None or on_text is not None:
            piece = event_text(event)
            if record.pieces is not None:
                record.pieces.append(piece)
            if on_text is not None and piece:
                on_text(piece)
    elif kind == REASONING:
        record.arrivals.append(now)
        record.reasoning += 1
    elif kind == MAYBE_TOKEN:
        record.maybe_token_at = now
    if SPECIAL_EVENT.search(event) is not None:
        _special(record, event)
    elif kind == NOT_A_TOKEN:
        _check_other(record, event)
    return kind


def _check_other(record: LiveRecord, event: bytes) -> None:
    """An event that is neither a token nor one we parse anyway: it must at least be JSON (the
    role announcement, keep-alive comments and the like are; garbage is an error)."""
    data = event_data(event).strip()
    if not data:
        return  # a comment or a field without data
    try:
        json.loads(data)
    except BAD_JSON:
        if record.error is None:
            record.error = f"malformed event: {data[:120]!r}"


def _special(record: LiveRecord, event: bytes) -> None:
    special = parse_special(event)
    if special.done:
        record.done = True
        return
    if special.usage_tokens is not None:
        record.usage_tokens = special.usage_tokens
    if special.engine_tokens is not None:
        record.engine_tokens = special.engine_tokens
    if special.engine_rate is not None:
        record.engine_rate = special.engine_rate
    if special.prompt_tokens is not None:
        record.prompt_tokens = special.prompt_tokens
    if special.cached_prompt_tokens is not None:
        record.cached_prompt_tokens = special.cached_prompt_tokens
    if special.engine_prompt_rate is not None:
        record.engine_prompt_rate = special.engine_prompt_rate
    if special.finish_reason is not None:
        record.finish_reason = special.finish_reason
    if special.model is not None:
        record.model = special.model
    if special.error is not None and record.error is None:
        record.error = special.error


def check_reply_model(record: LiveRecord, expected: str | None) -> None:
    """A reply that names another model than the server's first replies did is a failure: the
    server was swapped, and its figures are not the measured model's."""
    if expected is None or record.model is None or record.model == expected:
        return
    if record.error is None:
        record.error = (
            f"the reply came from model {record.model!r}, not {expected!r} as the first replies "
            "did (the server's model changed)"
        )
        record.done = False


def first_reply_model(records: Iterable[LiveRecord]) -> str | None:
    """The model the earliest answered reply named (None: no reply named one): the one later
    replies are held to when nobody said which model to expect (a load worker's)."""
    named = [record for record in records if record.model is not None]
    return min(named, key=lambda record: record.end).model if named else None


def stream_outcome(record: LiveRecord) -> str | None:
    """The error of a stream that has ended, or None when it ended as an answer ends: with a
    finish reason or `[DONE]` (anything else was cut short, however much it had said)."""
    if record.error is not None:
        return record.error
    if not record.done and record.finish_reason is None:
        return "stream ended before a finish_reason or [DONE]"
    return None
