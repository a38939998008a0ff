"""Small summaries every measurement shares: spreads and medians, never a lone number."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sagemeter.results import Spread


def spread(values: Sequence[float]) -> Spread | None:
    """min / median / max / p90 / p99 of `values`, or None when there are none."""
    if not values:
        return None
    array = np.asarray(values, dtype=float)
    return Spread(
        n=int(array.size),
        min=float(array.min()),
        median=float(np.median(array)),
        max=float(array.max()),
        p90=float(np.percentile(array, 90)),
        p99=float(np.percentile(array, 99)),
    )


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))
