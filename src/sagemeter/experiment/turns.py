"""The interleaved order: every arm live at once, their requests sent in turn, A, B, A, B, ….

Each arm is measured by the ordinary measurement functions, concurrently; each arm's client is
wrapped in `TakingTurns`, which waits for the arm's turn before every request (a chat, a whole
parallel batch, the preflight, the server's self-description) and passes the turn on when it
ends. So no two arms' requests overlap in time, every figure is timed exactly as in `measure`,
and drift on the server side (thermal, neighbours, caches) lands on every arm alike. Arms
measure with the same settings, so they send the same sequence of requests and stay phase by
phase side by side. An arm that ends (or fails) leaves the rotation; the others carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sagemeter.request_record import RequestRecord
from sagemeter.transport.chat import BatchRun, ChatClient, ChatRequest


class Turns:
    """A fixed rotation of members; one member holds the turn at a time."""

    def __init__(self, members: list[str]) -> None:
        self._order = list(members)
        self._active = set(members)
        self._next = 0
        self._busy = False
        self._changed = asyncio.Condition()
        self.log: list[str] = []  # who sent, in order (what the tests and the journal read)

    def _due(self) -> str | None:
        if not self._active:
            return None
        for step in range(len(self._order)):
            member = self._order[(self._next + step) % len(self._order)]
            if member in self._active:
                return member
        return None

    def _advance(self, member: str) -> None:
        self._next = (self._order.index(member) + 1) % len(self._order)

    @contextlib.asynccontextmanager
    async def turn(self, member: str) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._busy and self._due() == member)
            self._busy = True
            self.log.append(member)
        try:
            yield
        finally:
            async with self._changed:
                self._busy = False
                self._advance(member)
                self._changed.notify_all()

    async def step_aside(self, member: str) -> None:
        """`member` waits for something else (the other arm, at a sequential look): the turn
        passes it by until it comes back, so the others are not held up by a member that sends
        nothing."""
        async with self._changed:
            self._active.discard(member)
            self._changed.notify_all()

    async def come_back(self, member: str) -> None:
        async with self._changed:
            self._active.add(member)
            self._changed.notify_all()

    async def leave(self, member: str) -> None:
        async with self._changed:
            self._active.discard(member)
            self._changed.notify_all()


class TakingTurns:
    """A ChatClient that sends each request only in its arm's turn."""

    def __init__(self, inner: ChatClient, turns: Turns, member: str) -> None:
        self.inner = inner
        self.turns = turns
        self.member = member

    async def chat(self, request: ChatRequest) -> RequestRecord:
        async with self.turns.turn(self.member):
            return await self.inner.chat(request)

    async def batch(self, requests: list[ChatRequest]) -> BatchRun:
        async with self.turns.turn(self.member):
            return await self.inner.batch(requests)

    async def preflight(self) -> None:
        async with self.turns.turn(self.member):
            await self.inner.preflight()

    async def describe(self) -> dict[str, Any]:
        async with self.turns.turn(self.member):
            return await self.inner.describe()

    async def aclose(self) -> None:
        await self.inner.aclose()
