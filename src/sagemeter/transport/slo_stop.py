"""A probe that already fails stops early: each finished request is judged against the SLO.

An operating-point probe (loadgen/operating_point.py) only needs to know whether a percentile of
TTFT and TPOT stays within the SLO. Once more requests have missed it than that percentile allows
of the whole probe, no later request can make it pass, so the workers stop sending (what is in
flight still finishes). The misses are counted across worker processes in the `DoneCount` file.
Plain dataclasses and no imports beyond the standard library: workers load this on their hot path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SloStop:
    """Stop the run once more than `after_misses` requests missed TTFT or TPOT (None: none set).

    A failed request is a miss too: it met nothing."""

    ttft_s: float | None
    tpot_s: float | None
    after_misses: int


def misses(
    stop: SloStop, failed: bool, send: float, arrivals: Sequence[float], tokens: int | None
) -> bool:
    """Whether one finished request missed the SLO, by load's definitions (metrics.py): TTFT is
    the first content event − send, TPOT (last − first) / (tokens − 1) for 2 tokens or more."""
    if failed or not arrivals:
        return True
    if stop.ttft_s is not None and arrivals[0] - send > stop.ttft_s:
        return True
    count = tokens if tokens is not None else len(arrivals)
    if stop.tpot_s is not None and count >= 2:
        return (arrivals[-1] - arrivals[0]) / (count - 1) > stop.tpot_s
    return False
