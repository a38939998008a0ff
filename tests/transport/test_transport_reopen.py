"""Kept-alive connections as servers end them: closed unanswered, `Connection: close`,
`Keep-Alive: max=` and `timeout=`. Real loopback servers speaking raw HTTP/1.1 (mocked at the
wire), so what the client does with each is seen from the server's side too."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from sagemeter.transport.client import HttpClient
from sagemeter.transport.http1 import keep_alive_limits

BODY = b'{"data":[{"id":"m"}]}'


def _reply(extra: bytes = b"") -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    return head + b"content-length: %d\r\n" % len(BODY) + extra + b"\r\n" + BODY


class RawServer:
    """Counts connections and the requests answered; `policy(nth_on_connection)` says what to
    do with a request: an answer's bytes, or None to close the connection without answering."""

    def __init__(self, policy: Callable[[int], bytes | None]) -> None:
        self.policy = policy
        self.connections = 0
        self.answered = 0
        self.dropped = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = 0
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")  # GET requests: no body
                number += 1
                answer = self.policy(number)
                if answer is None:
                    self.dropped += 1
                    break
                writer.write(answer)
                await writer.drain()
                self.answered += 1
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        writer.close()


async def _with_server(
    policy: Callable[[int], bytes | None], job: Callable[[HttpClient], Awaitable[None]]
) -> RawServer:
    raw = RawServer(policy)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HttpClient(f"http://127.0.0.1:{port}", timeout_s=5.0)
    try:
        await job(client)
    finally:
        await client.aclose()
        server.close()
    return raw


async def _get(client: HttpClient, times: int) -> None:
    for _ in range(times):
        reply = await client.call_json("GET", "/v1/models")
        assert reply.status == 200 and reply.payload == {"data": [{"id": "m"}]}


def test_keep_alive_header_is_read() -> None:
    assert keep_alive_limits(b"timeout=5, max=99") == (99, 5.0)
    assert keep_alive_limits(b"max=0") == (0, None)
    assert keep_alive_limits(b"timeout=x, max=") == (None, None)


def test_a_reused_connection_closed_unanswered_is_reopened_not_failed() -> None:
    """The server answers only the first request of each connection, then closes on the next
    (what llama.cpp's server does to kept-alive connections): every reuse is sent again."""

    async def job(client: HttpClient) -> None:
        await _get(client, 5)
        assert client.reopened == 4 and client.sent_again == 0

    raw = asyncio.run(_with_server(lambda n: _reply() if n == 1 else None, job))
    assert (raw.connections, raw.answered, raw.dropped) == (5, 5, 4)


def test_a_fresh_connection_closed_unanswered_stays_a_failure() -> None:
    async def job(client: HttpClient) -> None:
        payload = client.request_bytes("GET", "/v1/models", None)
        record = await client.exchange(payload, stream=False)
        assert record.error == "connection closed by the server before any answer"
        assert record.reopened_from is None and client.reopened == 0

    raw = asyncio.run(_with_server(lambda n: None, job))
    assert (raw.connections, raw.answered) == (1, 0)


@pytest.mark.parametrize(
    ("header", "connections"),
    [
        (b"", 1),  # kept alive: one connection for all
        (b"connection: close\r\n", 4),  # honoured: never reused, nothing lost
        (b"keep-alive: timeout=5, max=%d\r\n", 2),  # max=1, then max=0: two per connection
        (b"keep-alive: timeout=5, max=0\r\n", 4),
    ],
)
def test_the_server_s_connection_headers_are_honoured(header: bytes, connections: int) -> None:
    async def job(client: HttpClient) -> None:
        await _get(client, 4)
        assert client.reopened == 0

    def policy(number: int) -> bytes:
        return _reply(header % (2 - number) if b"%d" in header else header)

    raw = asyncio.run(_with_server(policy, job))
    assert (raw.connections, raw.answered, raw.dropped) == (connections, 4, 0)


def test_a_connection_idle_past_keep_alive_timeout_is_not_reused() -> None:
    async def job(client: HttpClient) -> None:
        await _get(client, 2)  # back to back: reused
        await asyncio.sleep(0.45)  # past timeout=0.8 less its margin (0.4)
        await _get(client, 1)

    raw = asyncio.run(_with_server(lambda n: _reply(b"keep-alive: timeout=0.8\r\n"), job))
    assert (raw.connections, raw.answered) == (2, 3)
