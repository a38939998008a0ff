"""One distribution summary: measure's `Spread` and the load generator's `Distribution` are built
from the same `summarize`, whose percentiles are numpy's default (linear between closest ranks)."""

from __future__ import annotations

import numpy as np
import pytest

from sagemeter.evidence.distribution import distribution, percentile, spread, summarize


def test_summary_matches_numpy_and_both_shapes_carry_it() -> None:
    values = list(np.random.default_rng(7).lognormal(0.0, 1.0, size=1001))
    summary = summarize(values)
    assert summary is not None
    for q, got in ((50, summary.median), (90, summary.p90), (99, summary.p99)):
        assert got == pytest.approx(float(np.percentile(values, q)), rel=1e-12)
    assert (summary.min, summary.max) == (min(values), max(values))
    assert summary.mean == pytest.approx(float(np.mean(values)), rel=1e-12)

    shaped = spread(values)
    assert shaped is not None
    loadgen = distribution(values)
    for name in ("n", "min", "median", "max", "p90", "p99"):
        assert getattr(shaped, name) == getattr(summary, name) == getattr(loadgen, name)
    assert loadgen.mean == summary.mean
    assert shaped.median_ci95 is not None  # the bootstrap interval of the median
    assert shaped.median_ci95.low is not None and shaped.median_ci95.high is not None
    assert shaped.median_ci95.low <= summary.median <= shaped.median_ci95.high


def test_nothing_to_summarise() -> None:
    assert summarize([]) is None
    assert spread([]) is None
    assert distribution([]).model_dump() == {
        "n": 0,
        "median": None,
        "p90": None,
        "p99": None,
        "min": None,
        "max": None,
        "mean": None,
    }
    with pytest.raises(ValueError):
        percentile([], 50)


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0], 99) == 10.0
    assert percentile([0.0, 10.0], 90) == pytest.approx(9.0)
