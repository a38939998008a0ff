"""Wilson, Clopper–Pearson and the exact McNemar test against scipy and textbook values."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from sagemeter.evidence.binomial import (
    clopper_pearson_interval,
    mcnemar_exact_p,
    min_flips_for_significance,
    p_text,
    wilson_interval,
    z_two_sided,
)

GRID = [
    (k, n) for n in (1, 2, 5, 13, 40, 100, 977) for k in sorted({0, 1, n // 3, n // 2, n - 1, n})
]


def test_wilson_37_of_40_is_the_articles_80_to_97_percent() -> None:
    low, high = wilson_interval(37, 40)
    assert (round(low, 3), round(high, 3)) == (0.801, 0.974)


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99])
def test_wilson_matches_scipy(level: float) -> None:
    for k, n in GRID:
        ours = wilson_interval(k, n, level)
        theirs = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
        assert ours == pytest.approx((theirs.low, theirs.high), abs=1e-12), (k, n)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_clopper_pearson_matches_scipy(level: float) -> None:
    for k, n in GRID:
        ours = clopper_pearson_interval(k, n, level)
        theirs = binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
        assert ours == pytest.approx((theirs.low, theirs.high), abs=1e-10), (k, n)


def test_clopper_pearson_closed_forms_at_the_edges() -> None:
    # 0/n: the upper bound solves (1 − p)^n = α/2; n/n: the lower bound solves p^n = α/2.
    assert clopper_pearson_interval(0, 40) == pytest.approx((0.0, 1 - 0.025 ** (1 / 40)))
    assert clopper_pearson_interval(40, 40) == pytest.approx((0.025 ** (1 / 40), 1.0))
    assert clopper_pearson_interval(0, 40)[1] == pytest.approx(0.0881, abs=1e-4)


def test_clopper_pearson_is_wider_than_wilson_for_37_of_40() -> None:
    wilson, exact = wilson_interval(37, 40), clopper_pearson_interval(37, 40)
    assert exact[0] < wilson[0] and exact[1] > wilson[1]
    assert exact == pytest.approx((0.7961, 0.9843), abs=1e-4)


def test_no_trials_say_nothing_and_bad_counts_are_refused() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert clopper_pearson_interval(0, 0) == (0.0, 1.0)
    for bad in ((5, 4), (-1, 4), (0, -1)):
        with pytest.raises(ValueError):
            wilson_interval(*bad)
        with pytest.raises(ValueError):
            clopper_pearson_interval(*bad)


def test_mcnemar_textbook_values() -> None:
    assert mcnemar_exact_p(2, 2) == 1.0  # the article: two lost, two gained
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(6, 0) == pytest.approx(2 / 64)
    assert mcnemar_exact_p(1, 9) == pytest.approx(2 * 11 / 1024)  # 2 · (C(10,0) + C(10,1)) / 2^10
    assert mcnemar_exact_p(5, 0) == pytest.approx(2 / 32)  # five flips one way: not below 0.05


def test_mcnemar_matches_scipys_exact_binomial_test() -> None:
    for losses in range(0, 25, 3):
        for gains in range(0, 25, 4):
            if losses + gains == 0:
                continue
            expected = binomtest(losses, losses + gains, 0.5).pvalue
            assert mcnemar_exact_p(losses, gains) == pytest.approx(expected, rel=1e-10)
            assert mcnemar_exact_p(losses, gains) == mcnemar_exact_p(gains, losses)
    assert mcnemar_exact_p(300, 200) == pytest.approx(binomtest(300, 500).pvalue, rel=1e-9)


def test_fewest_flips_that_can_be_significant() -> None:
    assert min_flips_for_significance(0.05) == 6
    assert min_flips_for_significance(0.01) == 8
    assert mcnemar_exact_p(6, 0) < 0.05 <= mcnemar_exact_p(5, 0)


def test_z_and_p_printing() -> None:
    assert z_two_sided(0.95) == pytest.approx(1.959963984540054)
    assert z_two_sided(0.9) == pytest.approx(1.6448536269514722)
    with pytest.raises(ValueError):
        z_two_sided(1.0)
    assert p_text(1.0) == "p = 1.000"
    assert p_text(0.03125) == "p = 0.031"
    assert p_text(1e-6) == "p < 0.001"
