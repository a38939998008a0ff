"""A minimal HTTP/1.1 keep-alive client for one streamed request at a time per connection.

General-purpose clients spend tens of microseconds per chunk in layers we do not need; at
30,000 tokens a second that is the client, not the server, being measured. Here a connection is
an `asyncio.Protocol`, `httptools` (llhttp, in C) parses status, headers and chunked framing,
body bytes go straight to the byte-level SSE splitter, and each read is time-stamped once with
`time.perf_counter()` on arrival. The request bytes are built once per run by the caller.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import cast

import httptools

from sagemeter.loadgen.record import LiveRecord
from sagemeter.loadgen.sse import CONTENT_EVENT, SPECIAL_EVENT, SseSplitter, parse_special

_ERROR_BODY_LIMIT = 2048


class StreamConnection(asyncio.Protocol):
    """One kept-alive connection; `send` starts a request, its future yields the filled record."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._splitter = SseSplitter()
        self._record: LiveRecord | None = None
        self._future: asyncio.Future[LiveRecord] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._now = 0.0
        self._status = 0
        self._streamed = False
        self._error_body = bytearray()
        self.closed = False
        self.reusable = True

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio.Transport's methods without subclassing it.
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        reason = f"connection lost: {exc}" if exc else "connection closed by the server"
        self._finish(reason)

    def data_received(self, data: bytes) -> None:
        self._now = time.perf_counter()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(f"bad HTTP response: {exc}")
            self.close()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._status = 0
        self._streamed = False
        self._splitter = SseSplitter()
        self._error_body.clear()

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"connection" and value.strip().lower() == b"close":
            self.reusable = False
        elif name == b"content-type" and value.strip().lower().startswith(b"text/event-stream"):
            self._streamed = True

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        record = self._record
        if record is None:
            return
        if self._status != 200 or not self._streamed:
            if len(self._error_body) < _ERROR_BODY_LIMIT:
                self._error_body += body[:_ERROR_BODY_LIMIT]
            return
        now = self._now
        for event in self._splitter.feed(body):
            if CONTENT_EVENT.search(event) is not None:
                record.arrivals.append(now)
            if SPECIAL_EVENT.search(event) is not None:
                self._special(record, event)

    def on_message_complete(self) -> None:
        record = self._record
        if record is None:
            return
        if self._status == 200 and self._streamed:
            tail = self._splitter.flush()
            if tail:
                self.on_body(tail + b"\n\n")
        if not self._parser.should_keep_alive():
            self.reusable = False
        if self._status != 200:
            text = bytes(self._error_body).decode("utf-8", "replace").strip()
            self._finish(f"HTTP {self._status}: {text[:200]}")
        elif not self._streamed:
            self._finish("the server answered 200 without an event stream (no streaming?)")
        elif record.error is None and not record.done and not record.arrivals:
            self._finish("the stream ended without content or [DONE]")
        else:
            self._finish(None)
        if not self.reusable:
            self.close()

    # ours

    def send(
        self, payload: bytes, record: LiveRecord, timeout_s: float
    ) -> asyncio.Future[LiveRecord]:
        """Write the request; the future resolves (never raises) when the response has ended."""
        future: asyncio.Future[LiveRecord] = self._loop.create_future()
        self._record, self._future = record, future
        if self.closed or self._transport is None:
            record.send = time.perf_counter()
            self._finish("connection closed before the request was sent")
            return future
        self._timer = self._loop.call_later(timeout_s, self._on_timeout, timeout_s)
        record.send = time.perf_counter()
        self._transport.write(payload)
        return future

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self._transport is not None:
            self._transport.close()

    def _on_timeout(self, timeout_s: float) -> None:
        self._timer = None
        self._finish(f"no complete response within {timeout_s:g} s")
        self.close()

    def _special(self, record: LiveRecord, event: bytes) -> None:
        special = parse_special(event)
        if special.done:
            record.done = True
            return
        if special.usage_tokens is not None:
            record.usage_tokens = special.usage_tokens
        if special.engine_tokens is not None:
            record.engine_tokens = special.engine_tokens
        if special.finish_reason is not None:
            record.finish_reason = special.finish_reason
        if special.error is not None and record.error is None:
            record.error = special.error

    def _finish(self, error: str | None) -> None:
        """Resolve the pending request once, stamping its end with the last read's instant."""
        record, future = self._record, self._future
        if record is None or future is None:
            return
        self._record = self._future = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        record.end = self._now if self._now >= record.send else time.perf_counter()
        if error is not None and record.error is None:
            record.error = error
        if not future.done():
            future.set_result(record)


async def open_connection(
    loop: asyncio.AbstractEventLoop,
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    server_name: str | None,
) -> StreamConnection:
    """Connect one StreamConnection (TCP_NODELAY is asyncio's and uvloop's default)."""
    _, protocol = await loop.create_connection(
        lambda: StreamConnection(loop),
        host,
        port,
        ssl=tls,
        server_hostname=server_name if tls is not None else None,
    )
    return protocol
