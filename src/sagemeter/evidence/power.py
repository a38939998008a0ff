"""How many questions a quality comparison needs, and what the current count can detect.

Paired proportions (McNemar design): only discordant questions, those exactly one checkpoint
gets right, carry information. With discordance rate ψ (share of such questions), a two-sided
test at level α and power 1 − β, the textbook count to detect a true drop δ is

    n = ⌈ k² · ψ / δ² ⌉,   k = z_{1−α/2} + z_{1−β}   (2.80 at α = 0.05, 80% power)

and, read backwards, the drop detectable with n questions is δ = k · √(ψ / n). The same n is
what a PASS needs when there is no drop at all: the upper bound of the drop's interval falls
below a margin m with probability 1 − β once m ≥ k · SE.

Refinements:

- Families. The verdict's interval uses SE = max(paired, cluster-robust) (see `paired`). With
  G families and independent questions the cluster-robust variance is about V · X / (G − 1),
  X ~ χ²(G − 1), so the interval is wider than the textbook one by √max(1, X / (G − 1)) and the
  textbook n would deliver less power than promised (about 70% instead of 80% with three
  families). k is therefore the k_G solving E[Φ(k / √max(1, X/(G − 1)) − z_{1−α/2})] = 1 − β:
  3.16 for G = 3 (n × 1.27), 3.02 for G = 10, → 2.80 as G grows; G = 1 keeps the textbook k.
- ψ is never below δ when sizing (a drop of δ flips at least a share δ of the questions), and
  never zero (see `planning_discordance`); n is rounded up.

These are large-sample figures: with fewer than about ten expected flips (n · ψ) they are
rough, and the exact test cannot reach p < 0.05 at all with fewer than six flips
(`binomial.min_flips_for_significance`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from sagemeter.evidence import lazy_scipy
from sagemeter.evidence.binomial import DEFAULT_LEVEL, z_two_sided

DEFAULT_POWER = 0.8
DEFAULT_MIN_DISCORDANCE = 0.05
"""Planning floor for ψ: with no flip observed the rate is unknown, not zero, and planning on
zero would claim any count suffices. 5% is half the article's own bf16-vs-4-bit rate (4 of 40);
pass another floor where a set is known to flip less."""

ROUGH_BELOW_FLIPS = 10.0
QUANTILES = 20_000


@lru_cache(maxsize=256)
def z_sum(
    alpha: float = 1 - DEFAULT_LEVEL, power: float = DEFAULT_POWER, families: int = 1
) -> float:
    """k: the standardised drop that the verdict's test finds with the given power."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"power lies strictly between 0 and 1, got {power}")
    if families < 1:
        raise ValueError(f"need at least one family, got {families}")
    z_alpha = z_two_sided(1 - alpha)
    textbook = z_alpha + float(lazy_scipy.stats().norm.ppf(power))
    if families == 1:
        return textbook
    df = families - 1
    # E over X ~ χ²(df) as a mean over its quantiles at evenly spaced probabilities.
    quantiles = lazy_scipy.stats().chi2.ppf((np.arange(QUANTILES) + 0.5) / QUANTILES, df)
    inflation = np.sqrt(np.maximum(1.0, quantiles / df))

    def achieved(k: float) -> float:
        return float(np.mean(lazy_scipy.stats().norm.cdf(k / inflation - z_alpha))) - power

    return float(lazy_scipy.optimize().brentq(achieved, textbook, 4 * textbook, xtol=1e-10))


def items_needed(
    discordance: float,
    drop: float,
    alpha: float = 1 - DEFAULT_LEVEL,
    power: float = DEFAULT_POWER,
    families: int = 1,
) -> int:
    """Questions needed to detect a true drop `drop` (a fraction, 0.02 = 2 points)."""
    if not 0.0 < drop <= 1.0:
        raise ValueError(f"a drop to size for lies in (0, 1], got {drop}")
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"a discordance rate lies in (0, 1], got {discordance}")
    psi = max(discordance, drop)
    return math.ceil(z_sum(alpha, power, families) ** 2 * psi / drop**2 - 1e-9)


def detectable_drop(
    n: int,
    discordance: float,
    alpha: float = 1 - DEFAULT_LEVEL,
    power: float = DEFAULT_POWER,
    families: int = 1,
) -> float:
    """The true drop (a fraction) that n questions detect with the given power."""
    if n <= 0:
        raise ValueError(f"need at least one question, got {n}")
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"a discordance rate lies in (0, 1], got {discordance}")
    return z_sum(alpha, power, families) * math.sqrt(discordance / n)


def planning_discordance(
    observed: float,
    noise: float | None = None,
    minimum: float = DEFAULT_MIN_DISCORDANCE,
) -> tuple[float, str]:
    """The ψ to plan with and where it came from: the largest of A vs B's rate ("observed"), the
    A vs A' rate ("noise floor": a re-run of A flips this much by itself) and the minimum."""
    if not 0.0 < minimum <= 1.0:
        raise ValueError(f"the minimum discordance lies in (0, 1], got {minimum}")
    candidates = [(observed, "observed"), (minimum, "stated minimum")]
    if noise is not None:
        candidates.insert(1, (noise, "noise floor"))
    return max(candidates, key=lambda pair: pair[0])


def is_rough(n: int, discordance: float) -> bool:
    """True when the expected number of flips is too small for the large-sample figures."""
    return n * discordance < ROUGH_BELOW_FLIPS
