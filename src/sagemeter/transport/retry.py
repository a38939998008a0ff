"""Sending a request again after a transient failure, and keeping every try on its record.

Transient: HTTP 429, 500, 502, 503, 504, a connection closed before any answer, a reply that
stalled mid-stream. Anything else (400, 401, 404, a malformed stream, a timeout) is not sent
again: it would fail the same way, or it already cost the full time limit. The wait honours the
server's `Retry-After`; otherwise it doubles from `base_s`, with jitter so that a batch of
requests failing together does not come back together.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sagemeter.request_record import LiveRecord

DEFAULT_RETRIES = 3


@dataclass(frozen=True)
class RetryPolicy:
    """At most `retries` more tries per request; waits double from `base_s` up to `max_s`."""

    retries: int = DEFAULT_RETRIES
    base_s: float = 0.5
    max_s: float = 30.0

    def wait_s(self, tries_so_far: int, retry_after_s: float | None) -> float:
        """How long to wait before try number `tries_so_far + 1`."""
        if retry_after_s is not None:
            return retry_after_s
        backoff: float = min(self.max_s, self.base_s * 2.0 ** (tries_so_far - 1))
        return backoff * random.uniform(0.75, 1.0)


NO_RETRIES = RetryPolicy(retries=0)


async def send_with_retries(
    send: Callable[[LiveRecord], Awaitable[LiveRecord]],
    make_record: Callable[[], LiveRecord],
    policy: RetryPolicy,
) -> LiveRecord:
    """Send, and send again while the failure is transient and tries are left.

    `send` fills the record it is given; the record returned is the last try's, carrying the
    earlier ones in `attempts` (raw perf_counter instants; `freeze` makes them microseconds).
    """
    earlier: list[tuple[float, float, str, int | None, float]] = []
    while True:
        record = await send(make_record())
        if record.error is None or not record.transient or len(earlier) >= policy.retries:
            record.attempts_raw = earlier
            return record
        wait = policy.wait_s(len(earlier) + 1, record.retry_after_s)
        earlier.append((record.send, record.end, record.error, record.status, wait))
        await asyncio.sleep(wait)
