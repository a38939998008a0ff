"""The load client against a loopback server that misbehaves on purpose, over real sockets.

The server answers every request with a scripted reply: SSE with CRLF line endings cut into
small HTTP chunks written apart (events split across reads), fewer content events than its
`usage` claims, llama.cpp-style `timings`, HTTP errors, and streams cut short.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest

from sagemeter.loadgen.loadrun import run_once
from sagemeter.loadgen.result import LoadResult
from sagemeter.loadgen.settings import LoadSettings

EVENTS_SENT = 8
USAGE_CLAIMED = 10
ENGINE_CLAIMED = 9


def _sse(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\r\n\r\n"


def short_stream_body() -> bytes:
    """Role chunk, 8 content events, a final chunk claiming 10 tokens (engine: 9), [DONE]."""
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
    }
    body = _sse(chunk)
    for k in range(EVENTS_SENT):
        body += _sse(
            {"choices": [{"index": 0, "delta": {"content": f"t{k} "}, "finish_reason": None}]}
        )
    body += _sse(
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": USAGE_CLAIMED, "total_tokens": 15},
            "timings": {"predicted_n": ENGINE_CLAIMED, "predicted_ms": 30.0},
        }
    )
    return body + b"data: [DONE]\r\n\r\n"


class ScriptedServer:
    """An HTTP/1.1 keep-alive server on 127.0.0.1 in its own thread, one behaviour per instance."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.requests = 0
        self.bodies: list[dict[str, object]] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        assert self.ready.wait(10)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *_: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0)
        )
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()
        server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                self.bodies.append(json.loads(await reader.readexactly(length)))
                self.requests += 1
                if not await self._answer(writer):
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter) -> bool:
        """Write one reply; False when the connection is to be dropped."""
        if self.behaviour == "json":  # ignores stream=true
            body = b'{"choices":[{"message":{"content":"hi"}}],"usage":{"completion_tokens":1}}'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            return True
        if self.behaviour == "http-500":
            body = b'{"error":{"message":"the engine fell over","code":500}}'
            writer.write(
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
            )
            writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            return True
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        body = short_stream_body()
        if self.behaviour == "cut" and self.requests % 2 == 0:
            body = body[: len(body) // 2]
        step = 7  # odd-sized pieces: CRLF pairs and events fall across HTTP chunks and reads
        for start in range(0, len(body), step):
            piece = body[start : start + step]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.0005)
        if self.behaviour == "cut" and self.requests % 2 == 0:
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[tuple[ScriptedServer, str]]:
    scripted = ScriptedServer(request.param)
    with scripted as url:
        yield scripted, url


def _run(url: str, **changes: object) -> LoadResult:
    settings = LoadSettings(
        target=url, model="m", max_tokens=USAGE_CLAIMED, concurrency=2, duration_s=0.6, workers=1
    )
    return run_once(settings.model_copy(update=changes), started=0.0)


@pytest.mark.parametrize("server", ["short"], indirect=True)
def test_fewer_events_than_usage_is_flagged_and_usage_counts(
    server: tuple[ScriptedServer, str],
) -> None:
    scripted, url = server
    result = _run(url)
    assert result.requests_completed == scripted.requests > 0
    assert result.requests_failed == 0
    assert result.tokens.usage_vs_events_mismatch == result.requests_completed
    assert result.tokens.engine_vs_usage_mismatch == result.requests_completed
    assert result.output_tokens == USAGE_CLAIMED * result.requests_completed
    assert result.itl_s.n == (EVENTS_SENT - 1) * result.window.requests_counted
    problems = " | ".join(result.problems)
    assert f"usage {USAGE_CLAIMED} tokens, {EVENTS_SENT} content events" in problems
    assert f"predicted_n ({ENGINE_CLAIMED}) disagrees with usage ({USAGE_CLAIMED})" in problems
    # Every request used the prebuilt body: streamed, usage asked, ignore_eos, temperature 0.
    body = scripted.bodies[0]
    assert body["stream"] is True and body["ignore_eos"] is True and body["temperature"] == 0
    assert body["stream_options"] == {"include_usage": True} and body["max_tokens"] == USAGE_CLAIMED
    assert all(b == body for b in scripted.bodies)


@pytest.mark.parametrize("server", ["short"], indirect=True)
def test_completions_api_posts_a_prompt(server: tuple[ScriptedServer, str]) -> None:
    scripted, url = server
    result = _run(url + "/v1", api="completions", prompt="Once upon a time")
    assert result.requests_completed > 0
    assert (
        scripted.bodies[0]["prompt"] == "Once upon a time" and "messages" not in scripted.bodies[0]
    )


@pytest.mark.parametrize("server", ["http-500"], indirect=True)
def test_http_errors_become_failed_requests(server: tuple[ScriptedServer, str]) -> None:
    scripted, url = server
    result = _run(url)
    assert result.requests_completed == 0
    assert result.requests_failed == scripted.requests > 0
    assert not result.valid and "no request completed" in result.invalid_because
    assert any("HTTP 500" in p and "the engine fell over" in p for p in result.problems)


@pytest.mark.parametrize("server", ["cut"], indirect=True)
def test_cut_streams_fail_and_the_stream_reconnects(server: tuple[ScriptedServer, str]) -> None:
    scripted, url = server
    result = _run(url, concurrency=1)
    assert result.requests_failed > 0 and result.requests_completed > 0
    assert result.requests_failed + result.requests_completed == scripted.requests
    assert any("connection closed by the server" in p for p in result.problems)


@pytest.mark.parametrize("server", ["json"], indirect=True)
def test_a_reply_that_is_not_streamed_is_a_failure(server: tuple[ScriptedServer, str]) -> None:
    scripted, url = server
    result = _run(url)
    assert result.requests_completed == 0 and result.requests_failed == scripted.requests > 0
    assert any("without an event stream" in p for p in result.problems)
