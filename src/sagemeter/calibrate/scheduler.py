"""One timer for every stream: due writes are flushed together against absolute deadlines.

On this kind of virtual machine every wake-up of a sleeping process costs about 40 µs of CPU,
so a timer per token (32,000 a second at 128 streams of 4 ms tokens) would make the server the
thing measured. Pending writes wait in two heaps keyed by absolute deadline and a single timer
serves both:

- exact deadlines (a reply's first token and its end, which make TTFT and request time) are
  woken for on time;
- batched deadlines (the tokens in between) wait for the next point of a fixed grid of period
  `batch_gap_s`, so one wake-up writes many streams' tokens. The grid's period divides the
  token interval (see `grid_period`), so a stream's tokens all wait the same time after their
  deadlines: the gaps between them stay exactly one interval, and the inter-token median is not
  moved (a grid that drifted against the interval made lateness a sawtooth and read the 4 ms
  median as 4.2 ms).

Waking a sleeping process takes this kind of machine 0.1–0.3 ms, which alone would make every
first token that late (0.6% of a 50 ms TTFT). So the timer is set `SPIN_S` before an exact
deadline and the rest is waited out on the clock: at most 0.5 ms of one core per exact
deadline, and a batch's first tokens, all due together, share one wait.

Each wake-up writes everything due in either heap. Deadlines are computed from each request's
arrival, never from the previous write, so lateness never adds up; nothing is written early.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from typing import Protocol


class Job(Protocol):
    """A timed reply. `exact` says whether its pending deadline must be woken for on time."""

    exact: bool

    def fire(self, now: float) -> float | None:
        """Write what is due at `now`; return the next absolute deadline, or None when done."""
        ...


_Heap = list[tuple[float, int, Job]]

# The longest a batched token waits. Measured at 128 streams of 4 ms tokens on 2 cores: 1 ms
# gives about 950 wake-ups a second and 0.35 core; 0.5 ms gives 1,700 and 0.39–0.41 core. TTFT
# and reply ends are exact deadlines and do not wait.
DEFAULT_BATCH_GAP_S = 0.001

# How long before an exact deadline the timer goes off, to wait the rest out on the clock.
SPIN_S = 0.0005


def grid_period(batch_gap_s: float, interval_s: float) -> float:
    """The largest period not above `batch_gap_s` that divides the token interval exactly."""
    if batch_gap_s <= 0 or interval_s <= 0:
        return 0.0
    return interval_s / math.ceil(interval_s / batch_gap_s - 1e-9)


class Scheduler:
    """The deadline heaps and their single timer, on the monotonic clock (`time.monotonic`)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, batch_gap_s: float, spin_s: float = SPIN_S
    ) -> None:
        self._loop = loop
        self.batch_gap_s = batch_gap_s
        self.spin_s = spin_s
        self._grid_origin = time.monotonic()
        self._exact: _Heap = []
        self._batched: _Heap = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = math.inf
        self.wakeups = 0
        self.writes = 0
        self.late_sum_s = 0.0
        self.late_max_s = 0.0
        self.exact_writes = 0
        self.exact_late_sum_s = 0.0

    def add(self, deadline: float, job: Job) -> None:
        heap = self._exact if job.exact else self._batched
        heapq.heappush(heap, (deadline, next(self._order), job))
        self._arm()

    def __len__(self) -> int:
        return len(self._exact) + len(self._batched)

    def _arm(self) -> None:
        """Set the timer for the earliest exact deadline or batched wake-up, if that is sooner."""
        at = self._exact[0][0] - self.spin_s if self._exact else math.inf
        if self._batched:
            at = min(at, self._on_grid(self._batched[0][0]))
        if at >= self._armed_for:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = at
        # asyncio's clock is time.monotonic; _flush re-arms anything found not yet due.
        self._timer = self._loop.call_at(at, self._flush)

    def _on_grid(self, deadline: float) -> float:
        """The first grid point at or after `deadline` (the deadline itself without a grid)."""
        period = self.batch_gap_s
        if period <= 0:
            return deadline
        steps = math.ceil((deadline - self._grid_origin) / period - 1e-9)
        return self._grid_origin + steps * period

    def _flush(self) -> None:
        self._timer = None
        self._armed_for = math.inf
        self.wakeups += 1
        clock = time.monotonic
        exact, batched = self._exact, self._batched
        writes = exact_writes = 0
        late_sum = exact_late_sum = 0.0
        late_max = self.late_max_s
        push, pop = heapq.heappush, heapq.heappop
        if exact:
            due = exact[0][0]
            if 0.0 < due - clock() <= self.spin_s:
                while clock() < due:
                    pass  # the last fraction of a millisecond, waited on the clock
        while True:
            # The clock is read again for each write: the writes of one wake-up take time too.
            now = clock()
            if exact and exact[0][0] <= now:
                deadline, order, job = pop(exact)
                exact_writes += 1
                exact_late_sum += now - deadline
            elif batched and batched[0][0] <= now:
                deadline, order, job = pop(batched)
            else:
                break
            late = now - deadline
            writes += 1
            late_sum += late
            if late > late_max:
                late_max = late
            following = job.fire(now)
            if following is not None:
                push(exact if job.exact else batched, (following, order, job))
        self.writes += writes
        self.late_sum_s += late_sum
        self.late_max_s = late_max
        self.exact_writes += exact_writes
        self.exact_late_sum_s += exact_late_sum
        self._arm()
