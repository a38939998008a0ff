"""Byte-level SSE: events split across reads, merged in one read, CRLF, and the rare JSON parse."""

from __future__ import annotations

import json

import pytest

from sagemeter.loadgen.sse import (
    CONTENT_EVENT,
    SPECIAL_EVENT,
    SseSplitter,
    event_data,
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
    assert CONTENT_EVENT.search(events[0]) is None


def test_unterminated_tail_is_flushed_at_the_end() -> None:
    splitter = SseSplitter()
    assert splitter.feed(b"data: [DONE]\r\n") == []
    assert splitter.flush() == b"data: [DONE]"
    assert splitter.flush() == b""


def test_content_events_are_told_apart_without_json() -> None:
    role_only, *tokens, final, _done = EVENTS
    assert CONTENT_EVENT.search(role_only) is None  # empty content is no token
    assert all(CONTENT_EVENT.search(event) for event in tokens)
    assert CONTENT_EVENT.search(final) is None
    assert CONTENT_EVENT.search(b'data: {"choices":[{"text":"x","index":0}]}')  # completions
    assert CONTENT_EVENT.search(b'data: {"choices":[{"delta":{"content":null}}]}') is None
    # Quotes inside the model's text are escaped, so its words never look like keys.
    assert SPECIAL_EVENT.search(_chunk('the "usage": {"error"}')) is None
    assert [bool(SPECIAL_EVENT.search(e)) for e in EVENTS] == [False] * 4 + [True, True]


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
    error = parse_special(b'data: {"error":{"message":"out of memory","code":500}}')
    assert error.error == "out of memory"
    assert "malformed" in (parse_special(b'data: {"usage": {').error or "")


def test_multi_line_data_fields_are_joined() -> None:
    assert event_data(b'data: {"a":\ndata:1}\nid: 7') == b'{"a":\n1}'
    assert parse_special(b'data: {"usage":\ndata: {"completion_tokens":2}}').usage_tokens == 2
