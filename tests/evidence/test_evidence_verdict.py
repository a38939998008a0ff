"""The verdict on the article's own 40 answers, on clear cases, and its power by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sagemeter.errors import UserError
from sagemeter.evidence.binomial import mcnemar_exact_p
from sagemeter.evidence.comparison import QualityComparison, compare_quality
from sagemeter.evidence.paired import paired_difference
from sagemeter.evidence.power import (
    detectable_drop,
    items_needed,
    planning_discordance,
    z_sum,
)
from sagemeter.evidence.summary import family_table_markdown, render_summary
from sagemeter.evidence.verdict import decide, judge
from sagemeter.results import QualityItem

# --- the article's paired data ---------------------------------------------------------------
# 15 two-digit multiplications and 10 capitals, all right for both; 15 sums a + b − c, where the
# five below are the only replies that differ (the article's table: expected, bf16, QAT).
ARTICLE_DIFFERING_SUMS = [
    ("876 + 608 − 558", "926", "1026", "926"),
    ("257 + 388 − 290", "355", "355", "655"),
    ("782 + 571 − 534", "819", "829", "819"),
    ("470 + 238 − 983", "-275", "-275", "-285"),
    ("150 + 937 − 139", "948", "918", "1010"),
]
CAPITALS = [
    ("France", "Paris"),
    ("Japan", "Tokyo"),
    ("Kenya", "Nairobi"),
    ("Peru", "Lima"),
    ("Canada", "Ottawa"),
    ("Egypt", "Cairo"),
    ("Norway", "Oslo"),
    ("Chile", "Santiago"),
    ("India", "New Delhi"),
    ("Spain", "Madrid"),
]


def _q(item_id: str, family: str, prompt: str, expected: str, answer: str) -> QualityItem:
    return QualityItem(
        id=item_id,
        family=family,
        prompt=prompt,
        expected=expected,
        reply=f"{prompt} = {answer}",
        extracted=answer,
        correct=answer == expected,
        finish_reason="stop",
    )


def article_run(side: str) -> list[QualityItem]:
    """One checkpoint's 40 answers: side "bf16" or "qat"."""
    rng = np.random.default_rng(40)
    items = []
    for i in range(15):
        x, y = (int(v) for v in rng.integers(10, 100, size=2))
        items.append(_q(f"mul-{i:02d}", "multiplication", f"{x} × {y}", str(x * y), str(x * y)))
    for i, (prompt, expected, bf16, qat) in enumerate(ARTICLE_DIFFERING_SUMS):
        items.append(_q(f"sum-{i:02d}", "sum", prompt, expected, bf16 if side == "bf16" else qat))
    for i in range(5, 15):
        x, y, z = (int(v) for v in rng.integers(100, 1000, size=3))
        items.append(_q(f"sum-{i:02d}", "sum", f"{x} + {y} − {z}", str(x + y - z), str(x + y - z)))
    for i, (country, capital) in enumerate(CAPITALS):
        items.append(_q(f"cap-{i:02d}", "capital", f"capital of {country}", capital, capital))
    return items


@pytest.fixture
def article() -> QualityComparison:
    """bf16 against QAT, with bf16 measured again (the article: identical to all 40)."""
    return compare_quality(article_run("bf16"), article_run("qat"), a_again=article_run("bf16"))


def test_article_figures(article: QualityComparison) -> None:
    assert article.n == 40
    assert (article.accuracy_a.correct, article.accuracy_b.correct) == (37, 37)
    assert (round(article.accuracy_a.low, 3), round(article.accuracy_a.high, 3)) == (0.801, 0.974)
    assert article.agreement.identical_replies == 35
    assert article.agreement.identical_extracted == 35
    assert article.flips.losses == ["sum-01", "sum-03"]  # bf16 right, QAT wrong
    assert article.flips.gains == ["sum-00", "sum-02"]
    assert article.mcnemar_p == 1.0
    assert article.difference.estimate_points == 0.0
    assert [
        (r.family, r.n, r.correct_a, r.correct_b, r.losses, r.gains) for r in article.families
    ] == [
        ("multiplication", 15, 15, 15, 0, 0),
        ("sum", 15, 12, 12, 2, 2),
        ("capital", 10, 10, 10, 0, 0),
    ]
    assert article.noise is not None
    assert article.noise.flips.losses == [] and article.noise.flips.gains == []
    assert article.noise.agreement.identical_replies == 40


def test_article_verdict_is_inconclusive_and_names_what_would_decide_it(
    article: QualityComparison,
) -> None:
    verdict = decide(article)
    assert verdict.verdict == "INCONCLUSIVE"
    assert verdict.mcnemar_p == 1.0
    assert verdict.margin_points == 2.0
    assert (verdict.drop_low_points, verdict.drop_high_points) == pytest.approx(
        (-11.43, 11.43), abs=0.01
    )
    assert verdict.planning_discordance == pytest.approx(0.1)  # 4 of 40 flip
    assert verdict.discordance_source == "observed"
    # The drop detectable at 40 questions: 2.80 · √(0.1 / 40) = 14.0 points by the textbook
    # formula; 15.8 with the allowance for the family-clustered interval over three families.
    assert detectable_drop(40, 0.1) * 100 == pytest.approx(14.0, abs=0.05)
    assert verdict.detectable_drop_points == pytest.approx(15.8, abs=0.05)
    assert verdict.items_needed == math.ceil(z_sum(0.05, 0.8, 3) ** 2 * 0.1 / 0.02**2)
    assert verdict.items_needed == 2497
    assert verdict.rough  # 4 flips expected at 40 questions
    assert verdict.min_flips_for_significance == 6


