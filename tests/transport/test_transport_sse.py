"""Byte-level SSE: events split across reads, merged in one read, CRLF, the rare JSON parse,
and the one token-event rule every wire uses."""

from __future__ import annotations

import json

import pytest

from sagemeter.request_record import LiveRecord
from sagemeter.transport.events import take_event
from sagemeter.transport.sse import (
    CONTENT,
    MAYBE_TOKEN,
    NOT_A_TOKEN,
    REASONING,
    SPECIAL_EVENT,
    SseSplitter,
    classify,
    event_data,
    event_text,
    parse_special,
)


def _chunk(content: str, role: bool = False) -> bytes:
    delta = {"role": "assistant", "content": content} if role else {"content": content}
    payload = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + json.dumps(payload).encode()


FINAL = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}'
EVENTS = [
    _chunk("", role=True),
    _chunk("a"),
    _chunk('say "hi"\n'),
    _chunk("c"),
    FINAL,
    b"data: [DONE]",
]
STREAM = b"".join(event + b"\n\n" for event in EVENTS)


def _feed_all(splitter: SseSplitter, pieces: list[bytes]) -> list[bytes]:
    """Every event of the pieces, with the body's unterminated tail flushed at its end."""
    events = [event for piece in pieces for event in splitter.feed(piece)]
    tail = splitter.flush()
    return [*events, tail] if tail else events


def test_every_split_point_gives_the_same_events() -> None:
    for cut in range(1, len(STREAM)):
        assert _feed_all(SseSplitter(), [STREAM[:cut], STREAM[cut:]]) == EVENTS, cut


def test_one_byte_at_a_time_and_all_at_once() -> None:
    assert _feed_all(SseSplitter(), [bytes([b]) for b in STREAM]) == EVENTS
    assert SseSplitter().feed(STREAM) == EVENTS


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
def test_crlf_and_cr_line_endings_split_anywhere(ending: bytes) -> None:
    # A trailing CR may be half of a CRLF, so the last event waits for the body's end (flush).
    stream = STREAM.replace(b"\n", ending)
    for cut in range(1, len(stream)):
        assert _feed_all(SseSplitter(), [stream[:cut], stream[cut:]]) == EVENTS, cut


def test_a_crlf_split_between_reads_is_not_a_blank_line() -> None:
    splitter = SseSplitter()
    assert splitter.feed(b"data: one\r") == []
    assert splitter.feed(b"\ndata: more\r\n") == []
    assert splitter.feed(b"\r\n") == [b"data: one\ndata: more"]


def test_extra_blank_lines_and_comments_make_no_events() -> None:
    splitter = SseSplitter()
    events = splitter.feed(b"\n\n: keep-alive\n\n\n\n" + EVENTS[1] + b"\n\n")
    assert events == [b": keep-alive", EVENTS[1]]
    assert classify(events[0]) == NOT_A_TOKEN


def test_unterminated_tail_is_flushed_at_the_end() -> None:
    splitter = SseSplitter()
    assert splitter.feed(b"data: [DONE]\r\n") == []
    assert splitter.flush() == b"data: [DONE]"
    assert splitter.flush() == b""


def _delta(**delta: object) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}).encode()


def test_token_events_are_told_apart_without_json() -> None:
    role_only, *tokens, final, _done = EVENTS
    assert classify(role_only) == NOT_A_TOKEN  # the role announcement is no token
    assert [classify(event) for event in tokens] == [CONTENT] * 3
    assert classify(final) == NOT_A_TOKEN  # an empty delta with the finish reason
    assert classify(b'data: {"choices":[{"text":"x","index":0}]}') == CONTENT  # completions
    assert classify(_delta(content=None)) == NOT_A_TOKEN
    # Quotes inside the model's text are escaped, so its words never look like keys.
    assert SPECIAL_EVENT.search(_chunk('the "usage": {"error"}')) is None
    assert [bool(SPECIAL_EVENT.search(e)) for e in EVENTS] == [False] * 4 + [True, True]


