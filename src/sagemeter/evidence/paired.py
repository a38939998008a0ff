"""The paired difference in accuracy, B − A, with an interval that respects question families.

Estimator. Per question i, d_i = b_i − a_i ∈ {−1, 0, +1} (right = 1). The point estimate is the
mean, (gains − losses) / n. Its standard error is the larger of two:

- the plain paired SE, in the adjusted-Wald form of Bonett & Price (2012): one pseudo-loss and
  one pseudo-gain added, p̃ₗ = (losses + 1)/(n + 2), p̃g = (gains + 1)/(n + 2),
  SE² = (p̃ₗ + p̃g − (p̃g − p̃ₗ)²) / (n + 2). Unlike the textbook form it does not collapse to
  zero when no question flips (0 flips in 40 questions does not prove a drop below 2 points);
  the interval is centred on p̃g − p̃ₗ;
- the cluster-robust SE over families (CR1, Liang–Zeger): with G families and
  S_g = Σ_{i∈g} (d_i − d̄), SE² = G/(G − 1) · Σ_g S_g² / n². It widens the interval when a
  checkpoint's losses concentrate in some families (a 4-bit export that breaks arithmetic but
  not recall), which the item-level SE would miss.

Why the larger: with the few families a question set has (the article's has three) the
cluster-robust variance has only G − 1 degrees of freedom and is often far too small; in the
article's data it is exactly zero, because losses and gains cancel within the one family where
anything flips. The plain SE is a floor that stays valid when questions are independent, and
the cluster-robust one takes over when the data show clustering; taking the larger is the
rule of thumb of Angrist & Pischke (2009, §8.2). The price is some conservatism when questions
really are independent: the interval is a little wider than needed, so a real loss is found a
little less often than the textbook sample size promises, which `power` allows for.
The interval uses the normal point z, clipped to [−100, +100] points.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

from sagemeter.evidence.binomial import DEFAULT_LEVEL, z_two_sided

POINTS = 100.0


class PairedDifference(BaseModel):
    """B − A in percentage points, with the interval and the standard errors behind it."""

    n: int
    losses: int = Field(description="questions A got right and B got wrong")
    gains: int = Field(description="questions B got right and A got wrong")
    estimate_points: float = Field(description="(gains − losses) / n, in points")
    low_points: float
    high_points: float
    level: float = DEFAULT_LEVEL
    se_points: float = Field(description="the standard error used: the larger of the two below")
    se_paired_points: float = Field(description="adjusted-Wald paired SE (Bonett–Price)")
    se_cluster_points: float | None = Field(
        None, description="cluster-robust SE over families (CR1); None with a single family"
    )
    families: int
    method: str = "adjusted Wald (Bonett–Price), SE = max(paired, cluster-robust by family)"

    @property
    def discordance(self) -> float:
        """Share of questions where exactly one side is right: what drives every power figure."""
        return (self.losses + self.gains) / self.n


def paired_difference(
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    families: Sequence[str],
    level: float = DEFAULT_LEVEL,
) -> PairedDifference:
    """B − A on matched questions (the three sequences are aligned by question)."""
    n = len(a_correct)
    if n == 0 or len(b_correct) != n or len(families) != n:
        raise ValueError(
            f"need equally long, non-empty sequences, got {n}, {len(b_correct)}, {len(families)}"
        )
    diff = np.asarray(b_correct, dtype=float) - np.asarray(a_correct, dtype=float)
    losses = int(np.count_nonzero(diff < 0))
    gains = int(np.count_nonzero(diff > 0))

    loss_adj = (losses + 1) / (n + 2)
    gain_adj = (gains + 1) / (n + 2)
    var_paired = (loss_adj + gain_adj - (gain_adj - loss_adj) ** 2) / (n + 2)

    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(f, len(index)) for f in families), dtype=np.intp)
    groups = len(index)
    var_cluster: float | None = None
    if groups > 1:
        sums = np.bincount(codes, weights=diff - diff.mean(), minlength=groups)
        var_cluster = groups / (groups - 1) * float(np.sum(sums**2)) / n**2

    variance = max(var_paired, var_cluster or 0.0)
    se = float(np.sqrt(variance))
    half = z_two_sided(level) * se
    centre = gain_adj - loss_adj
    return PairedDifference(
        n=n,
        losses=losses,
        gains=gains,
        estimate_points=POINTS * (gains - losses) / n,
        low_points=POINTS * max(-1.0, centre - half),
        high_points=POINTS * min(1.0, centre + half),
        level=level,
        se_points=POINTS * se,
        se_paired_points=POINTS * float(np.sqrt(var_paired)),
        se_cluster_points=None if var_cluster is None else POINTS * float(np.sqrt(var_cluster)),
        families=groups,
    )
