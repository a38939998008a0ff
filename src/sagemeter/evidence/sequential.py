"""Stop asking questions once the verdict is known, and keep the verdict's error rates.

The fixed-count verdict (`verdict.judge`) is two one-sided tests at the 95% level: PASS rejects
"the drop is at least the margin" (its false-PASS rate is at most 2.5% when the true drop is the
margin or more), FAIL rejects "there is no drop" (its false-FAIL rate is at most 2.5% when there
is none). Looking at the data after every block and stopping at the first PASS or FAIL would
spend those 2.5% again at every look; after 20 looks a false verdict would be several times as
likely.

So each look uses a stricter level, from a **group-sequential design with alpha spending**
(Lan & DeMets 1983) and the **O'Brien–Fleming-type spending function**

    α(t) = 2 − 2 Φ(z_{1−α/4} / √t)      (α/2 = 2.5% one-sided, reached at t = 1)

where t = n / N is the share of the planned questions answered. Each one-sided test may spend
α(t_k) − α(t_{k−1}) at look k; the boundary c_k solving P(no crossing before k, crossing at k)
= that increment is found by numerical integration of the test statistic as a Brownian motion
observed at t₁ < t₂ < … (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19).
Early boundaries are far out (z ≈ 4.9 at the first of five looks), the last one near the fixed
test's 1.96 (2.03 at five looks), so little is lost when the run goes to the end.

At look k the verdict is exactly the fixed-count rule (`judge`: same interval, same exact
McNemar test, same meanings of PASS, FAIL and INCONCLUSIVE) computed at the two-sided level
1 − 2(1 − Φ(c_k)) instead of 95%. The same boundaries serve both tests, since both spend 2.5%.
An INCONCLUSIVE look goes on to the next block; an INCONCLUSIVE last look is the answer.

Looks are planned before the run (every `block` questions, the last at the end of the set), so
the boundaries never depend on the data. The design assumes the normal approximation of the
paired difference; the simulation benchmark (benchmarks/sequential_quality.py, its table in
docs/statistics.md) checks that the error rates hold at the counts used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, Field

from sagemeter.evidence import lazy_scipy
from sagemeter.evidence.binomial import mcnemar_exact_p
from sagemeter.evidence.paired import paired_difference
from sagemeter.evidence.verdict import Outcome, judge

ONE_SIDED_ALPHA = 0.025  # each of PASS and FAIL, as in the fixed-count verdict at 95%
METHOD = (
    "group-sequential paired test at the margin: Lan–DeMets alpha spending, "
    "O'Brien–Fleming type, 2.5% one-sided for each of PASS and FAIL"
)
MAX_BOUNDARY_Z = 8.0  # a look allowed to spend less than ~1e-15 gets this (never crossed)
DEFAULT_BLOCK = 50
MAX_LOOKS = 200  # the boundaries' integration grows with the looks; 200 takes seconds
_GRID_SDS = 9.0  # the density of the statistic is kept down to this many sds below zero


def spent(fraction: float, alpha: float = ONE_SIDED_ALPHA) -> float:
    """α(t): the one-sided error allowed to be spent by information fraction `fraction`."""
    if fraction <= 0.0:
        return 0.0
    norm = lazy_scipy.stats().norm
    z = float(norm.ppf(1 - alpha / 2))
    return float(2 - 2 * norm.cdf(z / math.sqrt(min(fraction, 1.0))))


def _crossing(c: float, t: float, sd: float, grid: np.ndarray, mass: np.ndarray) -> float:
    """P(not stopped before, statistic ≥ c at fraction t): `mass` is the not-yet-stopped
    probability at `grid` (the sum S at the previous look); an empty grid means a first look."""
    norm = lazy_scipy.stats().norm
    if grid.size == 0:
        return float(norm.sf(c))
    return float(np.sum(mass * norm.sf((c * math.sqrt(t) - grid) / sd)))


def _excess(
    c: float, t: float, sd: float, grid: np.ndarray, mass: np.ndarray, goal: float
) -> float:
    return _crossing(c, t, sd, grid, mass) - goal


@lru_cache(maxsize=64)
def boundaries(fractions: tuple[float, ...], alpha: float = ONE_SIDED_ALPHA) -> tuple[float, ...]:
    """The one-sided z boundary of every look at these increasing information fractions."""
    if not fractions or any(b <= a for a, b in itertools.pairwise(fractions)):
        raise ValueError(f"need increasing information fractions, got {fractions}")
    if not (fractions[0] > 0.0 and fractions[-1] <= 1.0):
        raise ValueError(f"information fractions lie in (0, 1], got {fractions}")
    norm = lazy_scipy.stats().norm
    brentq = lazy_scipy.optimize().brentq
    found: list[float] = []
    # The statistic's unnormalised sum S(t) ~ Brownian motion; density on a grid below the last
    # boundary (the paths not yet stopped), with trapezoid weights.
    grid = np.zeros(0)
    weighted = np.zeros(0)  # density × weight: the mass at each grid point
    previous_t = 0.0
    for t in fractions:
        increment = spent(t, alpha) - spent(previous_t, alpha)
        sd = math.sqrt(t - previous_t)
        state = (t, sd, grid, weighted)
        if _crossing(MAX_BOUNDARY_Z, *state) >= increment:
            c = MAX_BOUNDARY_Z
        else:
            c = float(brentq(_excess, -10.0, MAX_BOUNDARY_Z, args=(*state, increment), xtol=1e-9))
        found.append(c)
        top = c * math.sqrt(t)
        step = min(sd, math.sqrt(t)) / 6
        points = max(50, math.ceil((top + _GRID_SDS * math.sqrt(t)) / step))
        new_grid = np.linspace(-_GRID_SDS * math.sqrt(t), top, points + 1)
        if grid.size == 0:
            density = norm.pdf(new_grid / math.sqrt(t)) / math.sqrt(t)
        else:
            kernel = norm.pdf((new_grid[:, None] - grid[None, :]) / sd) / sd
            density = kernel @ weighted
        weights = np.full(new_grid.size, new_grid[1] - new_grid[0])
        weights[[0, -1]] /= 2
        grid, weighted, previous_t = new_grid, density * weights, t
    return tuple(found)


def planned_looks(max_items: int, block: int = DEFAULT_BLOCK) -> list[int]:
    """Questions answered at each look: every `block`, and the end of the set."""
    if max_items < 1 or block < 1:
        raise ValueError(f"need at least one question and a block of one, got {max_items}, {block}")
    looks = [*range(block, max_items, block), max_items]
    if len(looks) > MAX_LOOKS:
        raise ValueError(
            f"{len(looks)} looks (a block of {block} in {max_items} questions): at most "
            f"{MAX_LOOKS}; take a block of at least {math.ceil(max_items / MAX_LOOKS)}"
        )
    return looks


class SequentialPlan(BaseModel):
    """The looks and their boundaries, fixed before the first answer."""

    method: str = METHOD
    max_items: int = Field(description="questions in the set: the most the run may ask")
    block: int = Field(description="questions asked to both arms between looks")
    looks: list[int] = Field(description="questions answered at each planned look")
    boundaries_z: list[float] = Field(description="one-sided z each test must pass at each look")
    nominal_false_pass: float = ONE_SIDED_ALPHA
    nominal_false_fail: float = ONE_SIDED_ALPHA

    @classmethod
    def of(cls, max_items: int, block: int = DEFAULT_BLOCK) -> SequentialPlan:
        looks = planned_looks(max_items, block)
        z = boundaries(tuple(n / max_items for n in looks))
        return cls(max_items=max_items, block=block, looks=looks, boundaries_z=list(z))

    def level_at(self, look: int) -> float:
        """The two-sided level of the fixed-count rule at look `look` (0-based)."""
        tail = float(lazy_scipy.stats().norm.sf(self.boundaries_z[look]))
        return 1 - 2 * tail


class SequentialLook(BaseModel):
    """The verdict at one look and whether the run stops there."""

    verdict: Outcome
    reason: str
    look: int = Field(description="looks taken, this one included")
    items: int = Field(description="questions answered by both arms so far")
    level: float = Field(description="the two-sided level the rule was applied at")
    stop: bool
    stopping_reason: str


def look_at(
    plan: SequentialPlan,
    look: int,
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    families: Sequence[str],
    margin_points: float,
) -> SequentialLook:
    """The fixed-count rule at look `look` (0-based) on the answers so far, at its level."""
    level = plan.level_at(look)
    difference = paired_difference(a_correct, b_correct, families, level)
    p = mcnemar_exact_p(difference.losses, difference.gains)
    verdict, reason = judge(difference, p, margin_points, 1 - level)
    last = look == len(plan.looks) - 1
    if verdict != "INCONCLUSIVE":
        why = f"{verdict} at look {look + 1} of {len(plan.looks)}: {reason}"
    elif last:
        why = f"the set ran out at look {look + 1} without a verdict: {reason}"
    else:
        why = ""
    return SequentialLook(
        verdict=verdict,
        reason=reason,
        look=look + 1,
        items=difference.n,
        level=level,
        stop=verdict != "INCONCLUSIVE" or last,
        stopping_reason=why,
    )
