"""Kept-alive connections to one HTTP server on the running event loop.

The measuring phases that send one request at a time (decode, quality, warm-up, the preflight,
token fidelity, what the server says about itself) use this; levels of many requests at once go
to worker processes (`batch.py`). Both speak through the same `Connection`, so a token event,
a failure and a retry mean the same thing everywhere.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl
import time
from dataclasses import dataclass
from typing import Any

from sagemeter.request_record import LiveRecord, RequestRecord
from sagemeter.transport.address import ServerAddress, host_port, parse_address
from sagemeter.transport.bad_json import BAD_JSON
from sagemeter.transport.http1 import Connection, connect_failure, open_connection
from sagemeter.transport.reopen import send_reopening
from sagemeter.transport.request import http_request
from sagemeter.transport.retry import NO_RETRIES, RetryPolicy, send_with_retries

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_STALL_S = 30.0
JSON_TIMEOUT_S = 30.0


class TransportError(Exception):
    """A call that got no HTTP answer at all (refused, reset, timed out); the message says why."""


@dataclass(frozen=True)
class JsonReply:
    """An HTTP answer to a JSON call: its status, its JSON (None if it was not JSON), its text."""

    status: int
    payload: Any
    text: str


class HttpClient:
    """Requests to one server, each on a kept-alive connection of a small pool.

    `timeout_s` bounds a whole request, `stall_s` the silence once tokens flow; failed requests
    are sent again by `retry` (`sent_again` counts those tries); a request whose kept-alive
    connection the server had closed goes out again at once on a new one (`reopened` counts
    those; it is not a retry). Records are frozen on this
    client's timeline (`origin`, a perf_counter instant, taken together with the wall clock
    `origin_wall`).
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        stall_s: float = DEFAULT_STALL_S,
        retry: RetryPolicy = NO_RETRIES,
    ) -> None:
        self.address: ServerAddress = parse_address(url)
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.stall_s = stall_s
        self.retry = retry
        self.sent_again = 0
        self.reopened = 0  # requests sent again at once on a new connection (reopen.py)
        self.origin = time.perf_counter()
        self.origin_wall = time.time()
        self._idle: list[Connection] = []
        self._tls = ssl.create_default_context() if self.address.tls else None
        self._numbers = itertools.count()

    async def aclose(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    def request_bytes(
        self, method: str, path: str, body: dict[str, Any] | None, *, stream: bool = False
    ) -> bytes:
        """The bytes of one request to `path` under the server's base path."""
        full = self.address.base_path + path
        return http_request(self.address, method, full, body, self.api_key, stream=stream)

    def _kept_alive(self) -> Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable:
                return connection
            connection.close()
        return None

    async def _connect(self) -> Connection:
        address = self.address
        loop = asyncio.get_running_loop()
        return await open_connection(loop, address.host, address.port, self._tls, address.host)

    async def _send_once(
        self, payload: bytes, record: LiveRecord, stream: bool, keep_text: bool, timeout_s: float
    ) -> LiveRecord:
        """One try, on a kept-alive connection when one is idle (reopened if the server had
        closed it, `reopen.py`), else on a new one."""
        connection = self._kept_alive()
        if connection is None:
            try:
                connection = await self._connect()
            except OSError as exc:
                record.send = record.end = time.perf_counter()
                reason = connect_failure(exc, tls=self._tls is not None)
                where = host_port(self.address.host, self.address.port)
                record.error = f"cannot connect to {where}: {reason}"
                return record
        stall = self.stall_s if stream else 0.0
        record, used = await send_reopening(
            connection,
            self._connect,
            payload,
            record,
            timeout_s,
            stream=stream,
            stall_s=stall,
            keep_text=keep_text,
        )
        if record.reopened_from is not None:
            self.reopened += 1
        if used is not None and used.reusable:
            self._idle.append(used)
        return record

    async def exchange(
        self,
        payload: bytes,
        *,
        stream: bool = True,
        max_tokens: int | None = None,
        keep_text: bool = False,
        retry: RetryPolicy | None = None,
        timeout_s: float | None = None,
    ) -> LiveRecord:
        """Send `payload` (again while it fails transiently) and return the last try's record."""
        number = next(self._numbers)
        limit = self.timeout_s if timeout_s is None else timeout_s
        record = await send_with_retries(
            lambda record: self._send_once(payload, record, stream, keep_text, limit),
            lambda: LiveRecord(0, number, max_tokens=max_tokens),
            self.retry if retry is None else retry,
        )
        self.sent_again += len(record.attempts_raw)
        return record

    def freeze(self, record: LiveRecord) -> RequestRecord:
        return record.freeze(self.origin)

    async def call_json(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        timeout_s: float = JSON_TIMEOUT_S,
        retry: RetryPolicy = NO_RETRIES,
    ) -> JsonReply:
        """One JSON call, sent again only under `retry` (a probe or a scrape is not: its failure
        is an answer); a call without any HTTP answer raises TransportError."""
        payload = self.request_bytes(method, path, body)
        record = await self.exchange(payload, stream=False, retry=retry, timeout_s=timeout_s)
        if record.status is None or record.body is None:
            raise TransportError(record.error or "no answer")
        raw = record.body
        text = raw.decode("utf-8", "replace")
        try:
            parsed = json.loads(raw) if raw else None
        except BAD_JSON:
            parsed = None
        return JsonReply(status=record.status, payload=parsed, text=text)