def test_an_empty_text_token_is_a_token_event() -> None:
    # vLLM streams "" for special tokens and for bytes held back until a character is whole.
    assert classify(_delta(content="")) == CONTENT
    assert classify(b'data: {"choices":[{"text":"","index":0,"finish_reason":null}]}') == CONTENT
    # With the role it is the opening announcement; with the finish reason it may be the
    # closing event of a server that sends no token there: usage decides (see below).
    assert classify(_delta(role="assistant", content="")) == NOT_A_TOKEN
    closing = b'data: {"choices":[{"text":"","index":0,"finish_reason":"length"}]}'
    assert classify(closing) == MAYBE_TOKEN


def test_reasoning_deltas_are_token_events_counted_apart() -> None:
    assert classify(_delta(reasoning="Let me think")) == REASONING
    assert classify(_delta(reasoning_content="hmm")) == REASONING
    assert classify(_delta(reasoning="")) == REASONING
    assert classify(_delta(reasoning=None, content="x")) == CONTENT
    assert classify(b'data: {"choices":[{"delta":{"content":[{"token":"x"}]}}]}') == NOT_A_TOKEN
    record = LiveRecord(0, 0)
    for now, event in enumerate([_delta(role="assistant", content=""), _delta(reasoning="a")]):
        take_event(record, event, float(now))
    take_event(record, _delta(content=""), 2.0)
    take_event(record, _delta(content="b"), 3.0)
    assert record.arrivals == [1.0, 2.0, 3.0]  # TTFT is the first thinking token
    assert record.reasoning == 1


def test_the_ambiguous_closing_event_counts_only_when_usage_says_so() -> None:
    closing = b'data: {"choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":%d}}'
    for usage, expected in ((2, 2), (3, 3)):
        record = LiveRecord(0, 0)
        take_event(record, b'data: {"choices":[{"text":"a","index":0}]}', 1.0)
        take_event(record, b'data: {"choices":[{"text":"b","index":0}]}', 2.0)
        take_event(record, closing % usage, 3.0)
        record.settle()
        assert len(record.arrivals) == expected, usage
        assert record.usage_tokens == usage


def test_text_is_read_only_when_asked() -> None:
    assert event_text(_chunk('say "hi"\n')) == 'say "hi"\n'
    assert event_text(_delta(reasoning="thinking")) == ""  # the answer, not the thinking
    assert event_text(b'{"token":{"text":"Par","special":false}}') == "Par"  # LMI JSON lines
    pieces: list[str] = []
    record = LiveRecord(0, 0)
    take_event(record, _chunk("x"), 0.0, pieces.append)
    assert pieces == ["x"] and record.pieces is None


def test_a_malformed_event_is_an_error_even_off_the_hot_path() -> None:
    record = LiveRecord(0, 0)
    take_event(record, b"data: {not json", 0.0)
    assert record.error is not None and record.error.startswith("malformed event")
    quiet = LiveRecord(0, 0)
    take_event(quiet, b": keep-alive", 0.0)
    assert quiet.error is None


def test_special_events_parse_usage_finish_done_error_and_engine_timings() -> None:
    final = parse_special(FINAL)
    assert (final.usage_tokens, final.finish_reason, final.done, final.error) == (
        4,
        "length",
        False,
        None,
    )
    assert parse_special(b"data: [DONE]").done
    llama = b'data: {"choices":[{"finish_reason":"length","delta":{}}],"timings":{"predicted_n":9,"predicted_ms":90.0}}'
    assert SPECIAL_EVENT.search(llama)
    assert parse_special(llama).engine_tokens == 9
    rated = b'data: {"choices":[],"timings":{"predicted_n":9,"predicted_per_second":41.5}}'
    assert parse_special(rated).engine_rate == 41.5
    error = parse_special(b'data: {"error":{"message":"out of memory","code":500}}')
    assert error.error == "out of memory"
    assert "malformed" in (parse_special(b'data: {"usage": {').error or "")


def test_multi_line_data_fields_are_joined() -> None:
    assert event_data(b'data: {"a":\ndata:1}\nid: 7') == b'{"a":\n1}'
    assert parse_special(b'data: {"usage":\ndata: {"completion_tokens":2}}').usage_tokens == 2
