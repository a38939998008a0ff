"""Paired quality statistics and the verdict: how sure we are that B answers as well as A.

- `binomial`: Wilson and Clopper–Pearson intervals, the exact McNemar test;
- `pairing`: matching two runs' answers by question id;
- `paired`: the B − A difference with an interval clustered by question family;
- `comparison`: every paired figure in one `QualityComparison`;
- `power`: questions needed and the drop detectable (paired-proportion formulas);
- `verdict`: PASS / FAIL / INCONCLUSIVE at a margin declared before the run;
- `summary`: the plain-text summary and the per-family markdown table.

All pure: no file or network access.
"""

from sagemeter.evidence.binomial import (
    clopper_pearson_interval,
    mcnemar_exact_p,
    min_flips_for_significance,
    wilson_interval,
)
from sagemeter.evidence.comparison import (
    Accuracy,
    Agreement,
    FamilyRow,
    Flips,
    NoiseFloor,
    QualityComparison,
    compare_quality,
    noise_floor,
)
from sagemeter.evidence.paired import PairedDifference, paired_difference
from sagemeter.evidence.power import detectable_drop, items_needed, planning_discordance, z_sum
from sagemeter.evidence.summary import family_table_markdown, render_summary
from sagemeter.evidence.verdict import QualityVerdict, decide, judge

__all__ = [
    "Accuracy",
    "Agreement",
    "FamilyRow",
    "Flips",
    "NoiseFloor",
    "PairedDifference",
    "QualityComparison",
    "QualityVerdict",
    "clopper_pearson_interval",
    "compare_quality",
    "decide",
    "detectable_drop",
    "family_table_markdown",
    "items_needed",
    "judge",
    "mcnemar_exact_p",
    "min_flips_for_significance",
    "noise_floor",
    "paired_difference",
    "planning_discordance",
    "render_summary",
    "wilson_interval",
    "z_sum",
]
