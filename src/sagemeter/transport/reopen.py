"""Sending a request again at once when its kept-alive connection turns out to be closed.

Servers close idle kept-alive connections when they like; llama.cpp's own server closes them
between requests without saying so, and the client only learns when its next request meets the
closed socket (end of file or a reset before any byte of the answer). The server never saw that
request, so every HTTP client sends it again on a new connection. Here that happens once, at
once, and only for a connection that had already carried a reply: a fresh connection that closes
before answering is a real failure and stays one (it may then be retried under `retry.py`).

It is neither a retry nor a failure. The record keeps when the lost send left
(`reopened_from`); its `send` is the resend's, so TTFT and the request's time count from the
send that was answered, and the lost time is reported beside it (`RequestRecord.reopen_lost_s`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from sagemeter.request_record import LiveRecord
from sagemeter.transport.http1 import Connection, connect_failure


async def send_reopening(
    connection: Connection,
    connect: Callable[[], Awaitable[Connection]],
    payload: bytes,
    record: LiveRecord,
    timeout_s: float,
    *,
    stream: bool = True,
    stall_s: float = 0.0,
    keep_text: bool = False,
) -> tuple[LiveRecord, Connection | None]:
    """Send on `connection`; if it was reused and closed unanswered, once more on `connect()`.

    Returns the record and the connection it ended on (None when no new one could be made; the
    record then says why).
    """
    reused = connection.replies > 0
    record = await connection.send(
        payload, record, timeout_s, stream=stream, stall_s=stall_s, keep_text=keep_text
    )
    if not (reused and record.lost_unanswered):
        return record, connection
    connection.close()
    record.reopened_from = record.send
    record.error, record.transient, record.lost_unanswered = None, False, False
    record.status = None
    try:
        fresh = await connect()
    except OSError as exc:
        record.send = record.end = time.perf_counter()
        reason = connect_failure(exc)
        record.error = f"cannot connect again after the server closed a connection: {reason}"
        record.transient = True
        return record, None
    record = await fresh.send(
        payload, record, timeout_s, stream=stream, stall_s=stall_s, keep_text=keep_text
    )
    return record, fresh
