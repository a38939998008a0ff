"""Distributions summarised the same way everywhere: count, median, tails, extremes, mean.

Pure Python (sorting is fast enough for a few hundred thousand gaps) so that summarising a run
needs no numpy import; percentiles interpolate linearly, as numpy's default does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from sagemeter.loadgen.result import Distribution
from sagemeter.transport.health import percentile

__all__ = ["distribution", "percentile"]


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
