"""Small summaries every measurement shares: spreads and medians, never a lone number."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sagemeter.measure.bootstrap import interval, samples_of
from sagemeter.results import ClientShare, Spread


def spread(values: Sequence[float]) -> Spread | None:
    """min / median / max / p90 / p99 of `values` and a bootstrap interval of the median (the
    values taken as independent), or None when there are none."""
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
        median_ci95=interval(samples_of(values)),
    )


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))


def client_share(calls: int, client_cpu_s: float, timed_wall_s: float) -> ClientShare | None:
    """The client's CPU against the wall time it timed; None when nothing was timed."""
    if calls <= 0 or timed_wall_s <= 0:
        return None
    return ClientShare(
        calls=calls,
        client_cpu_s=client_cpu_s,
        timed_wall_s=timed_wall_s,
        cpu_per_call_ms=client_cpu_s / calls * 1000.0,
        share=client_cpu_s / timed_wall_s,
    )
