"""Numbers as the report prints them, each with its spread, and the choice of a row's winner.

"n/a" is printed wherever a file does not hold what a figure needs (the article's minimal files
hold no raw timings), never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from sagemeter.engine_registry import started_here
from sagemeter.results import Interval, MeasureResult, Share, Spread
from sagemeter.targets import parse_target

NA = "n/a"
MEDAL = "🥇"


def num(value: float | None, *, scale: float = 1.0, money: bool = False) -> str:
    """A figure as the article prints it: no trailing zeros, three significant digits below 1."""
    if value is None or not math.isfinite(value):
        return NA
    value *= scale
    if scale != 1.0:  # a converted unit (ms): four significant digits are plenty
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if money:
        return f"{value:.2f}"
    if abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def ratio_text(value: float) -> str:
    return f"{value:.2f}"


def interval_span(bounds: Interval, show: Callable[[float], str] = ratio_text) -> str:
    """`2.06–2.83`; a bound the data cannot set prints as `?` (low) or `∞` (high)."""
    low = "?" if bounds.low is None else show(bounds.low)
    high = "∞" if bounds.high is None else show(bounds.high)
    return f"{low}–{high}"


def count(value: int | None) -> str:
    return NA if value is None else f"{value:,}"


def spread_note(spread: Spread | None, *, scale: float = 1.0, tails: bool = False) -> str:
    """'min · median · max (n)', with p90 and p99 when `tails`; 'spread n/a' when unknown."""
    if spread is None:
        return f"spread {NA}"
    if spread.n == 1:
        return "n=1: no spread"
    tails = tails and spread.n >= 10  # p90 and p99 of a handful of values say nothing more
    parts = [f"min {num(spread.min, scale=scale)}", f"median {num(spread.median, scale=scale)}"]
    if tails:
        parts += [f"p90 {num(spread.p90, scale=scale)}", f"p99 {num(spread.p99, scale=scale)}"]
    parts.append(f"max {num(spread.max, scale=scale)}")
    return " · ".join(parts) + f" (n={spread.n})"


def ratio(value: float | None, base: float | None) -> str:
    if value is None or base is None or base == 0:
        return NA
    return f"{value / base:.2f}"


def pick_best(
    values: Sequence[float | None],
    *,
    higher: bool,
    noise: float | None = None,
    incomplete: Sequence[bool] = (),
) -> tuple[list[bool], str]:
    """Which value wins (at most one), and why none does when none is marked.

    A win smaller than `noise` (the A-A' drift, as a fraction) is no win: it is within what the
    same checkpoint measured twice varies by. A figure from a file that is `incomplete` (it
    missed a figure it asked for, so something went wrong in its run) is never crowned.
    """
    marks = [False] * len(values)
    known = [(index, value) for index, value in enumerate(values) if value is not None]
    if len(known) < 2:
        return marks, ""
    ordered = sorted(known, key=lambda pair: pair[1], reverse=higher)
    (best_index, best), (_, runner_up) = ordered[0], ordered[1]
    if best == runner_up:
        return marks, "tie"
    gap = abs(best - runner_up) / abs(runner_up) if runner_up else math.inf
    if noise is not None and gap <= noise:
        return marks, f"within the A–A′ drift ({noise:.1%})"
    if best_index < len(incomplete) and incomplete[best_index]:
        return marks, "the best figure's file is incomplete"
    marks[best_index] = True
    return marks, ""


def region_of(result: MeasureResult) -> str:
    """The cloud region from a NAME@REGION target; 'this machine' for the embedded engine."""
    if result.detail is None:
        return NA
    environment = result.detail.environment
    if started_here(environment.backend):
        return f"this machine ({environment.backend})"
    try:
        target = parse_target(environment.target)
    except Exception:  # an old or foreign target string: say what is known, not why
        return NA
    # A cloud endpoint's region (NAME@REGION), whatever its platform.
    region = getattr(target, "region", None)
    return region if isinstance(region, str) else NA


def hardware_of(result: MeasureResult) -> str:
    if result.detail is None:
        return NA
    environment = result.detail.environment
    if environment.host_cpu is None and environment.host_cores is None:
        return NA
    cores = f", {environment.host_cores} cores" if environment.host_cores else ""
    return f"{environment.host_cpu or 'unknown CPU'}{cores}"


def host_load_of(result: MeasureResult) -> str:
    """The host's load as the result recorded it: busy and why, or quiet (n/a: not recorded)."""
    host = result.detail.host if result.detail else None
    if host is None:
        return NA
    if host.busy:
        return "busy: " + "; ".join(host.busy_because)
    load = host.load_average_before
    if load is None:
        return "quiet"
    return f"quiet (load average {load:.1f} on {host.cores} cores)"


def short_sha(digest: str | None) -> str:
    return NA if not digest else digest[:12]


def truncate(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def quality_shares(result: MeasureResult) -> dict[str, Share]:
    """Correct/answered with its interval, per question family and as "Total" (the minimal files:
    the total only), as the result carries them."""
    out: dict[str, Share] = {}
    quality = result.detail.quality if result.detail else None
    if quality:
        out.update(quality.family_accuracy)
    if result.quality_interval is not None:
        out["Total"] = result.quality_interval
    return out


def money_per_hour(price: float) -> str:
    return "$" + f"{price:.4f}".rstrip("0").rstrip(".")
