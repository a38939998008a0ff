"""One request's timing as measured, and the frozen form the parent and shard files use.

While a request runs, its instants are raw `time.perf_counter()` readings (the one clock every
timestamp in a worker uses). When the run is over each record is frozen to whole microseconds
since the run's common start instant, so records of all workers (and of shards on other hosts,
once shifted by their wall-clock starts) sit on one timeline and survive a JSON round trip
exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class LiveRecord:
    """A request in flight; `arrivals` gets one perf_counter reading per content event."""

    stream: int
    index: int
    scheduled: float | None = None
    send: float = 0.0
    end: float = 0.0
    arrivals: list[float] = field(default_factory=list)
    usage_tokens: int | None = None
    engine_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None

    def freeze(self, origin: float) -> RequestRecord:
        """Whole microseconds after `origin` (the run's start instant on this clock)."""
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
        )


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


@dataclass(slots=True)
class RequestRecord:
    """A finished request on the run's timeline (µs since the start instant).

    `stream` is the closed-loop stream (-1 for open-loop arrivals), `index` the request's number
    in its stream or its arrival's index in the schedule. `end_us` is when the last byte of the
    response arrived; `arrivals_us` holds one instant per content event.
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

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def events(self) -> int:
        return len(self.arrivals_us)

    @property
    def tokens(self) -> int:
        """Output tokens: the server's `usage` count, else the content events counted."""
        return self.usage_tokens if self.usage_tokens is not None else len(self.arrivals_us)

    def shifted(self, offset_us: int) -> RequestRecord:
        """The same request on a timeline whose origin is `offset_us` earlier."""
        return RequestRecord(
            stream=self.stream,
            index=self.index,
            scheduled_us=None if self.scheduled_us is None else self.scheduled_us + offset_us,
            send_us=self.send_us + offset_us,
            end_us=self.end_us + offset_us,
            arrivals_us=[t + offset_us for t in self.arrivals_us],
            usage_tokens=self.usage_tokens,
            engine_tokens=self.engine_tokens,
            finish_reason=self.finish_reason,
            done=self.done,
            error=self.error,
        )
