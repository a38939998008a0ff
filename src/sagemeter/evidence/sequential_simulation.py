"""How often the sequential verdict errs, and how many questions it saves, by simulation.

Each simulated run is a sequence of paired answers with a known truth: every question is a loss
(A right, B wrong) with probability g + δ, a gain (B right, A wrong) with probability g, else a
tie; δ is the true drop and g the flips a re-run shows by itself. Questions come in families
dealt round-robin (as a shuffled set would), so the verdict's cluster-robust SE is exercised.
The same sequence goes to the sequential rule (`sequential.look_at` at every planned look) and to
the fixed-count rule at 95% on the whole set, so their outcomes are paired too.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from sagemeter.evidence.binomial import DEFAULT_LEVEL, mcnemar_exact_p
from sagemeter.evidence.paired import POINTS, paired_difference
from sagemeter.evidence.sequential import SequentialPlan, look_at
from sagemeter.evidence.verdict import judge

DEFAULT_FAMILIES = 20


class SimulationRow(BaseModel):
    """One scenario's outcomes over `sequences` simulated runs."""

    drop_points: float
    margin_points: float
    gain_rate: float
    max_items: int
    block: int
    sequences: int
    sequential: dict[str, int] = Field(description="PASS / FAIL / INCONCLUSIVE counts")
    fixed: dict[str, int] = Field(description="the same for the fixed-count rule")
    mean_items: float = Field(description="questions the sequential rule used, on average")
    mean_looks: float

    @property
    def false_pass(self) -> float | None:
        """Share of PASS when the true drop is the margin or more (None: not an error here)."""
        if self.drop_points < self.margin_points:
            return None
        return self.sequential["PASS"] / self.sequences

    @property
    def false_fail(self) -> float | None:
        """Share of FAIL when there is no true drop (None: not an error here)."""
        if self.drop_points > 0:
            return None
        return self.sequential["FAIL"] / self.sequences

    @property
    def saved(self) -> float:
        """Share of the fixed count's questions the sequential rule did not ask."""
        return 1 - self.mean_items / self.max_items


def simulate(
    drop_points: float,
    margin_points: float,
    *,
    max_items: int,
    block: int,
    sequences: int,
    gain_rate: float = 0.03,
    families: int = DEFAULT_FAMILIES,
    seed: int = 0,
) -> SimulationRow:
    """Run `sequences` paired sequences at a true drop of `drop_points` against the margin."""
    loss_rate = gain_rate + drop_points / POINTS
    if not (gain_rate >= 0 and loss_rate + gain_rate <= 1):
        raise ValueError(f"flip rates {loss_rate:g} and {gain_rate:g} do not make a share")
    plan = SequentialPlan.of(max_items, block)
    rng = np.random.default_rng(seed)
    family_of = [f"f{i % families}" for i in range(max_items)]
    counts = {"PASS": 0, "FAIL": 0, "INCONCLUSIVE": 0}
    fixed = dict(counts)
    items = looks = 0
    for _ in range(sequences):
        draw = rng.random(max_items)
        a: list[bool] = ((draw < loss_rate) | (draw >= loss_rate + gain_rate)).tolist()
        b: list[bool] = (draw >= loss_rate).tolist()
        for index, n in enumerate(plan.looks):
            outcome = look_at(plan, index, a[:n], b[:n], family_of[:n], margin_points)
            if outcome.stop:
                counts[outcome.verdict] += 1
                items += n
                looks += outcome.look
                break
        whole = paired_difference(a, b, family_of, DEFAULT_LEVEL)
        p = mcnemar_exact_p(whole.losses, whole.gains)
        fixed[judge(whole, p, margin_points, 1 - DEFAULT_LEVEL)[0]] += 1
    return SimulationRow(
        drop_points=drop_points,
        margin_points=margin_points,
        gain_rate=gain_rate,
        max_items=max_items,
        block=block,
        sequences=sequences,
        sequential=counts,
        fixed=fixed,
        mean_items=items / sequences,
        mean_looks=looks / sequences,
    )
