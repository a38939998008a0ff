"""Intervals and exact tests for counts: the building blocks every quality figure stands on.

Wilson for the interval a report prints (honest at 0/n and n/n, close to nominal coverage),
Clopper–Pearson where a guaranteed-coverage bound is wanted, and the exact McNemar test, which
looks only at the items where the two checkpoints disagree.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from sagemeter.evidence import lazy_scipy

DEFAULT_LEVEL = 0.95


def z_two_sided(level: float = DEFAULT_LEVEL) -> float:
    """The standard-normal point leaving (1 − level)/2 in each tail (1.96 for 95%)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"a confidence level lies strictly between 0 and 1, got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2)  # the standard library's: no scipy import


def _check_counts(successes: int, total: int) -> None:
    if total < 0 or successes < 0 or successes > total:
        raise ValueError(f"need 0 <= successes <= total, got {successes}/{total}")


def wilson_interval(
    successes: int, total: int, level: float = DEFAULT_LEVEL
) -> tuple[float, float]:
    """Wilson score interval for successes/total, as fractions in [0, 1].

    Chosen over the normal (Wald) interval because it neither collapses to a point at 0/n or
    n/n nor spills outside [0, 1]. No trials tell nothing: (0, 1).
    """
    _check_counts(successes, total)
    if total == 0:
        return 0.0, 1.0
    z = z_two_sided(level)
    share = successes / total
    z2 = z * z
    centre = (share + z2 / (2 * total)) / (1 + z2 / total)
    half = z * math.sqrt(share * (1 - share) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def clopper_pearson_interval(
    successes: int, total: int, level: float = DEFAULT_LEVEL
) -> tuple[float, float]:
    """Clopper–Pearson ("exact") interval: coverage at least `level` for every true rate.

    Wider than Wilson; use it where a bound must not be optimistic, e.g. "at most x% of items
    flip". No trials tell nothing: (0, 1).
    """
    _check_counts(successes, total)
    if total == 0:
        return 0.0, 1.0
    tail = (1 - level) / 2
    low = (
        0.0
        if successes == 0
        else float(lazy_scipy.stats().beta.ppf(tail, successes, total - successes + 1))
    )
    high = (
        1.0
        if successes == total
        else float(lazy_scipy.stats().beta.ppf(1 - tail, successes + 1, total - successes))
    )
    return low, high


def mcnemar_exact_p(losses: int, gains: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs as a fair coin under no difference.

    Only items where exactly one checkpoint is right carry information about which is better;
    under "no difference" each such item is a loss or a gain with probability 1/2, so the
    p-value is 2 · P(X ≤ min(losses, gains)) for X ~ Binomial(losses + gains, 1/2), capped
    at 1. No discordant pairs: p = 1.
    """
    if losses < 0 or gains < 0:
        raise ValueError(f"need non-negative counts, got {losses} losses and {gains} gains")
    flips = losses + gains
    if flips == 0:
        return 1.0
    # Exact in integers: P(X <= k) = sum of C(flips, i) over i <= k, divided by 2**flips.
    tail = sum(math.comb(flips, i) for i in range(min(losses, gains) + 1))
    return min(1.0, 2 * tail / (1 << flips))


def min_flips_for_significance(alpha: float = 1 - DEFAULT_LEVEL) -> int:
    """The fewest discordant pairs (all one way) at which the exact McNemar p can fall below
    alpha: 6 at 0.05. Fewer flips than this can never show a difference, however lopsided."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha lies strictly between 0 and 1, got {alpha}")
    flips = 1
    while 2.0 * 0.5**flips >= alpha:
        flips += 1
    return flips


def p_text(p: float) -> str:
    """A p-value as printed: "p = 0.031", or "p < 0.001"."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
