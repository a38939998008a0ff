"""Every request the client sent, with its wall-clock time and phase: what CloudWatch's
per-minute counts are checked against.

SageMaker's endpoint metrics come in whole UTC minutes, and the phases of a measurement meet
inside minutes, so a phase's figures are only its own in the minutes that held none of another
phase's requests. `LoggingClient` wraps the endpoint's client and notes each request as it goes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sagemeter.request_record import RequestRecord
from sagemeter.transport.chat import BatchRun, ChatClient, ChatRequest


@dataclass(frozen=True)
class Sent:
    """One request: when it went out (epoch seconds), in which phase, how many tries it took,
    and, when answered, the client's time from the final try's send to its last byte."""

    phase: str
    at: float
    tries: int
    ok: bool
    latency_s: float | None


@dataclass
class SentLog:
    """The requests of one measurement, each under the phase that was running when it went."""

    phase: str = "preflight"
    entries: list[Sent] = field(default_factory=list)

    def add(self, at: float, records: list[RequestRecord]) -> None:
        for record in records:
            latency = (record.end_us - record.send_us) / 1e6 if record.ok else None
            self.entries.append(Sent(self.phase, at, 1 + record.retries, record.ok, latency))


class LoggingClient:
    """A ChatClient that notes every request it passes on in a `SentLog`."""

    def __init__(self, inner: ChatClient, log: SentLog) -> None:
        self.inner = inner
        self.log = log

    async def chat(self, request: ChatRequest) -> RequestRecord:
        at = time.time()
        record = await self.inner.chat(request)
        self.log.add(at, [record])
        return record

    async def batch(self, requests: list[ChatRequest]) -> BatchRun:
        at = time.time()
        run = await self.inner.batch(requests)
        self.log.add(at, run.records)
        return run

    async def preflight(self) -> None:
        at = time.time()
        await self.inner.preflight()
        self.log.entries.append(Sent(self.log.phase, at, 1, True, None))

    async def describe(self) -> dict[str, Any]:
        return await self.inner.describe()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
