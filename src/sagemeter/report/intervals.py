"""Confidence intervals for the report's counts (kept small so a shared statistics module can take
them over later).
"""

from __future__ import annotations

import math

Z_95 = 1.959963984540054  # the two-sided 95% point of the standard normal


def wilson_interval(successes: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a proportion: honest at 0/n and n/n, unlike the normal one.

    Returns (low, high) as fractions in [0, 1]; (0, 1) when there were no trials.
    """
    if total < 0 or successes < 0 or successes > total:
        raise ValueError(f"need 0 <= successes <= total, got {successes}/{total}")
    if total == 0:
        return 0.0, 1.0
    share = successes / total
    z2 = z * z
    centre = (share + z2 / (2 * total)) / (1 + z2 / total)
    half = z * math.sqrt(share * (1 - share) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    return max(0.0, centre - half), min(1.0, centre + half)
