"""Matching by id, the paired difference clustered by family, and the comparison's figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sagemeter.errors import UserError
from sagemeter.evidence.comparison import compare_quality, noise_floor
from sagemeter.evidence.paired import paired_difference
from sagemeter.evidence.pairing import pair_items
from sagemeter.results import QualityDetail, QualityItem


def item(
    item_id: str,
    correct: bool,
    family: str = "sum",
    reply: str | None = "x",
    extracted: str | None = "x",
    error: str | None = None,
) -> QualityItem:
    return QualityItem(
        id=item_id,
        family=family,
        prompt=f"question {item_id}",
        expected="x",
        reply=reply,
        extracted=extracted,
        correct=correct,
        error=error,
    )


def detail(items: list[QualityItem]) -> QualityDetail:
    return QualityDetail(
        question_set="t",
        question_set_sha256="0" * 64,
        max_tokens=8,
        correct=sum(i.correct for i in items),
        total=len(items),
        by_family={},
        items=items,
    )


# --- matching --------------------------------------------------------------------------------


def test_items_are_matched_by_id_not_position_and_strays_are_reported() -> None:
    a = [item("q1", True), item("q2", False), item("q3", True), item("only-a", True)]
    b = [item("q3", False), item("only-b", True), item("q1", True), item("q2", True)]
    pairs = pair_items(a, detail(b))
    assert pairs.ids == ["q1", "q2", "q3"]
    assert [i.id for i in pairs.b] == ["q1", "q2", "q3"]
    assert pairs.only_in_a == ["only-a"]
    assert pairs.only_in_b == ["only-b"]
    comparison = compare_quality(a, b)
    assert comparison.n == 3
    assert comparison.only_in_a == ["only-a"] and comparison.only_in_b == ["only-b"]
    assert comparison.flips.losses == ["q3"] and comparison.flips.gains == ["q2"]
    assert (comparison.accuracy_a.correct, comparison.accuracy_b.correct) == (2, 2)


def test_no_common_question_is_a_user_error() -> None:
    with pytest.raises(UserError, match="no question id in common"):
        compare_quality([item("a1", True)], [item("b1", True)])
    with pytest.raises(UserError, match="A and A'"):
        compare_quality([item("q", True)], [item("q", True)], a_again=[item("z", True)])


def test_repeated_ids_and_changed_families_are_refused() -> None:
    with pytest.raises(UserError, match="'q1' appears twice in B"):
        pair_items([item("q1", True)], [item("q1", True), item("q1", False)])
    with pytest.raises(UserError, match="'q1' is 'sum' in A but 'capital' in B"):
        pair_items([item("q1", True)], [item("q1", True, family="capital")])


# --- the paired difference -------------------------------------------------------------------


def test_the_articles_two_lost_two_gained_has_a_zero_cluster_se_and_the_paired_floor() -> None:
    families = ["mul"] * 15 + ["sum"] * 15 + ["cap"] * 10
    a = [True] * 40
    b = [True] * 40
    a[15], a[16], b[17], b[18] = False, False, False, False  # two gains, two losses, all sums
    d = paired_difference(a, b, families)
    assert (d.n, d.losses, d.gains, d.families) == (40, 2, 2, 3)
    assert d.estimate_points == 0.0
    assert d.se_cluster_points == pytest.approx(0.0, abs=1e-12)  # cancels within "sum"
    # Bonett–Price: p̃ = 3/42 each way, SE² = (6/42) / 42.
    expected_se = 100 * math.sqrt((6 / 42) / 42)
    assert d.se_paired_points == pytest.approx(expected_se)
    assert d.se_points == pytest.approx(expected_se)
    assert (d.low_points, d.high_points) == pytest.approx((-11.43, 11.43), abs=0.01)
    assert d.discordance == pytest.approx(0.1)


def test_losses_concentrated_in_one_family_widen_the_interval_through_the_cluster_se() -> None:
    families = ["arith"] * 10 + ["recall"] * 10
    a = [True] * 20
    b = [False] * 4 + [True] * 16  # four losses, all arithmetic
    d = paired_difference(a, b, families)
    # d̄ = −0.2; family sums of (d − d̄): −4 + 2 = −2 and +2; SE² = 2/1 · 8 / 20².
    assert d.se_cluster_points == pytest.approx(20.0)
    assert d.se_paired_points == pytest.approx(100 * math.sqrt((6 / 22 - (4 / 22) ** 2) / 22))
    assert d.se_points == pytest.approx(20.0)
    centre = -4 / 22
    assert d.low_points == pytest.approx(100 * (centre - 1.959963984540054 * 0.2))
    assert d.high_points == pytest.approx(100 * (centre + 1.959963984540054 * 0.2))
    assert d.estimate_points == pytest.approx(-20.0)


def test_no_flips_still_leave_an_interval_and_one_family_has_no_cluster_se() -> None:
    d = paired_difference([True] * 40, [True] * 40, ["only"] * 40)
    assert d.se_cluster_points is None
    assert d.se_points == pytest.approx(100 * math.sqrt((2 / 42) / 42))
    assert d.high_points == pytest.approx(6.6, abs=0.05)
    assert d.low_points == pytest.approx(-d.high_points)


def test_interval_is_clipped_to_the_possible_range() -> None:
    d = paired_difference([False, False], [True, True], ["x", "y"])
    assert d.high_points == 100.0
    assert d.estimate_points == 100.0


def test_misaligned_sequences_are_a_programming_error() -> None:
    with pytest.raises(ValueError):
        paired_difference([True], [True, False], ["x"])
    with pytest.raises(ValueError):
        paired_difference([], [], [])


def test_interval_covers_the_true_difference_at_least_at_its_level() -> None:
    """Seeded: 2000 paired runs of 200 independent questions in 4 families, true B − A = −3."""
    rng = np.random.default_rng(20260925)
    n, runs, p_loss, p_gain = 200, 2000, 0.08, 0.05
    families = [f"f{i % 4}" for i in range(n)]
    covered = 0
    for _ in range(runs):
        u = rng.random(n)
        a = (u < p_loss) | (u >= p_loss + p_gain)
        b = u >= p_loss
        d = paired_difference(a.tolist(), b.tolist(), families)
        covered += d.low_points <= -3.0 <= d.high_points
    assert 0.94 <= covered / runs <= 0.995


# --- the comparison --------------------------------------------------------------------------


def test_agreement_counts_replies_and_extracted_answers_separately() -> None:
    a = [
        item("q1", True, reply="The answer is 7.", extracted="7"),
        item("q2", True, reply="7", extracted="7"),
        item("q3", False, reply=None, extracted=None, error="timeout"),
        item("q4", False, reply="no idea", extracted=None),
    ]
    b = [
        item("q1", True, reply="The answer is 7.", extracted="7"),
        item("q2", True, reply="It is 7", extracted="7"),
        item("q3", False, reply=None, extracted=None, error="timeout"),
        item("q4", False, reply="no idea", extracted=None),
    ]
    c = compare_quality(a, b)
    # An unanswered question is left out (n counts answered pairs); a missing answer never agrees.
    assert (c.agreement.n, c.agreement.identical_replies, c.agreement.identical_extracted) == (
        3,
        2,
        2,
    )
    assert c.failed_a == ["q3"] and c.failed_b == ["q3"]
    assert c.n == 3 and c.asked == 4


def test_family_table_and_accuracies() -> None:
    a = [item("m1", True, "mul"), item("m2", True, "mul"), item("s1", True), item("s2", False)]
    b = [item("m1", False, "mul"), item("m2", True, "mul"), item("s1", True), item("s2", True)]
    c = compare_quality(a, b)
    rows = [(r.family, r.n, r.correct_a, r.correct_b, r.losses, r.gains) for r in c.families]
    assert rows == [("mul", 2, 2, 1, 1, 0), ("sum", 2, 1, 2, 0, 1)]
    assert c.accuracy_a.share == 0.75 and c.accuracy_a.total == 4
    assert (c.accuracy_a.low, c.accuracy_a.high) == pytest.approx((0.3006, 0.9544), abs=1e-4)
    assert c.mcnemar_p == 1.0
    assert c.noise is None


def test_noise_floor_is_a_against_a_again() -> None:
    a = [item(f"q{i}", i % 2 == 0, reply=str(i)) for i in range(10)]
    again = [
        item(f"q{i}", i % 2 == 0 or i == 1, reply=str(i) if i != 1 else "other") for i in range(10)
    ]
    floor = noise_floor(a, again)
    assert floor.n == 10
    assert floor.flips.gains == ["q1"] and floor.flips.losses == []
    assert floor.agreement.identical_replies == 9
    assert floor.discordance == pytest.approx(0.1)
    assert floor.mcnemar_p == 1.0
    assert compare_quality(a, a, a_again=again).noise == floor