def test_article_summary_and_family_table(article: QualityComparison) -> None:
    text = render_summary(article, decide(article), names=("bf16", "QAT"))
    lines = text.splitlines()
    assert lines[0] == "quality on 40 questions both answered (bf16 = reference, QAT = candidate)"
    assert lines[1] == "  bf16: 37/40 = 92.5% (95% CI 80.1%–97.4%)"
    assert "QAT − bf16: +0.0 points (95% CI -11.4 to +11.4, clustered by 3 families)" in text
    assert "2 lost (sum-01, sum-03), 2 gained (sum-00, sum-02); exact McNemar p = 1.000" in text
    assert "35/40 replies identical, 35/40 extracted answers equal" in text
    assert "noise floor (bf16 vs bf16 again): 0 flips on 40 questions" in text
    assert "verdict at a 2-point margin: INCONCLUSIVE: " in text
    assert "to decide: about 2497 questions; 40 detect a drop of 15.8 points" in text
    assert "discordance 10.0% from bf16 vs QAT" in text
    assert len(lines) <= 10
    assert family_table_markdown(article, names=("bf16", "QAT")).splitlines() == [
        "| family | questions | bf16 correct | QAT correct | lost | gained |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        "| multiplication | 15 | 15 | 15 | 0 | 0 |",
        "| sum | 15 | 12 | 12 | 2 | 2 |",
        "| capital | 10 | 10 | 10 | 0 | 0 |",
        "| Total | 40 | 37 | 37 | 2 | 2 |",
    ]


# --- clear cases -----------------------------------------------------------------------------


def run_with(n: int, losses: int, gains: int, families: int = 1) -> tuple[list[QualityItem], ...]:
    """A and B on n questions: the first `losses` lost, the next `gains` gained, rest both right."""
    a, b = [], []
    for i in range(n):
        family = f"f{i % families}"
        lost, gained = i < losses, losses <= i < losses + gains
        a.append(_q(f"q{i}", family, f"q{i}", "1", "0" if gained else "1"))
        b.append(_q(f"q{i}", family, f"q{i}", "1", "0" if lost else "1"))
    return a, b


def test_pass_when_the_upper_bound_of_the_drop_is_below_the_margin() -> None:
    verdict = decide(compare_quality(*run_with(3000, 15, 15)))
    assert verdict.verdict == "PASS"
    assert verdict.drop_high_points < 2.0
    assert "below the 2-point margin" in verdict.reason


def test_fail_when_a_significant_drop_exceeds_the_margin() -> None:
    comparison = compare_quality(*run_with(400, 30, 2))
    verdict = decide(comparison)
    assert verdict.verdict == "FAIL"
    assert verdict.drop_points == pytest.approx(7.0)
    assert verdict.drop_low_points > 0 and verdict.mcnemar_p < 0.05
    assert "beyond the 2-point margin" in verdict.reason
    text = render_summary(comparison, verdict)
    assert "verdict at a 2-point margin: FAIL: the candidate answers 7.0 points worse" in text
    assert "to decide" not in text


def test_significant_but_within_the_margin_is_inconclusive() -> None:
    verdict = decide(compare_quality(*run_with(4000, 100, 40)))
    assert verdict.drop_points == pytest.approx(1.5)
    assert verdict.mcnemar_p < 0.001 and verdict.drop_low_points > 0
    assert verdict.drop_high_points > 2.0
    assert verdict.verdict == "INCONCLUSIVE"
    assert "significant (McNemar p < 0.001) but within the 2-point margin" in verdict.reason
    assert decide(compare_quality(*run_with(4000, 100, 40)), margin_points=1.0).verdict == "FAIL"


def test_a_better_candidate_passes() -> None:
    verdict = decide(compare_quality(*run_with(400, 2, 30)))
    assert verdict.verdict == "PASS" and verdict.drop_points == pytest.approx(-7.0)


def test_no_flip_in_40_questions_does_not_pass_and_plans_on_a_floor() -> None:
    a, b = run_with(40, 0, 0)
    verdict = decide(compare_quality(a, b))
    assert verdict.verdict == "INCONCLUSIVE"
    assert verdict.drop_high_points == pytest.approx(6.6, abs=0.05)
    assert (verdict.planning_discordance, verdict.discordance_source) == (0.05, "stated minimum")
    assert verdict.items_needed == math.ceil(z_sum() ** 2 * 0.05 / 0.02**2) == 982
    assert decide(compare_quality(a, b), min_discordance=0.1).items_needed == 1963
    # A re-run of A that flips 4 of 40 by itself raises the planning rate to 10%.
    again = [
        q.model_copy(update={"correct": not q.correct}) if q.id in {"q0", "q1", "q2", "q3"} else q
        for q in a
    ]
    with_noise = decide(compare_quality(a, b, a_again=again))
    assert (with_noise.planning_discordance, with_noise.discordance_source) == (0.1, "noise floor")
    summary = render_summary(compare_quality(a, b), verdict)
    assert "discordance 5.0% the stated minimum" in summary


