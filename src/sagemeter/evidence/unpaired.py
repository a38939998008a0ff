"""A verdict from counts alone, for result files without per-question answers (the article's).

Without the answers the pairing is unknown, so the two runs are treated as independent samples:
the difference B − A gets Newcombe's hybrid score interval (built from the two Wilson intervals,
honest at small n and near 0% or 100%), significance comes from Fisher's exact test, and the
sample size is the two-proportion one, n = (z_{1-α/2} + z_power)² · 2·p̄(1 − p̄) / δ² per run. This
is conservative: pairing the same questions usually needs far fewer. The verdict rules are the
paired ones (`sagemeter.evidence.verdict.judge`).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, Field

from sagemeter.evidence import lazy_scipy
from sagemeter.evidence.binomial import wilson_interval, z_two_sided
from sagemeter.evidence.paired import POINTS
from sagemeter.evidence.power import DEFAULT_POWER
from sagemeter.evidence.verdict import DEFAULT_MARGIN_POINTS, Outcome

LEVEL = 0.95


class CountsVerdict(BaseModel):
    """The verdict when only `correct/total` is known for each run."""

    verdict: Outcome
    reason: str
    margin_points: float
    accuracy_a: float
    accuracy_b: float
    drop_points: float = Field(description="A − B: positive when the candidate answers worse")
    drop_low_points: float
    drop_high_points: float
    fisher_p: float
    items_needed: int = Field(description="questions per run to decide at the margin")
    detectable_drop_points: float = Field(description="true drop the current count detects")
    method: str = "unpaired (counts only: Newcombe interval, Fisher exact test)"


def newcombe_difference(
    correct_a: int, total_a: int, correct_b: int, total_b: int, level: float = LEVEL
) -> tuple[float, float, float]:
    """B − A as a share and its hybrid score interval (Newcombe 1998, method 10)."""
    share_a, share_b = correct_a / total_a, correct_b / total_b
    low_a, high_a = wilson_interval(correct_a, total_a, level)
    low_b, high_b = wilson_interval(correct_b, total_b, level)
    difference = share_b - share_a
    low = difference - math.sqrt((share_b - low_b) ** 2 + (high_a - share_a) ** 2)
    high = difference + math.sqrt((high_b - share_b) ** 2 + (share_a - low_a) ** 2)
    return difference, low, high


def decide_from_counts(
    correct_a: int,
    total_a: int,
    correct_b: int,
    total_b: int,
    margin_points: float = DEFAULT_MARGIN_POINTS,
    power: float = DEFAULT_POWER,
) -> CountsVerdict:
    """PASS / FAIL / INCONCLUSIVE from counts, with the unpaired questions-needed figure."""
    difference, low, high = newcombe_difference(correct_a, total_a, correct_b, total_b)
    drop, drop_low, drop_high = -difference * POINTS, -high * POINTS, -low * POINTS
    table = np.array([[correct_a, total_a - correct_a], [correct_b, total_b - correct_b]])
    fisher_p = float(lazy_scipy.stats().fisher_exact(table).pvalue)
    alpha = 1 - LEVEL
    span = f"{LEVEL:.0%} interval {drop_low + 0.0:+.1f} to {drop_high + 0.0:+.1f}"
    margin = f"the {margin_points:g}-point margin"
    verdict: Outcome
    if drop_high < margin_points:
        verdict, reason = "PASS", f"the drop is at most {drop_high:.1f} points ({span})"
    elif fisher_p < alpha and drop_low > 0 and drop > margin_points:
        verdict, reason = "FAIL", f"the candidate answers {drop:.1f} points worse ({span})"
    else:
        verdict = "INCONCLUSIVE"
        reason = f"the drop of {drop + 0.0:+.1f} points ({span}) is not shown below {margin}"
    pooled = (correct_a + correct_b) / (total_a + total_b)
    variance = max(2 * pooled * (1 - pooled), 2 * 0.05 * 0.95)  # a floor when both are perfect
    k = z_two_sided(LEVEL) + float(lazy_scipy.stats().norm.ppf(power))
    n = min(total_a, total_b)
    return CountsVerdict(
        verdict=verdict,
        reason=reason,
        margin_points=margin_points,
        accuracy_a=correct_a / total_a,
        accuracy_b=correct_b / total_b,
        drop_points=drop + 0.0,
        drop_low_points=drop_low,
        drop_high_points=drop_high,
        fisher_p=fisher_p,
        items_needed=math.ceil(k * k * variance / (margin_points / POINTS) ** 2),
        detectable_drop_points=POINTS * k * math.sqrt(variance / n),
    )
