"""One request's timing as measured: the single record type of every wire and every measurement.

While a request runs, its instants are raw `time.perf_counter()` readings (the one clock every
timestamp in a process uses). When it is over it is frozen to whole microseconds since an origin
instant (a load run's common start, or a measurement's first instant), so records of all worker
processes, and of shards on other hosts once shifted by their wall-clock starts, sit on one
timeline and survive a JSON round trip exactly.

Plain dataclasses, no pydantic: worker processes import this on their hot path. The result
models (`sagemeter.results`) validate and serialise these dataclasses as they are.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Literal

US = 1e-6


@dataclass(slots=True)
class Attempt:
    """A failed attempt that was sent again: when, what went wrong, how long we waited after."""

    send_us: int
    end_us: int
    error: str
    status: int | None = None
    waited_s: float = 0.0


@dataclass(slots=True)
class LiveRecord:
    """A request in flight; `arrivals` gets one perf_counter reading per token event."""

    stream: int
    index: int
    scheduled: float | None = None
    send: float = 0.0
    end: float = 0.0
    arrivals: list[float] = field(default_factory=list)
    usage_tokens: int | None = None
    engine_tokens: int | None = None
    engine_rate: float | None = None
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None
    reasoning: int = 0
    maybe_token_at: float | None = None
    status: int | None = None
    retry_after_s: float | None = None
    transient: bool = False
    # The connection closed before any byte of the answer (the request never reached work).
    lost_unanswered: bool = False
    # When a send on a reused kept-alive connection was lost that way and sent again at once on
    # a fresh one (`reopen.py`); `send` is then the resend's instant.
    reopened_from: float | None = None
    # When the client began connecting anew because the server had ended (or would not keep)
    # the stream's connection: the server's cost, not the client's lag.
    connect_from: float | None = None
    body: bytes | None = None
    pieces: list[str] | None = None
    max_tokens: int | None = None
    # The prompt as the server counted it (`usage.prompt_tokens`), the part its prefix cache
    # served, and the engine's own prompt rate (llama.cpp `timings.prompt_per_second`).
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    engine_prompt_rate: float | None = None
    # The `model` the reply named (checked against the first replies', never stored).
    model: str | None = None
    # Earlier tries sent again: (send, end, error, status, seconds waited after it).
    attempts_raw: list[tuple[float, float, str, int | None, float]] = field(default_factory=list)

    def settle(self) -> None:
        """Count the ambiguous closing event as a token when `usage` says one is missing."""
        if self.maybe_token_at is None:
            return
        if self.usage_tokens is not None and self.usage_tokens == len(self.arrivals) + 1:
            self.arrivals.append(self.maybe_token_at)
        self.maybe_token_at = None

    def freeze(self, origin: float) -> RequestRecord:
        """Whole microseconds after `origin` (an instant on this process's perf_counter)."""
        self.settle()
        return RequestRecord(
            stream=self.stream,
            index=self.index,
            scheduled_us=None if self.scheduled is None else _us(self.scheduled - origin),
            send_us=_us(self.send - origin),
            end_us=_us(self.end - origin),
            arrivals_us=[_us(t - origin) for t in self.arrivals],
            usage_tokens=self.usage_tokens,
            engine_tokens=self.engine_tokens,
            finish_reason=self.finish_reason,
            done=self.done,
            error=self.error,
            engine_rate=self.engine_rate,
            reasoning_events=self.reasoning,
            max_tokens=self.max_tokens,
            status=self.status,
            attempts=[
                Attempt(_us(send - origin), _us(end - origin), error, status, waited)
                for send, end, error, status, waited in self.attempts_raw
            ],
            text=None if self.pieces is None else "".join(self.pieces),
            reopened_from_us=_us_or_none(self.reopened_from, origin),
            connect_from_us=_us_or_none(self.connect_from, origin),
            prompt_tokens=self.prompt_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
            engine_prompt_rate=self.engine_prompt_rate,
        )


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def _us_or_none(instant: float | None, origin: float) -> int | None:
    return None if instant is None else _us(instant - origin)


@dataclass(slots=True)
class RequestRecord:
    """A finished request on a timeline (µs since its origin).

    `stream` is the closed-loop stream or batch slot (-1 for open-loop arrivals), `index` the
    request's number in its stream or its arrival's index in the schedule. `end_us` is when the
    last byte of the response arrived; `arrivals_us` holds one instant per token event (reasoning
    events included; `reasoning_events` says how many of them were reasoning). `attempts` are the
    earlier tries of the same request that failed and were sent again; the times above are the
    final attempt's. `reopened_from_us` is set when the request first went out on a reused
    kept-alive connection that the server had closed (nothing came back) and was sent again at
    once on a fresh one: `send_us` (and so TTFT) is the resend's, and `reopen_lost_s` is the time
    the lost send cost. That is neither a retry nor a failure. `prompt_tokens` is the server's
    own count of the prompt (`usage.prompt_tokens`, None when it gave none),
    `cached_prompt_tokens` the part its prefix cache served where it says so.
    """

    stream: int
    index: int
    scheduled_us: int | None
    send_us: int
    end_us: int
    arrivals_us: list[int]
    usage_tokens: int | None
    engine_tokens: int | None
    finish_reason: str | None
    done: bool
    error: str | None
    engine_rate: float | None = None
    reasoning_events: int = 0
    max_tokens: int | None = None
    status: int | None = None
    attempts: list[Attempt] = field(default_factory=list)
    text: str | None = None
    reopened_from_us: int | None = None
    connect_from_us: int | None = None
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    engine_prompt_rate: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def events(self) -> int:
        return len(self.arrivals_us)

    @property
    def tokens(self) -> int:
        """Output tokens: the server's `usage` count, else the token events counted."""
        return self.usage_tokens if self.usage_tokens is not None else len(self.arrivals_us)

    @property
    def tokens_source(self) -> Literal["usage", "events"]:
        return "usage" if self.usage_tokens is not None else "events"

    @property
    def retries(self) -> int:
        return len(self.attempts)

    @property
    def reopened(self) -> bool:
        return self.reopened_from_us is not None

    @property
    def first_send_us(self) -> int:
        """When the client set out to send: before a lost send, or before a connect that the
        server made necessary by ending the stream's connection (else `send_us`)."""
        return min(
            t for t in (self.send_us, self.reopened_from_us, self.connect_from_us) if t is not None
        )

    @property
    def reopen_lost_s(self) -> float:
        """Seconds from the lost send on a closed kept-alive connection to the resend (or 0)."""
        return 0.0 if self.reopened_from_us is None else (self.send_us - self.reopened_from_us) * US

    @property
    def total_s(self) -> float:
        """Send to the last byte of the response."""
        return (self.end_us - self.send_us) * US

    @property
    def first_token_s(self) -> float | None:
        """Send to the first token event (TTFT), None when no token event arrived."""
        return (self.arrivals_us[0] - self.send_us) * US if self.arrivals_us else None

    @property
    def honoured_length(self) -> bool:
        """True when the server produced every token asked for (ignore_eos was honoured)."""
        return self.max_tokens is not None and self.ok and self.tokens >= self.max_tokens

    def gaps_s(self) -> list[float]:
        """Every gap between consecutive token events (the inter-token latencies)."""
        return [(b - a) * US for a, b in itertools.pairwise(self.arrivals_us)]

    def shifted(self, offset_us: int) -> RequestRecord:
        """The same request on a timeline whose origin is `offset_us` earlier."""
        return dataclasses.replace(
            self,
            scheduled_us=None if self.scheduled_us is None else self.scheduled_us + offset_us,
            send_us=self.send_us + offset_us,
            end_us=self.end_us + offset_us,
            reopened_from_us=(
                None if self.reopened_from_us is None else self.reopened_from_us + offset_us
            ),
            connect_from_us=(
                None if self.connect_from_us is None else self.connect_from_us + offset_us
            ),
            arrivals_us=[t + offset_us for t in self.arrivals_us],
            attempts=[
                dataclasses.replace(a, send_us=a.send_us + offset_us, end_us=a.end_us + offset_us)
                for a in self.attempts
            ],
        )