def test_bad_settings_are_user_errors(article: QualityComparison) -> None:
    for margin in (0.0, -1.0, 100.0):
        with pytest.raises(UserError, match="margin"):
            decide(article, margin_points=margin)
    with pytest.raises(UserError, match="power"):
        decide(article, power=1.0)
    with pytest.raises(UserError, match="minimum discordance"):
        decide(article, min_discordance=0.0)


def test_power_formulas() -> None:
    # Textbook: (1.96 + 0.84)² · 0.1 / 0.03² = 872.1 → 873; the allowance grows with fewer families.
    assert items_needed(0.1, 0.03) == 873
    assert z_sum(0.05, 0.8, 1) == pytest.approx(2.8016, abs=1e-4)
    assert z_sum(0.05, 0.8, 3) == pytest.approx(3.160, abs=1e-3)
    assert z_sum(0.05, 0.8, 1) < z_sum(0.05, 0.8, 50) < z_sum(0.05, 0.8, 10) < z_sum(0.05, 0.8, 3)
    # items_needed and detectable_drop are inverses (up to the rounding up).
    for families in (1, 3, 10):
        n = items_needed(0.12, 0.04, families=families)
        assert (
            detectable_drop(n, 0.12, families=families)
            <= 0.04
            < detectable_drop(n - 1, 0.12, families=families)
        )
    # A drop of δ flips at least δ of the questions, so ψ is raised to δ when sizing.
    assert items_needed(0.01, 0.05) == items_needed(0.05, 0.05)
    assert planning_discordance(0.02, 0.04, 0.05) == (0.05, "stated minimum")
    assert planning_discordance(0.08, 0.04, 0.05) == (0.08, "observed")


# --- power by simulation ---------------------------------------------------------------------


def simulate(
    seed: int, n: int, discordance: float, true_drop: float, runs: int, families: int = 3
) -> dict[str, float]:
    """Paired runs with a planted drop: each question is lost with p (ψ + δ)/2, gained with
    (ψ − δ)/2, otherwise both sides agree (right 80% of the time). Returns the share of runs
    with a significant loss (exact McNemar p < 0.05 and the drop's interval above 0, the
    evidence FAIL needs), with FAIL at a 2-point margin, with PASS, and with p < 0.05 either way.
    """
    rng = np.random.default_rng(seed)
    names = [f"family-{i % families}" for i in range(n)]
    p_loss, p_gain = (discordance + true_drop) / 2, (discordance - true_drop) / 2
    counts = {"significant": 0, "FAIL": 0, "PASS": 0, "INCONCLUSIVE": 0, "either way": 0}
    for _ in range(runs):
        u = rng.random(n)
        both = rng.random(n) < 0.8
        loss, gain = u < p_loss, (u >= p_loss) & (u < p_loss + p_gain)
        a = np.where(loss, True, np.where(gain, False, both))
        b = np.where(loss, False, np.where(gain, True, both))
        difference = paired_difference(a.tolist(), b.tolist(), names)
        p = mcnemar_exact_p(difference.losses, difference.gains)
        verdict, _ = judge(difference, p, margin_points=2.0, alpha=0.05)
        counts["significant"] += p < 0.05 and difference.high_points < 0
        counts[verdict] += 1
        counts["either way"] += p < 0.05
    return {key: value / runs for key, value in counts.items()}


def test_a_planted_3_point_loss_is_found_with_the_promised_power() -> None:
    """ψ = 10% (the article's rate), three families, n from our own formula for 80% power."""
    n = items_needed(0.10, 0.03, families=3)
    assert n == 1110
    shares = simulate(seed=1, n=n, discordance=0.10, true_drop=0.03, runs=1000)
    assert 0.72 <= shares["significant"] <= 0.88
    assert shares["FAIL"] <= shares["significant"]
    assert shares["FAIL"] >= 0.7  # FAIL also needs the estimate beyond the 2-point margin
    assert shares["PASS"] <= 0.01
    # The textbook count (no allowance for the family-clustered interval) falls short.
    textbook = simulate(
        seed=1, n=items_needed(0.10, 0.03), discordance=0.10, true_drop=0.03, runs=1000
    )
    assert textbook["significant"] < shares["significant"] - 0.05


def test_no_true_loss_rarely_fails_and_passes_with_the_promised_power() -> None:
    n = items_needed(0.10, 0.02, families=3)  # what an INCONCLUSIVE verdict asks for
    shares = simulate(seed=2, n=n, discordance=0.10, true_drop=0.0, runs=1000)
    assert shares["FAIL"] <= 0.05
    assert shares["either way"] <= 0.05  # the exact test keeps its size
    assert 0.72 <= shares["PASS"] <= 0.88
