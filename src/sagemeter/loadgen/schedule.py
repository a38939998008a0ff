"""Who sends what, when: Poisson arrival schedules and their split into shards and workers.

The open-loop schedule is computed up front from a seed (Python's own Mersenne Twister, the
same on every platform), so every shard of a run can compute the whole schedule and keep only
its share, and a re-run with the same seed sends at the same instants.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from sagemeter.errors import UserError
from sagemeter.transport.pool import split_count

__all__ = [
    "gamma_schedule",
    "parse_shard",
    "poisson_schedule",
    "shard_arrivals",
    "split_count",
    "trace_schedule",
]


def poisson_schedule(rate: float, duration_s: float, seed: int) -> list[float]:
    """Arrival instants (seconds after the start) of a Poisson process of `rate` per second."""
    if not rate > 0:
        raise UserError(f"--rate {rate!r}: give a positive number of requests per second")
    draw = random.Random(seed)
    arrivals: list[float] = []
    at = draw.expovariate(rate)
    while at < duration_s:
        arrivals.append(at)
        at += draw.expovariate(rate)
    return arrivals


def gamma_schedule(rate: float, duration_s: float, seed: int, burstiness: float) -> list[float]:
    """Arrivals whose gaps are gamma-distributed with mean 1/rate and shape `burstiness`: 1 is
    Poisson (the same instants as `poisson_schedule`), below 1 burstier (gaps' coefficient of
    variation 1/√burstiness), above 1 more regular."""
    if burstiness == 1.0:
        return poisson_schedule(rate, duration_s, seed)
    if not rate > 0:
        raise UserError(f"--rate {rate!r}: give a positive number of requests per second")
    draw = random.Random(seed)
    scale = 1.0 / (rate * burstiness)
    arrivals: list[float] = []
    at = draw.gammavariate(burstiness, scale)
    while at < duration_s:
        arrivals.append(at)
        at += draw.gammavariate(burstiness, scale)
    return arrivals


def trace_schedule(times_s: Sequence[float], speed: float, duration_s: float) -> list[float]:
    """A trace's send instants scaled by 1/`speed`, those within `duration_s` (inclusive)."""
    return [at / speed for at in times_s if at / speed <= duration_s]


def shard_arrivals(schedule: Sequence[float], shards: int, shard: int) -> list[tuple[int, float]]:
    """The arrivals of one shard: (index, instant) for every index with index % shards == shard."""
    return [(index, schedule[index]) for index in range(shard, len(schedule), shards)]


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` (0 ≤ i < n) → (i, n); the i-th of n shards, counted from 0."""
    left, sep, right = text.partition("/")
    try:
        index, count = int(left), int(right)
    except ValueError:
        index = count = -1
    if not sep or count < 1 or not 0 <= index < count:
        raise UserError(f"--shard {text!r}: give i/n with 0 ≤ i < n, e.g. 0/2 and 1/2")
    return index, count
