"""Speed to a precision: how wide a figure's interval is, and how its repeats ended.

`[stop] speed = 0.03` (`measure --speed-precision 0.03`) repeats a speed phase until the figure's
95% interval's half-width, (high − low) / 2, is within 3% of the figure, between a minimum of
repeats (the phase's usual count) and a maximum (`max_repeats`). A figure with no interval (too
few repeats, an unbounded side) counts as not precise yet. Nor is an interval narrower than the
clock can tell: requests are timed in whole microseconds, so batches alike to the microsecond
have an interval of width 0 that says nothing of their spread; the half-width counted is never
below one clock tick over the span the figure is timed on.
"""

from __future__ import annotations

import math

from sagemeter.results import Interval, PrecisionStop

CLOCK_TICK_S = 1e-6
"""The step of the request records' times (whole microseconds)."""


def clock_resolution(span_s: float | None) -> float:
    """One clock tick over `span_s`, the time a figure is timed on: the narrowest relative
    half-width its interval can honestly claim (0 when the span is unknown)."""
    return CLOCK_TICK_S / span_s if span_s is not None and span_s > 0 else 0.0


def counted_half_width(
    estimate: float | None, interval: Interval | None, span_s: float | None
) -> float:
    """The relative half-width a precision target is held to: the interval's, never below
    `clock_resolution(span_s)`."""
    return max(relative_half_width(estimate, interval), clock_resolution(span_s))


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
    span_s: float | None = None,
) -> PrecisionStop:
    """The record of how `figure`'s repeats ended; `span_s` is the time the figure is timed
    on (`counted_half_width`)."""
    achieved = counted_half_width(estimate, interval, span_s)
    reached = achieved <= target
    if math.isinf(achieved):
        shown = "no interval"
    elif span_s is not None and achieved == clock_resolution(span_s):
        shown = f"±{achieved:.4%}, one clock tick over {span_s:.6f} s"
    else:
        shown = f"±{achieved:.1%}"
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
