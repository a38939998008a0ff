"""Bootstrap intervals for speed figures and their ratios.

A figure is computed from a few groups of raw repeats (the decode rate from short and long reply
times, a parallel level's throughput from its batches). Resampling each group with replacement,
independently, and recomputing the figure gives its sampling distribution; the 2.5th and 97.5th
percentiles are the interval. A ratio resamples both sides. The seed is fixed, so one file gives
one interval every time it is read. With five repeats the percentile bootstrap is somewhat too
narrow (it cannot see variation the repeats did not show); the A-B-A drift is the check on that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

RESAMPLES = 4000
LEVEL = 0.95
SEED = 20260925
MAX_ELEMENTS = 2_000_000  # resampled values held at once

# Takes one array per group, each shaped (resamples, n, columns); returns (resamples,) figures.
Statistic = Callable[[Sequence[np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class FigureSamples:
    """The raw repeats behind one figure and the rule that turns them into it.

    `groups` holds 2-D arrays (n repeats x columns); a repeat's columns are resampled together
    (a batch's tokens with its wall time).
    """

    groups: tuple[np.ndarray, ...]
    statistic: Statistic

    def figure(self) -> float:
        """The figure from the data as measured (no resampling)."""
        return float(self.statistic([group[np.newaxis, ...] for group in self.groups])[0])

    def resampled(self, rng: np.random.Generator, resamples: int) -> np.ndarray:
        """`resamples` figures, each from every group redrawn with replacement (in chunks, so a
        spread of ten thousand gaps does not need gigabytes)."""
        values = sum(group.size for group in self.groups)
        chunk = max(1, min(resamples, MAX_ELEMENTS // max(values, 1)))
        parts = []
        for start in range(0, resamples, chunk):
            size = min(chunk, resamples - start)
            draws = [
                group[rng.integers(0, group.shape[0], size=(size, group.shape[0]))]
                for group in self.groups
            ]
            parts.append(self.statistic(draws))
        return np.concatenate(parts)


class Interval(BaseModel):
    """A 95% interval; a bound of None means the data cannot bound it (a rate near infinity)."""

    low: float | None
    high: float | None
    level: float = 0.95
    method: str = Field("percentile bootstrap", description="how the interval was computed")
    resamples: int | None = None


def samples_of(values: Sequence[float], statistic: Statistic | None = None) -> FigureSamples:
    """One group of scalar repeats; the statistic defaults to their median."""
    column = np.asarray(values, dtype=float).reshape(-1, 1)
    return FigureSamples(groups=(column,), statistic=statistic or _median_of_first)


def _median_of_first(groups: Sequence[np.ndarray]) -> np.ndarray:
    return np.asarray(np.median(groups[0][..., 0], axis=1))


def _to_interval(estimates: np.ndarray, resamples: int, level: float) -> Interval:
    tail = (1.0 - level) / 2.0 * 100.0
    finite_share = float(np.mean(np.isfinite(estimates)))
    with np.errstate(invalid="ignore"):
        low, high = np.percentile(estimates, [tail, 100.0 - tail])
    return Interval(
        low=float(low) if np.isfinite(low) and finite_share > 0 else None,
        high=float(high) if np.isfinite(high) and finite_share > 0 else None,
        level=level,
        resamples=resamples,
    )


def interval(
    samples: FigureSamples | None,
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> Interval | None:
    """The figure's percentile-bootstrap interval; None when a group has fewer than two repeats."""
    if samples is None or any(group.shape[0] < 2 for group in samples.groups):
        return None
    rng = np.random.default_rng(seed)
    return _to_interval(samples.resampled(rng, resamples), resamples, level)


def ratio_interval(
    base: FigureSamples | None,
    other: FigureSamples | None,
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> Interval | None:
    """Interval of other / base, both sides resampled independently."""
    if base is None or other is None:
        return None
    if any(group.shape[0] < 2 for group in (*base.groups, *other.groups)):
        return None
    rng = np.random.default_rng(seed)
    denominator = base.resampled(rng, resamples)
    numerator = other.resampled(rng, resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(denominator > 0, numerator / denominator, np.inf)
    return _to_interval(ratios, resamples, level)
