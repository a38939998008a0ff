"""One clock per worker, aligned across workers and hosts through a wall-clock start instant.

Every timestamp is `time.perf_counter()` (monotonic, sub-microsecond). The parent picks a start
instant on the wall clock; each worker converts it to its own perf_counter once, so all workers
start together and their records share one timeline. Across hosts the wall clocks must agree
(NTP); their skew goes straight into a merged timeline.
"""

from __future__ import annotations

import asyncio
import time
from array import array


def perf_counter_at(wall_instant: float, samples: int = 7) -> float:
    """perf_counter's reading at `wall_instant` (time.time() seconds), from the tightest pair."""
    best_width = float("inf")
    best_mid = best_wall = 0.0
    for _ in range(samples):
        before = time.perf_counter()
        wall = time.time()
        after = time.perf_counter()
        if after - before < best_width:
            best_width, best_mid, best_wall = after - before, (before + after) / 2, wall
    return best_mid + (wall_instant - best_wall)


async def sleep_until(due: float) -> None:
    """Return at `due` (a perf_counter reading) or after it, never before.

    uvloop's timers count whole milliseconds from a loop clock read at the start of each turn, so
    one `asyncio.sleep(due - now)` can wake up to about a millisecond early (seen: a session's
    next turn sent 1.05 ms before its think time was up). A scheduled send must not go out before
    its instant, so the rest is slept again; what is left then is below a millisecond."""
    while (left := due - time.perf_counter()) > 0:
        await asyncio.sleep(left)


class LagSampler:
    """Asks the loop to wake it every `interval_s` and records how late each wake-up was.

    A loop busy with the client's own work answers late; its lag delays every timestamp taken
    on it. The figure includes the loop's timer resolution (uvloop: 1 ms).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, interval_s: float = 0.01) -> None:
        self._loop = loop
        self._interval = interval_s
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self.samples = array("d")

    def start(self) -> None:
        self._due = time.perf_counter() + self._interval
        self._handle = self._loop.call_later(self._interval, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        now = time.perf_counter()
        self.samples.append(max(0.0, now - self._due))
        self._due = now + self._interval
        self._handle = self._loop.call_later(self._interval, self._tick)
