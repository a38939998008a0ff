"""Speed to a precision: how wide a figure's interval is, and how its repeats ended.

`[stop] speed = 0.03` (`measure --speed-precision 0.03`) repeats a speed phase until the figure's
95% interval's half-width, (high − low) / 2, is within 3% of the figure, between a minimum of
repeats (the phase's usual count) and a maximum (`max_repeats`). A figure with no interval (too
few repeats, an unbounded side) counts as not precise yet.
"""

from __future__ import annotations

import math

from sagemeter.results import Interval, PrecisionStop


def relative_half_width(estimate: float | None, interval: Interval | None) -> float:
    """(high − low) / 2 / estimate; infinity when any of them is missing."""
    if estimate is None or estimate <= 0 or interval is None:
        return math.inf
    if interval.low is None or interval.high is None:
        return math.inf
    return (interval.high - interval.low) / 2 / estimate


def precision_stop(
    estimate: float | None,
    interval: Interval | None,
    target: float,
    repeats: int,
    min_repeats: int,
    max_repeats: int,
    figure: str,
) -> PrecisionStop:
    """The record of how `figure`'s repeats ended."""
    achieved = relative_half_width(estimate, interval)
    reached = achieved <= target
    shown = "no interval" if math.isinf(achieved) else f"±{achieved:.1%}"
    if reached:
        why = f"the {figure}'s 95% interval is {shown}, within ±{target:.1%}"
    elif repeats >= max_repeats:
        why = f"the maximum of {max_repeats} repeats was reached at {shown} (±{target:.1%} wanted)"
    else:  # the figure itself was refused at the end (its problems say why)
        why = f"the {figure} has no 95% interval"
    return PrecisionStop(
        target=target,
        achieved=None if math.isinf(achieved) else achieved,
        repeats=repeats,
        min_repeats=min_repeats,
        max_repeats=max_repeats,
        reached=reached,
        stopping_reason=f"stopped after {repeats} of at most {max_repeats} repeats because {why}",
    )
