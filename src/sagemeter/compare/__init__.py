"""Comparison: two or more results side by side. `combine` builds the article's table (ratios
with intervals, A-A′ drift, costs, the quality and fidelity checks); `costs` turns an hourly price
into USD per million tokens."""

from sagemeter.compare.combine import (
    Comparison,
    Drift,
    FidelityCheck,
    QualityCheck,
    Row,
    across_methods_note,
    combine,
    identical_answers,
    incomplete_note,
    save_comparison,
)

__all__ = [
    "Comparison",
    "Drift",
    "FidelityCheck",
    "QualityCheck",
    "Row",
    "across_methods_note",
    "combine",
    "identical_answers",
    "incomplete_note",
    "save_comparison",
]
