"""Distributions summarised the same way everywhere: count, median, tails, extremes, mean.

Pure Python (sorting is fast enough for a few hundred thousand gaps) so that summarising a run
needs no numpy import; percentiles interpolate linearly, as numpy's default does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from sagemeter.loadgen.result import Distribution


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) of ascending `ordered`, linear between closest ranks."""
    if not ordered:
        raise ValueError("percentile of nothing")
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values: Iterable[float]) -> Distribution:
    ordered = sorted(values)
    if not ordered:
        return Distribution(n=0)
    return Distribution(
        n=len(ordered),
        median=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p99=percentile(ordered, 99),
        min=ordered[0],
        max=ordered[-1],
        mean=math.fsum(ordered) / len(ordered),
    )
