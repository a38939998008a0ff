"""The sequential quality verdict: its boundaries against published values, its error rates by a
small simulation, and its looks."""

from __future__ import annotations

import pytest

from sagemeter.evidence.sequential import (
    ONE_SIDED_ALPHA,
    SequentialPlan,
    boundaries,
    look_at,
    planned_looks,
    spent,
)
from sagemeter.evidence.sequential_simulation import simulate


def test_boundaries_match_the_published_obrien_fleming_type_design() -> None:
    # Lan-DeMets O'Brien-Fleming-type spending, 5 equal looks, 2.5% one-sided (Jennison &
    # Turnbull 2000, table 7.6; gsDesign's sfLDOF gives the same to three decimals).
    published = (4.877, 3.357, 2.680, 2.290, 2.031)
    found = boundaries((0.2, 0.4, 0.6, 0.8, 1.0))
    assert found == pytest.approx(published, abs=0.002)
    assert boundaries((1.0,)) == pytest.approx((1.96,), abs=0.001)  # one look: the fixed test
    assert spent(1.0) == pytest.approx(ONE_SIDED_ALPHA)
    assert spent(0.5) < ONE_SIDED_ALPHA / 5  # little is spent early


def test_looks_are_planned_every_block_and_at_the_end() -> None:
    assert planned_looks(120, 50) == [50, 100, 120]
    with pytest.raises(ValueError, match="at most 200"):
        planned_looks(10_000, 10)


def test_an_undecided_look_goes_on_and_the_last_one_stops() -> None:
    plan = SequentialPlan.of(100, 50)
    a = [True] * 50
    b = [True] * 48 + [False] * 2
    families = ["x"] * 50
    first = look_at(plan, 0, a, b, families, 5.0)
    assert first.verdict == "INCONCLUSIVE" and not first.stop and first.level > 0.95
    last = look_at(plan, 1, a * 2, b * 2, families * 2, 5.0)
    assert "99.7% interval" in first.reason  # the look's own level, stricter than 95%
    assert last.stop and last.look == 2 and last.items == 100 and last.verdict == "INCONCLUSIVE"
    assert last.stopping_reason.startswith("the set ran out at look 2 without a verdict")
    lopsided = look_at(plan, 0, a, [True] * 40 + [False] * 10, families, 5.0)
    assert lopsided.verdict == "FAIL" and lopsided.stop
    assert lopsided.stopping_reason.startswith("FAIL at look 1 of 2: the candidate answers 20.0")


@pytest.mark.parametrize(("drop", "error"), [(0.0, "FAIL"), (5.0, "PASS")])
def test_the_error_rates_hold_in_a_small_simulation(drop: float, error: str) -> None:
    """500 sequences of 400 questions, 8 looks: the true error rate is at most 2.5%; the chance
    of seeing more than 5.5% at that rate is under 1 in 10,000 (binomial), so this fails only
    when the rule is wrong."""
    row = simulate(drop, 5.0, max_items=400, block=50, sequences=500, gain_rate=0.03, seed=7)
    assert sum(row.sequential.values()) == 500
    assert row.sequential[error] / 500 <= 0.055
    # Not a rule that never decides: with no drop it passes early and often, with a drop of
    # the margin it fails (a FAIL there is no error) more often than the fixed count does.
    if drop == 0.0:
        assert row.sequential["PASS"] > 300 and row.saved > 0.2
    else:
        assert row.sequential["FAIL"] > row.fixed["FAIL"] * 0.9


def test_a_looks_level_is_written_with_the_digits_that_tell_it_from_100() -> None:
    from sagemeter.evidence.verdict import level_text

    assert [level_text(x) for x in (0.95, 0.9509, 0.997, 0.99998)] == [
        "95%",
        "95.1%",
        "99.7%",
        "99.998%",
    ]
    assert level_text(1 - 1e-12) == "> 99.9999%"
