"""A minimal HTTP/1.1 keep-alive client connection: one request at a time, streamed or whole.

General-purpose clients spend tens of microseconds per chunk in layers we do not need; at
30,000 tokens a second that is the client, not the server, being measured. Here a connection is
an `asyncio.Protocol`, `httptools` (llhttp, in C) parses status, headers and chunked framing,
body bytes go straight to the byte-level SSE splitter, and each read is time-stamped once with
`time.perf_counter()` on arrival. The request bytes are built once by the caller.

A reply that is not streamed (a JSON body) is kept whole when the caller asks for it. Failures
never raise: they are written into the record with their reason, and the ones worth sending again
(HTTP 429/500/502/503/504, a connection closed before any answer) are marked `transient`.

A connection is reused only while the server allows it: not after a response that says
`Connection: close` (or is HTTP/1.0 without keep-alive), not beyond `Keep-Alive: max=N` more
requests, not once it has been idle for `Keep-Alive: timeout=` (less a margin). A server may
still close an idle connection silently; `reopen.py` sends such a request again.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from typing import cast

import httptools

from sagemeter.request_record import LiveRecord
from sagemeter.transport.events import stream_outcome, take_event
from sagemeter.transport.sse import NOT_A_TOKEN, SseSplitter
from sagemeter.transport.upstream import status_line

ERROR_BODY_LIMIT = 2048
BODY_LIMIT = 64 * 1024 * 1024  # a whole (non-streamed) reply larger than this is refused
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_AFTER_LIMIT_S = 300.0
# A connection idle this long before the server's announced `Keep-Alive: timeout=` is not reused:
# the server may close it while our request is on its way.
KEEP_ALIVE_MARGIN_S = 0.5


def keep_alive_limits(value: bytes) -> tuple[int | None, float | None]:
    """`max` (requests still allowed) and `timeout` (idle seconds) of a `Keep-Alive` header."""
    left: int | None = None
    idle: float | None = None
    for part in value.decode("latin-1").split(","):
        name, _, number = part.partition("=")
        name = name.strip().lower()
        try:
            if name == "max":
                left = max(0, int(number.strip()))
            elif name == "timeout":
                idle = max(0.0, float(number.strip()))
        except ValueError:
            continue
    return left, idle


def retry_after_seconds(value: bytes) -> float | None:
    """A `Retry-After` header in seconds (the HTTP-date form is read as well), or None."""
    text = value.decode("latin-1").strip()
    try:
        seconds = float(text)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            seconds = parsedate_to_datetime(text).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_LIMIT_S)


class Connection(asyncio.Protocol):
    """One kept-alive connection; `send` starts a request, its future yields the filled record."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._splitter = SseSplitter()
        self._record: LiveRecord | None = None
        self._future: asyncio.Future[LiveRecord] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._stall_s = 0.0
        self._now = 0.0
        self._status = 0
        self._streamed = False
        self._framed = False
        self._message_done = False
        self._answered = False
        self._expect_stream = True
        self._body = bytearray()
        self.closed = False
        self._keep = True  # False once the server said (or showed) it will not take another
        self._left: int | None = None  # requests the server still allows (`Keep-Alive: max=`)
        self._idle_s: float | None = None  # its idle limit (`Keep-Alive: timeout=`)
        self._idle_since = 0.0
        self.replies = 0  # responses that ended on this connection: reused when > 0

    @property
    def reusable(self) -> bool:
        """Whether another request may go on this connection, as far as the server has said."""
        if self.closed or not self._keep or (self._left is not None and self._left <= 0):
            return False
        if self._idle_s is not None:
            idle = time.perf_counter() - self._idle_since
            return idle < self._idle_s - min(KEEP_ALIVE_MARGIN_S, self._idle_s / 2)
        return True

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio.Transport's methods without subclassing it.
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._keep = False
        record = self._record
        if record is not None and not self._answered:
            # Nothing of the answer came back: the server (or a kept-alive connection it had
            # just closed) never processed it, so sending it again is safe.
            record.transient = True
            record.lost_unanswered = True
            reason = f"connection lost before any answer: {exc}" if exc else None
            self._finish(reason or "connection closed by the server before any answer")
            return
        if exc is None and self._status and not self._framed and not self._message_done:
            # No Content-Length and not chunked: the body ends where the connection does.
            self.on_message_complete()
            return
        reason = f"connection lost: {exc}" if exc else "connection closed by the server"
        if record is not None and self._status and self._status != 200:
            # An error status whose body was cut is still that status (a 503 is sent again
            # like any other 503); the body so far says what it could.
            reason = f"{self._status_failure(record)} (its body cut: {reason})"
        self._finish(reason)

    def data_received(self, data: bytes) -> None:
        self._now = time.perf_counter()
        self._answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(f"bad HTTP response: {exc}")
            self.close()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._status = 0
        self._streamed = False
        self._framed = False
        self._message_done = False
        self._splitter = SseSplitter()
        self._body.clear()

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding"):
            self._framed = True
        if name == b"connection" and value.strip().lower() == b"close":
            self._keep = False
        elif name == b"keep-alive":
            left, idle = keep_alive_limits(value)
            if left is not None:
                self._left = left
            if idle is not None:
                self._idle_s = idle
        elif name == b"content-type" and value.strip().lower().startswith(b"text/event-stream"):
            self._streamed = True
        elif name == b"retry-after" and self._record is not None:
            self._record.retry_after_s = retry_after_seconds(value)

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        if self._record is not None:
            self._record.status = self._status

    def on_body(self, body: bytes) -> None:
        record = self._record
        if record is None:
            return
        if self._status != 200 or not self._streamed:
            limit = BODY_LIMIT if self._status == 200 else ERROR_BODY_LIMIT
            if len(self._body) < limit:
                self._body += body[: limit - len(self._body)]
            return
        now = self._now
        for event in self._splitter.feed(body):
            kind = take_event(record, event, now)
            if kind != NOT_A_TOKEN and self._stall_timer is None and self._stall_s > 0:
                self._stall_timer = self._loop.call_later(self._stall_s, self._check_stall)

    def on_message_complete(self) -> None:
        self._message_done = True
        record = self._record
        if record is None:
            return
        if self._status == 200 and self._streamed:
            tail = self._splitter.flush()
            if tail:
                self.on_body(tail + b"\n\n")
        if not self._parser.should_keep_alive():
            self._keep = False
        self.replies += 1
        self._idle_since = time.perf_counter()
        self._finish(self._outcome(record))
        if not self.reusable:
            self.close()

    # ours

    def send(
        self,
        payload: bytes,
        record: LiveRecord,
        timeout_s: float,
        *,
        stream: bool = True,
        stall_s: float = 0.0,
        keep_text: bool = False,
    ) -> asyncio.Future[LiveRecord]:
        """Write the request; the future resolves (never raises) when the response has ended.

        `stream`: an event stream is expected (else a whole JSON body, kept in `record.body`).
        `stall_s` > 0: once tokens flow, a silence this long fails the request as stalled.
        """
        future: asyncio.Future[LiveRecord] = self._loop.create_future()
        self._record, self._future = record, future
        self._expect_stream, self._stall_s = stream, stall_s
        self._answered = False
        if self._left is not None:
            self._left -= 1
        if keep_text and record.pieces is None:
            record.pieces = []
        if self.closed or self._transport is None:
            record.send = time.perf_counter()
            record.transient = True
            record.lost_unanswered = True
            self._finish("connection closed before the request was sent")
            return future
        self._timer = self._loop.call_later(timeout_s, self._on_timeout, timeout_s)
        record.send = time.perf_counter()
        self._transport.write(payload)
        return future

    def close(self) -> None:
        self.closed = True
        self._keep = False
        if self._transport is not None:
            self._transport.close()

    def _outcome(self, record: LiveRecord) -> str | None:
        """The error of a response that has ended, or None when it is a good answer."""
        if self._status != 200:
            if not self._streamed:
                record.body = bytes(self._body)
            return self._status_failure(record)
        if self._expect_stream and not self._streamed:
            return "the server answered 200 without an event stream (no streaming?)"
        if not self._expect_stream:
            if self._streamed:
                return "the server answered an event stream to a request that was not streamed"
            record.body = bytes(self._body)
            return None
        return stream_outcome(record)

    def _status_failure(self, record: LiveRecord) -> str:
        """The error of an answer with a status other than 200: its line, sent again when the
        status is a transient one."""
        record.transient = self._status in TRANSIENT_STATUSES
        return status_line(self._status, bytes(self._body))

    def _on_timeout(self, timeout_s: float) -> None:
        self._timer = None
        self._finish(f"timeout: no complete response within {timeout_s:g} s")
        self.close()

    def _check_stall(self) -> None:
        """Fail the request if no byte arrived for `stall_s`; else look again when it could."""
        self._stall_timer = None
        record = self._record
        if record is None:
            return
        silent_since = max(self._now, record.send)
        due = silent_since + self._stall_s
        now = time.perf_counter()
        if now >= due:
            record.transient = True
            self._finish(f"stalled: no byte for {now - silent_since:.1f} s in mid-reply")
            self.close()
        else:
            self._stall_timer = self._loop.call_later(due - now, self._check_stall)

    def _finish(self, error: str | None) -> None:
        """Resolve the pending request once, stamping its end with the last read's instant."""
        record, future = self._record, self._future
        if record is None or future is None:
            return
        self._record = self._future = None
        for timer in (self._timer, self._stall_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._stall_timer = None
        record.end = self._now if self._now >= record.send else time.perf_counter()
        if error is not None and record.error is None:
            record.error = error
        if not future.done():
            future.set_result(record)


# OpenSSL's reasons when the bytes that came back are no TLS record (a plain-HTTP server's
# answer, or it closed on the ClientHello).
PLAIN_HTTP_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "UNEXPECTED_EOF_WHILE_READING", "HTTP_REQUEST"}
)


async def open_connection(
    loop: asyncio.AbstractEventLoop,
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    server_name: str | None,
) -> Connection:
    """Connect one Connection (TCP_NODELAY is asyncio's and uvloop's default)."""
    _, protocol = await loop.create_connection(
        lambda: Connection(loop),
        host,
        port,
        ssl=tls,
        server_hostname=server_name if tls is not None else None,
    )
    return protocol


def connect_failure(exc: OSError, tls: bool = False) -> str:
    """Why a connection could not be made, in words. A TLS failure's errno is OpenSSL's code,
    which `os.strerror` would misread (a certificate not trusted is errno 1, "Operation not
    permitted"), so TLS failures are named from their own message. With `tls`, a connection
    reset or closed before the handshake ended is a server that does not speak TLS, most often."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc) or type(exc).__name__
        if reason in PLAIN_HTTP_REASONS:  # what OpenSSL says when the answer is not TLS at all
            return f"TLS failed ({reason}): the server may not speak https; try http://"
        return f"TLS failed: {reason}"
    if tls and isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return "closed during the TLS handshake: the server may not speak https; try http://"
    if exc.errno:
        return os.strerror(exc.errno)
    return str(exc) or type(exc).__name__  # never an empty reason
