"""PASS, FAIL or INCONCLUSIVE against a margin declared before the run.

With the drop D = A − B in points, its two-sided interval [L, U] at the comparison's level
(95%: α = 0.05) and the exact McNemar p:

- PASS when U < margin: whatever B loses, it is shown to be less than the margin;
- FAIL when p < α and L > 0 (the drop is significant, by the exact test and by the interval)
  and D > margin (its best estimate is beyond what was accepted);
- INCONCLUSIVE otherwise, with the questions that would decide it and the drop the current
  count can detect (formulas in `sagemeter.evidence.power`), both at the stated power.

The margin must be fixed before looking at the data; choosing it afterwards turns any verdict
into the one wanted.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from sagemeter.errors import UserError
from sagemeter.evidence.binomial import min_flips_for_significance, p_text
from sagemeter.evidence.comparison import QualityComparison
from sagemeter.evidence.paired import POINTS, PairedDifference
from sagemeter.evidence.power import (
    DEFAULT_MIN_DISCORDANCE,
    DEFAULT_POWER,
    detectable_drop,
    is_rough,
    items_needed,
    planning_discordance,
)

DEFAULT_MARGIN_POINTS = 2.0
# More unanswered questions than this share of those asked: the answered ones may not stand for
# the set (a server that fails on long prompts fails on one kind of question), so no verdict.
MAX_UNANSWERED_SHARE = 0.10

Outcome = Literal["PASS", "FAIL", "INCONCLUSIVE"]


class QualityVerdict(BaseModel):
    verdict: Outcome
    reason: str
    margin_points: float
    drop_points: float = Field(description="A − B: positive when the candidate answers worse")
    drop_low_points: float
    drop_high_points: float
    mcnemar_p: float
    alpha: float
    power: float
    planning_discordance: float = Field(description="ψ behind the two figures below")
    discordance_source: str = Field(
        description='"observed" (A vs B), "noise floor" (A vs A\') or "stated minimum"'
    )
    items_needed: int = Field(
        description="questions to decide at the margin: PASS if there is no drop, found if the "
        "drop equals the margin"
    )
    detectable_drop_points: float = Field(description="true drop the current count detects")
    rough: bool = Field(
        description="fewer than ten flips expected: the two figures above are rough"
    )
    min_flips_for_significance: int


def _drop(difference: PairedDifference) -> tuple[float, float, float]:
    """A − B and its interval (low, high), in points; + 0.0 turns a printed "-0.0" into "0.0"."""
    return (
        -difference.estimate_points + 0.0,
        -difference.high_points + 0.0,
        -difference.low_points + 0.0,
    )


def level_text(level: float) -> str:
    """95% as "95%"; a sequential look's stricter levels with the digits that tell them from
    100%: "95.1%", "99.7%", "99.998%"."""
    miss = 1.0 - level
    digits = 1 if miss >= 0.01 else min(4, max(1, math.ceil(-math.log10(miss)) - 2))
    text = f"{100 * level:.{digits}f}"
    if float(text) >= 100.0:
        return f"> {100 - 10.0**-digits:.{digits}f}%"
    return text.removesuffix(".0") + "%"


def judge(
    difference: PairedDifference, mcnemar_p: float, margin_points: float, alpha: float
) -> tuple[Outcome, str]:
    """The verdict and its reason from the paired difference and the exact test alone."""
    drop, low, high = _drop(difference)
    span = f"{level_text(1 - alpha)} interval {low:+.1f} to {high:+.1f}"
    margin = f"the {margin_points:g}-point margin"
    if high < margin_points:
        return "PASS", f"the drop is at most {high:.1f} points ({span}), below {margin}"
    significant = mcnemar_p < alpha and low > 0
    if significant and drop > margin_points:
        return "FAIL", (
            f"the candidate answers {drop:.1f} points worse ({span}, "
            f"McNemar {p_text(mcnemar_p)}), beyond {margin}"
        )
    if significant:
        return "INCONCLUSIVE", (
            f"a drop of {drop:.1f} points is significant (McNemar {p_text(mcnemar_p)}) but "
            f"within {margin}, and its upper bound {high:.1f} is not"
        )
    return "INCONCLUSIVE", (
        f"the drop of {drop:+.1f} points ({span}) is neither shown below {margin} nor "
        f"significant (McNemar {p_text(mcnemar_p)})"
    )


def decide(
    comparison: QualityComparison,
    margin_points: float = DEFAULT_MARGIN_POINTS,
    power: float = DEFAULT_POWER,
    min_discordance: float = DEFAULT_MIN_DISCORDANCE,
) -> QualityVerdict:
    """The verdict on B against A at a margin (points) declared before the run."""
    if not 0.0 < margin_points < POINTS:
        raise UserError(f"margin {margin_points:g}: give points between 0 and 100, e.g. 2")
    if not 0.0 < power < 1.0:
        raise UserError(f"power {power:g}: give a share between 0 and 1, e.g. 0.8")
    if not 0.0 < min_discordance <= 1.0:
        raise UserError(
            f"minimum discordance {min_discordance:g}: give a share in (0, 1], e.g. 0.05"
        )
    alpha = 1 - comparison.level
    difference = comparison.difference
    verdict, reason = judge(difference, comparison.mcnemar_p, margin_points, alpha)
    missing = len(dict.fromkeys([*comparison.failed_a, *comparison.failed_b]))
    asked = comparison.asked or comparison.n
    if missing and missing / asked > MAX_UNANSWERED_SHARE:
        verdict, reason = (
            "INCONCLUSIVE",
            (
                f"{missing} of {asked} questions went unanswered on one side or both (more than "
                f"{MAX_UNANSWERED_SHARE:.0%}): the answered ones may not stand for the set; "
                "measure again"
            ),
        )
    psi, source = planning_discordance(
        difference.discordance,
        None if comparison.noise is None else comparison.noise.discordance,
        min_discordance,
    )
    drop, low, high = _drop(difference)
    return QualityVerdict(
        verdict=verdict,
        reason=reason,
        margin_points=margin_points,
        drop_points=drop,
        drop_low_points=low,
        drop_high_points=high,
        mcnemar_p=comparison.mcnemar_p,
        alpha=alpha,
        power=power,
        planning_discordance=psi,
        discordance_source=source,
        items_needed=items_needed(psi, margin_points / POINTS, alpha, power, difference.families),
        detectable_drop_points=POINTS
        * detectable_drop(comparison.n, psi, alpha, power, difference.families),
        rough=is_rough(comparison.n, psi),
        min_flips_for_significance=min_flips_for_significance(alpha),
    )
