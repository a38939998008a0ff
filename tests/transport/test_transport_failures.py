"""The wire against a loopback server that misbehaves on purpose: every fault is a record.

Retries are off here (each test names the one try it checks), except where sending again is
what is tested.
"""

from __future__ import annotations

import asyncio

from sagemeter.measure.decode import measure_decode
from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.openai import OpenAIChat
from sagemeter.transport.retry import NO_RETRIES, RetryPolicy
from tests.wire import STREAM_HEAD, WireServer, chunk, json_response, sse

CHAT = "/v1/chat/completions"


def _request(stream: bool = True, max_tokens: int = 3) -> ChatRequest:
    return ChatRequest(prompt="hi", max_tokens=max_tokens, stream=stream, ignore_eos=True)


async def _chat(  # type: ignore[no-untyped-def]
    routes: dict, request: ChatRequest, timeout: float = 5.0, retry: RetryPolicy = NO_RETRIES
):
    with WireServer(routes) as server:
        async with OpenAIChat(server.url, model="m", timeout_s=timeout, retry=retry) as client:
            return await client.chat(request), server


async def test_http_error_becomes_failed_record_with_status_and_body() -> None:
    async def fail(writer, body):  # type: ignore[no-untyped-def]
        writer.write(json_response(503, {"error": "overloaded, try later"}))

    for stream in (True, False):
        record, _ = await _chat({CHAT: fail}, _request(stream))
        assert not record.ok
        assert record.error is not None
        assert record.error.startswith("HTTP 503")
        assert "overloaded" in record.error


async def test_stream_cut_mid_way_is_a_failure_not_a_short_success() -> None:
    async def cut(writer, body):  # type: ignore[no-untyped-def]
        writer.write(STREAM_HEAD + sse(chunk("one")) + sse(chunk(" two")))
        await writer.drain()
        writer.transport.abort()  # no finish_reason, no [DONE]

    record, _ = await _chat({CHAT: cut}, _request())
    assert not record.ok
    assert record.error is not None


async def test_stream_closed_cleanly_without_finish_is_reported() -> None:
    async def early(writer, body):  # type: ignore[no-untyped-def]
        writer.write(STREAM_HEAD + sse(chunk("one")))

    record, _ = await _chat({CHAT: early}, _request())
    assert not record.ok
    assert record.error == "stream ended before a finish_reason or [DONE]"


async def test_malformed_event_is_reported_with_its_text() -> None:
    async def garbage(writer, body):  # type: ignore[no-untyped-def]
        writer.write(STREAM_HEAD + sse(chunk("one")) + b"data: {not json\n\n" + b"data: [DONE]\n\n")

    record, _ = await _chat({CHAT: garbage}, _request())
    assert not record.ok
    assert record.error is not None
    assert record.error.startswith("malformed event")
    assert "{not json" in record.error


async def test_malformed_plain_response_is_reported() -> None:
    async def odd(writer, body):  # type: ignore[no-untyped-def]
        writer.write(json_response(200, {"choices": []}))

    record, _ = await _chat({CHAT: odd}, _request(stream=False))
    assert not record.ok
    assert record.error is not None
    assert record.error.startswith("answered JSON without chat `choices`")


async def test_timeout_becomes_failed_record() -> None:
    async def silent(writer, body):  # type: ignore[no-untyped-def]
        await asyncio.sleep(3)

    record, _ = await _chat({CHAT: silent}, _request(), timeout=0.5)
    assert not record.ok
    assert record.error is not None
    assert record.error.startswith("timeout")
    assert 0.4 < record.total_s < 2.5


async def test_connection_refused_becomes_failed_record() -> None:
    async with OpenAIChat("http://127.0.0.1:9/v1", model="m") as client:
        record = await client.chat(_request())
    assert not record.ok
    assert record.error == "cannot connect to 127.0.0.1:9: Connection refused"
    assert record.retries == 0  # refused is not transient: nothing is sent again


