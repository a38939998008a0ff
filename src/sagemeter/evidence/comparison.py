"""One checkpoint's answers against another's on the same questions: every paired figure.

A is the reference (say bf16), B the candidate (say a 4-bit export), A' an optional second run
of A whose differences from A are the noise floor: what flips with nothing changed. All figures
are over the questions both runs answered; questions only one run has are listed, not used.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sagemeter.evidence.binomial import DEFAULT_LEVEL, mcnemar_exact_p, wilson_interval
from sagemeter.evidence.paired import PairedDifference, paired_difference
from sagemeter.evidence.pairing import Answers, Pairs, QualityItem, pair_items


class Accuracy(BaseModel):
    """correct/total with its Wilson interval, as fractions."""

    correct: int
    total: int
    share: float
    low: float
    high: float


class Flips(BaseModel):
    """The questions whose verdict changed, by id: these decide the McNemar test."""

    losses: list[str] = Field(description="A right, B wrong")
    gains: list[str] = Field(description="A wrong, B right")


class Agreement(BaseModel):
    """How often the two runs said the same thing, whatever its correctness."""

    n: int
    identical_replies: int = Field(description="replies equal character for character")
    identical_extracted: int = Field(description="extracted answers equal (both present)")


class FamilyRow(BaseModel):
    family: str
    n: int
    correct_a: int
    correct_b: int
    losses: int
    gains: int


class NoiseFloor(BaseModel):
    """A against A': what changes between two runs of the same checkpoint."""

    n: int
    only_in_a: list[str]
    only_in_again: list[str]
    flips: Flips
    agreement: Agreement
    discordance: float = Field(description="(losses + gains) / n")
    mcnemar_p: float


class QualityComparison(BaseModel):
    """B against A on matched questions: accuracies, paired difference, flips, agreement."""

    n: int = Field(description="questions both runs answered; every figure below is over these")
    asked: int | None = Field(None, description="questions both runs asked, answered or not")
    level: float = DEFAULT_LEVEL
    only_in_a: list[str]
    only_in_b: list[str]
    failed_a: list[str] = Field(
        description="questions A could not answer (its request failed): left out, not wrong"
    )
    failed_b: list[str] = Field(
        description="questions B could not answer (its request failed): left out, not wrong"
    )
    accuracy_a: Accuracy
    accuracy_b: Accuracy
    difference: PairedDifference = Field(description="B − A in points")
    mcnemar_p: float = Field(description="two-sided exact McNemar p on losses against gains")
    flips: Flips
    agreement: Agreement
    families: list[FamilyRow]
    noise: NoiseFloor | None = None


def _accuracy(items: list[QualityItem], level: float) -> Accuracy:
    correct = sum(item.correct for item in items)
    low, high = wilson_interval(correct, len(items), level)
    return Accuracy(
        correct=correct, total=len(items), share=correct / len(items), low=low, high=high
    )


def _flips(pairs: Pairs) -> Flips:
    both = list(zip(pairs.a, pairs.b, strict=True))
    return Flips(
        losses=[a.id for a, b in both if a.correct and not b.correct],
        gains=[a.id for a, b in both if b.correct and not a.correct],
    )


def _agreement(pairs: Pairs) -> Agreement:
    both = list(zip(pairs.a, pairs.b, strict=True))
    return Agreement(
        n=len(both),
        identical_replies=sum(a.reply is not None and a.reply == b.reply for a, b in both),
        identical_extracted=sum(
            a.extracted is not None and a.extracted == b.extracted for a, b in both
        ),
    )


def _families(pairs: Pairs) -> list[FamilyRow]:
    rows: dict[str, FamilyRow] = {}
    for a, b in zip(pairs.a, pairs.b, strict=True):
        row = rows.setdefault(
            a.family, FamilyRow(family=a.family, n=0, correct_a=0, correct_b=0, losses=0, gains=0)
        )
        row.n += 1
        row.correct_a += a.correct
        row.correct_b += b.correct
        row.losses += a.correct and not b.correct
        row.gains += b.correct and not a.correct
    return list(rows.values())


def noise_floor(a: Answers, a_again: Answers) -> NoiseFloor:
    """Flips and agreement between two runs of the same checkpoint."""
    pairs = pair_items(a, a_again, names=("A", "A'"))
    flips = _flips(pairs)
    return NoiseFloor(
        n=len(pairs.a),
        only_in_a=pairs.only_in_a,
        only_in_again=pairs.only_in_b,
        flips=flips,
        agreement=_agreement(pairs),
        discordance=(len(flips.losses) + len(flips.gains)) / len(pairs.a),
        mcnemar_p=mcnemar_exact_p(len(flips.losses), len(flips.gains)),
    )


def compare_quality(
    a: Answers,
    b: Answers,
    a_again: Answers | None = None,
    level: float = DEFAULT_LEVEL,
) -> QualityComparison:
    """Compare candidate B with reference A question by question (A' optional: A run again).

    Raises UserError when A and B share no question id (or A and A' do), or an id repeats.
    """
    pairs = pair_items(a, b)
    flips = _flips(pairs)
    return QualityComparison(
        n=len(pairs.a),
        asked=len(pairs.a) + len(pairs.unanswered),
        level=level,
        only_in_a=pairs.only_in_a,
        only_in_b=pairs.only_in_b,
        failed_a=pairs.unanswered_a,
        failed_b=pairs.unanswered_b,
        accuracy_a=_accuracy(pairs.a, level),
        accuracy_b=_accuracy(pairs.b, level),
        difference=paired_difference(
            [item.correct for item in pairs.a],
            [item.correct for item in pairs.b],
            [item.family for item in pairs.a],
            level,
        ),
        mcnemar_p=mcnemar_exact_p(len(flips.losses), len(flips.gains)),
        flips=flips,
        agreement=_agreement(pairs),
        families=_families(pairs),
        noise=None if a_again is None else noise_floor(a, a_again),
    )
