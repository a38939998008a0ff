"""The time and cost estimate under a plan's `[stop]` table: the most a run may ask, and said so.

No engine: the arms are URLs nothing listens on (the estimate never sends a request).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sagemeter.evidence.sequential_simulation import simulate
from sagemeter.experiment import parse_plan
from sagemeter.experiment.estimate import estimate, measure_seconds
from sagemeter.experiment.stop_estimate import (
    FLIP_RATE,
    SIMULATED_SEQUENCES,
    expected_questions,
)
from tests import cli_run

MEASURE = """[measure]
short-tokens = 16
long-tokens = 512
repeats = {repeats}
levels = [1, 4]
load-tokens = 256
batches = {batches}
prefill-tokens = "none"
questions = "bank-1000"
margin = 5
"""

ARMS = """
[[arm]]
name = "a"
target = "http://127.0.0.1:9"

[[arm]]
name = "b"
target = "http://127.0.0.1:9"
"""


def _plan(stop: str = "", *, order: str = "ABA", repeats: int = 5, batches: int = 2) -> str:
    head = f'name = "est"\norder = "{order}"\n'
    return head + MEASURE.format(repeats=repeats, batches=batches) + stop + ARMS


def _measure_minutes(text: str) -> list[float]:
    planned = estimate(parse_plan(text), {})
    return [row.minutes for row in planned.steps if row.label.startswith("measure")]


def test_a_precision_target_counts_its_maximum_of_repeats() -> None:
    """The upper bound is the run with the maximum as its fixed count, to the second."""
    stop = "[stop]\nspeed = 0.03\nmax_repeats = 12\nmax_batches = 5\n"
    bounded = parse_plan(_plan(stop))
    fixed = parse_plan(_plan(repeats=12, batches=5))
    tps = bounded.estimate.tokens_per_second
    assert measure_seconds(bounded.settings(), tps) == pytest.approx(
        measure_seconds(fixed.settings(), tps)
    )
    assert measure_seconds(bounded.settings(), tps) > measure_seconds(
        parse_plan(_plan()).settings(), tps
    )
    planned = estimate(bounded, {})
    assert planned.stop_bounds == [
        "stop.speed 0.03: decode counted at its maximum of 12 pairs and each parallel level at 5 "
        "batches (an upper bound: it stops once precise, never below 5 pairs and 2 batches)"
    ]
    assert planned.assumptions.endswith("; " + planned.stop_bounds[0])


def test_max_minutes_caps_each_arms_measuring() -> None:
    uncapped = _measure_minutes(_plan())
    assert all(minutes > 3 for minutes in uncapped)  # 1,000 questions at 50 tokens/s: long
    assert _measure_minutes(_plan("[stop]\nmax_minutes = 3\n")) == [3.0, 3.0, 3.0]  # A, B, A′
    # Interleaved, both arms measure at once: each arm's limit bounds the whole step.
    together = _measure_minutes(_plan(order="interleaved"))
    assert together == [pytest.approx(2 * uncapped[0], abs=0.1)]
    assert _measure_minutes(_plan("[stop]\nmax_minutes = 3\n", order="interleaved")) == [3.0]
    # A limit longer than the measuring changes nothing.
    assert _measure_minutes(_plan("[stop]\nmax_minutes = 100000\n")) == uncapped
    planned = estimate(parse_plan(_plan("[stop]\nmax_minutes = 3\n")), {})
    assert planned.stop_bounds[0].startswith(
        "stop.max_minutes 3: each arm's measuring counted at most 3 min"
    )


@pytest.mark.slow  # simulates sequential runs at two margins, twice: about 4 CPU-s
def test_a_sequential_quality_stop_counts_the_whole_set_and_says_what_to_expect() -> None:
    stop = '[stop]\nquality = "decided"\nblock = 50\n'
    plan = parse_plan(_plan(stop, order="interleaved"))
    planned = estimate(plan, {})
    # The questions counted are the whole set, the most a run asks: the same minutes as without.
    assert [r.minutes for r in planned.steps] == [
        r.minutes for r in estimate(parse_plan(_plan(order="interleaved")), {}).steps
    ]
    (note,) = planned.stop_bounds
    assert note.startswith(
        'stop.quality "decided": 1,000 questions per arm counted, the whole set and the most a '
        "run asks; expected about "
    )
    # The expected counts are the simulation's at the plan's set, block and margin, seeded ...
    agree, at_margin = (
        simulate(drop, 5, max_items=1000, block=50, sequences=SIMULATED_SEQUENCES,
                 gain_rate=FLIP_RATE).mean_items
        for drop in (0, 5)
    )  # fmt: skip
    assert f"expected about {agree:,.0f} if the arms truly agree and {at_margin:,.0f} at a " in note
    assert "(5 points) (200 simulated runs, 3% of questions flipping each way)" in note
    # ... and near docs/statistics.md's 4,000-sequence table (389 and 649 of 1,000).
    assert 389 * 0.9 <= agree <= 389 * 1.1 and 649 * 0.9 <= at_margin <= 649 * 1.1
    # Seeded, so worked out once a process: the plan estimated again says the same from the
    # same kept figures (a dry run and its run in one MCP server simulate once).
    assert estimate(plan, {}).stop_bounds == planned.stop_bounds
    kept = expected_questions(1000, 50, 5.0)
    assert kept is expected_questions(1000, 50, 5.0) and kept.no_drop == agree


def test_a_set_within_one_block_is_asked_whole() -> None:
    text = _plan('[stop]\nquality = "decided"\nblock = 50\n', order="interleaved")
    text = text.replace('questions = "bank-1000"', 'questions = "article-40"')
    (note,) = estimate(parse_plan(text), {}).stop_bounds
    assert note == (
        'stop.quality "decided": 40 questions per arm counted, the whole set (one look, at its '
        "end: all of them are asked)"
    )


def test_run_dry_run_prints_the_bounds(tmp_path: Path) -> None:
    stop = '[stop]\nquality = "decided"\nspeed = 0.03\nmax_minutes = 3\n'
    (tmp_path / "plan.toml").write_text(_plan(stop, order="interleaved"))
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home"), "COLUMNS": "2000"}
    done = cli_run.invoke(["run", "plan.toml", "--dry-run"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    bounds = estimate(parse_plan(_plan(stop, order="interleaved")), {}).stop_bounds
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("assumptions: ")]
    assert line.endswith("; ".join(bounds)) and len(bounds) == 3
    assert "│ 3.0 min │" in done.stdout  # the interleaved step, cut at max_minutes
    assert not (tmp_path / "runs").exists()