async def test_without_usage_tokens_are_counted_from_chunks_and_said_so() -> None:
    async def no_usage(writer, body):  # type: ignore[no-untyped-def]
        writer.write(
            STREAM_HEAD
            + sse(chunk("a"))
            + b": keep-alive comment\n\n"
            + sse(chunk("b"))
            + sse(chunk("c", finish="length"))
            + b"data: [DONE]\n\n"
        )

    record, server = await _chat({CHAT: no_usage}, _request())
    assert record.ok
    assert record.tokens == 3
    assert record.tokens_source == "events"
    assert record.finish_reason == "length"
    assert len(record.arrivals_us) == 3
    sent = server.requests[0]
    assert sent["ignore_eos"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["model"] == "m"


async def test_usage_wins_over_chunk_count() -> None:
    async def with_usage(writer, body):  # type: ignore[no-untyped-def]
        usage = {"choices": [], "usage": {"completion_tokens": 7, "prompt_tokens": 2}}
        writer.write(
            STREAM_HEAD
            + sse(chunk("ab"))
            + sse(chunk(finish="length"))
            + sse(usage)
            + b"data: [DONE]\n\n"
        )

    record, _ = await _chat({CHAT: with_usage}, _request())
    assert record.ok
    assert record.tokens == 7
    assert record.tokens_source == "usage"


async def test_error_event_inside_stream_is_a_failure() -> None:
    async def error_event(writer, body):  # type: ignore[no-untyped-def]
        writer.write(STREAM_HEAD + sse({"error": {"message": "context overflow"}}))

    record, _ = await _chat({CHAT: error_event}, _request())
    assert not record.ok
    assert record.error is not None
    assert "context overflow" in record.error


async def test_decode_refuses_a_rate_when_ignore_eos_is_not_honoured() -> None:
    """A server that stops at 5 tokens whatever is asked: the rate would be nonsense."""

    async def stops_early(writer, body):  # type: ignore[no-untyped-def]
        events = b"".join(sse(chunk(f"t{i}")) for i in range(5))
        usage = {"choices": [], "usage": {"completion_tokens": 5}}
        writer.write(
            STREAM_HEAD + events + sse(chunk(finish="stop")) + sse(usage) + b"data: [DONE]\n\n"
        )

    with WireServer({CHAT: stops_early}) as server:
        async with OpenAIChat(server.url, model="m") as client:
            detail = await measure_decode(client, short_tokens=4, long_tokens=32, repeats=2)
    assert not detail.valid
    assert detail.tokens_per_second is None
    assert any("did not honour ignore_eos" in problem for problem in detail.problems)


async def test_a_connection_closed_before_any_answer_is_sent_again() -> None:
    """A kept-alive connection the server dropped as we reused it: sent again, then honest."""
    calls = {"n": 0}

    async def drops_first(writer, body):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            writer.transport.abort()  # closed without a byte of response
            return
        writer.write(STREAM_HEAD + sse(chunk("ok", finish="stop")) + b"data: [DONE]\n\n")

    quick = RetryPolicy(retries=1, base_s=0.01)
    record, server = await _chat({CHAT: drops_first}, _request(), retry=quick)
    assert record.ok, record.error
    assert record.tokens == 1
    assert len(server.requests) == 2
    assert record.retries == 1 and "before any answer" in record.attempts[0].error

    async def always_drops(writer, body):  # type: ignore[no-untyped-def]
        writer.transport.abort()

    record, server = await _chat({CHAT: always_drops}, _request(), retry=quick)
    assert not record.ok
    assert record.error is not None and "before any answer" in record.error
    assert len(server.requests) == 2  # one retry, as asked, not a loop


async def test_an_error_status_whose_body_is_cut_keeps_its_status_and_is_sent_again() -> None:
    """A 503 is a 503 even when the connection drops inside its body: named by its status, and
    sent again like any transient status (a 400 cut so is named, and not sent again)."""
    calls = {"n": 0}

    def cut_reply(status: int):  # type: ignore[no-untyped-def]
        async def reply(writer, body):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            writer.write(
                f"HTTP/1.1 {status} Oops\r\nContent-Type: application/json\r\n"
                "Content-Length: 200\r\n\r\n".encode()
                + b'{"error": "overloa'
            )
            await writer.drain()
            writer.transport.abort()

        return reply

    quick = RetryPolicy(retries=1, base_s=0.01)
    for stream in (True, False):
        calls["n"] = 0
        record, _ = await _chat({CHAT: cut_reply(503)}, _request(stream), retry=quick)
        assert not record.ok and record.status == 503
        assert record.error is not None and record.error.startswith("HTTP 503"), record.error
        assert "cut" in record.error and "overloa" in record.error
        assert calls["n"] == 2 and record.retries == 1
        calls["n"] = 0
        record, _ = await _chat({CHAT: cut_reply(400)}, _request(stream), retry=quick)
        assert not record.ok and record.status == 400 and calls["n"] == 1
        assert record.error is not None and record.error.startswith("HTTP 400"), record.error
