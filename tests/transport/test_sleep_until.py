"""`sleep_until`: a scheduled send never goes out before its instant, on uvloop as on asyncio.

uvloop's timers count whole milliseconds from a loop clock read once a turn, so a single
`asyncio.sleep` can wake up to about a millisecond early; a session's think time and an open
loop's arrival instants are promises about when a request leaves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
import uvloop

from sagemeter.transport.clock import sleep_until

# Waits of a whole number of milliseconds and a fraction, where rounding to milliseconds bites.
WAITS_S = [(whole + fraction) / 1000 for whole in range(1, 5) for fraction in (0.1, 0.5, 0.9)]
ROUNDS = 8


async def _earliest(wait: Callable[[float], Awaitable[None]]) -> float:
    """The most a wait returned before its instant (negative: it never did) over every round."""
    worst = float("-inf")
    for _ in range(ROUNDS):
        for seconds in WAITS_S:
            await asyncio.sleep(0.0003)  # start each wait at a different point of a millisecond
            due = time.perf_counter() + seconds
            await wait(due)
            worst = max(worst, due - time.perf_counter())
    return worst


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop])
def test_sleep_until_never_returns_before_its_instant(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    loop = loop_factory()
    try:
        early = loop.run_until_complete(_earliest(sleep_until))
    finally:
        loop.close()
    assert early <= 0.0, f"returned {early * 1000:.3f} ms before its instant"


def test_one_sleep_on_uvloop_can_wake_early_which_is_why() -> None:
    """The reason for the function: one plain sleep for the time left wakes early on uvloop."""

    async def plain(due: float) -> None:
        await asyncio.sleep(due - time.perf_counter())

    loop = uvloop.new_event_loop()
    try:
        early = loop.run_until_complete(_earliest(plain))
    finally:
        loop.close()
    assert early > 0.0
