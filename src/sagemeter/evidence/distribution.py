"""One way to summarise a distribution: count, extremes, median, tails, mean.

Every figure's spread (measure's `Spread`, the load generator's `Distribution`) is built from
`summarize`, so a p99 means the same thing in every file. Percentiles interpolate linearly between
closest ranks, as numpy's default does, in pure Python: summarising a load run needs no numpy.
The models live here (the bootstrap's `Interval` beside it), below the result schema that
re-exports them, so the statistics import nothing of sagemeter above them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from sagemeter.evidence.bootstrap import Interval, interval, samples_of


class Spread(BaseModel):
    """A distribution summarised: count, min, median, max, the tail percentiles, and a bootstrap
    95% interval of the median (None below two values)."""

    n: int
    min: float
    median: float
    max: float
    p90: float
    p99: float
    median_ci95: Interval | None = None


class Distribution(BaseModel):
    """A distribution in seconds (or tokens/s): count, median, p90, p99, min, max, mean."""

    n: int
    median: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None


@dataclass(frozen=True)
class Summary:
    """The one summary both shapes are built from."""

    n: int
    min: float
    median: float
    max: float
    p90: float
    p99: float
    mean: float


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) of ascending `ordered`, linear between closest ranks."""
    if not ordered:
        raise ValueError("percentile of nothing")
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Iterable[float]) -> Summary | None:
    """The summary of `values`, or None when there are none."""
    ordered = sorted(float(value) for value in values)
    if not ordered:
        return None
    return Summary(
        n=len(ordered),
        min=ordered[0],
        median=percentile(ordered, 50),
        max=ordered[-1],
        p90=percentile(ordered, 90),
        p99=percentile(ordered, 99),
        mean=math.fsum(ordered) / len(ordered),
    )


def spread(values: Sequence[float]) -> Spread | None:
    """`summarize` with a bootstrap interval of the median (the values taken as independent), or
    None when there are none."""
    summary = summarize(values)
    if summary is None:
        return None
    return Spread(
        n=summary.n,
        min=summary.min,
        median=summary.median,
        max=summary.max,
        p90=summary.p90,
        p99=summary.p99,
        median_ci95=interval(samples_of(values)),
    )


def distribution(values: Iterable[float]) -> Distribution:
    """`summarize` in the load generator's shape (n=0 and nothing else when there are none)."""
    summary = summarize(values)
    if summary is None:
        return Distribution(n=0)
    return Distribution(
        n=summary.n,
        median=summary.median,
        p90=summary.p90,
        p99=summary.p99,
        min=summary.min,
        max=summary.max,
        mean=summary.mean,
    )
