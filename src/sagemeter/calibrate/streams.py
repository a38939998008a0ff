"""The two kinds of timed reply, as scheduler jobs: a token stream and a whole reply.

Each keeps the absolute instant of its first token and computes every later deadline from it,
so a late wake-up delays one write, never the ones after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Sink(Protocol):
    """The connection a reply is written to."""

    @property
    def closed(self) -> bool: ...

    def write(self, data: bytes) -> None: ...

    def finished(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class StreamFaults:
    """What one faulted stream does (calibrate/faults.py): chunks that differ per token (empty or
    reasoning text), a pause after some tokens, or a connection cut after some tokens."""

    chunk_for: Callable[[int], bytes] | None = None  # token index (0-based) → its bytes
    pause_after: int | None = None
    pause_s: float = 0.0
    drop_after: int | None = None


class Counters:
    """What the server has sent, for GET /stats.

    First tokens are counted apart with how late each was written: when a batch's first tokens
    all fall due together, one core writes them one after another, and that share of a
    client's TTFT is the server's.
    """

    __slots__ = ("first_token_late_sum_s", "first_tokens", "requests", "tokens")

    def __init__(self) -> None:
        self.requests = 0
        self.tokens = 0
        self.first_tokens = 0
        self.first_token_late_sum_s = 0.0

    def first_token(self, late_s: float) -> None:
        self.first_tokens += 1
        self.first_token_late_sum_s += late_s


class StreamReply:
    """Chunk k (1-based) at first_at + (k - 1) * itl; the end at first_at + tokens * itl.

    A pause after 0 tokens moves `first_at` itself: schedule the reply at its `first_at`."""

    __slots__ = (
        "counters",
        "end",
        "exact",
        "faults",
        "first",
        "first_at",
        "itl",
        "paused",
        "sent",
        "sink",
        "token",
        "tokens",
    )

    def __init__(
        self,
        sink: Sink,
        counters: Counters,
        first_at: float,
        itl: float,
        tokens: int,
        chunks: tuple[bytes, bytes, bytes],
        faults: StreamFaults | None = None,
    ) -> None:
        self.sink = sink
        self.counters = counters
        self.first_at = first_at
        self.itl = itl
        self.tokens = tokens
        self.first, self.token, self.end = chunks
        self.faults = faults
        self.paused = False
        if faults is not None and faults.pause_after == 0:  # the pause before the first token
            self.first_at += faults.pause_s
            self.paused = True
        self.sent = 0
        self.exact = True  # the first token: it makes TTFT

    def fire(self, now: float) -> float | None:
        if self.sink.closed:
            return None
        sent, tokens = self.sent, self.tokens
        if sent >= tokens:
            self.sink.write(self.end)
            self.counters.requests += 1
            self.sink.finished()
            return None
        count = 1
        if self.itl <= 0.0:
            count = tokens - sent
        elif now - self.first_at >= (sent + 1) * self.itl:
            # Late enough that later chunks are due too: they all go out now, in one write.
            count = min(tokens, int((now - self.first_at) / self.itl) + 1) - sent
        faults = self.faults
        if faults is not None:
            return self._fire_faulted(faults, sent, count, now)
        if sent == 0:
            self.sink.write(self.first + self.token * (count - 1))
            self.counters.first_token(now - self.first_at)
        else:
            self.sink.write(self.token if count == 1 else self.token * count)
        self.sent = sent = sent + count
        self.counters.tokens += count
        self.exact = sent >= tokens  # the end makes the request's duration
        return self.first_at + sent * self.itl

    def _fire_faulted(
        self, faults: StreamFaults, sent: int, count: int, now: float
    ) -> float | None:
        """The same writes with per-token chunks, a pause or a cut where the faults say."""
        for limit in (faults.drop_after, None if self.paused else faults.pause_after):
            if limit is not None and limit > sent:
                count = min(count, limit - sent)
        chunk_for = faults.chunk_for
        if chunk_for is not None:
            data = b"".join(chunk_for(index) for index in range(sent, sent + count))
        elif sent == 0:
            data = self.first + self.token * (count - 1)
        else:
            data = self.token * count
        self.sink.write(data)
        if sent == 0:
            self.counters.first_token(now - self.first_at)
        self.sent = sent = sent + count
        self.counters.tokens += count
        if faults.drop_after is not None and sent >= faults.drop_after:
            self.sink.close()  # mid-body: the client sees the stream cut
            return None
        if faults.pause_after is not None and not self.paused and sent >= faults.pause_after:
            self.paused = True
            self.first_at += faults.pause_s
        self.exact = sent >= self.tokens
        return self.first_at + sent * self.itl


class WholeReply:
    """A non-streamed reply: all of it at first_at + tokens * itl, when the stream would end."""

    __slots__ = ("counters", "data", "exact", "sink", "tokens")

    def __init__(self, sink: Sink, counters: Counters, tokens: int, data: bytes) -> None:
        self.sink = sink
        self.counters = counters
        self.tokens = tokens
        self.data = data
        self.exact = True

    def fire(self, now: float) -> float | None:
        if not self.sink.closed:
            self.sink.write(self.data)
            self.counters.requests += 1
            self.counters.tokens += self.tokens
            self.sink.finished()
        return None
