"""What a plan's `[stop]` table does to the time and cost estimate, said in words.

A stopping rule makes the counts a run asks uncertain before it starts, so the estimate counts
the most it may ask (the spend cap is checked against the most a run may cost) and says so:
with `quality = "decided"` every question of the set, with the expected count from a short
simulation at stated assumptions beside it; with `speed` the maximum of decode pairs and of
batches per level; with `max_minutes` each arm's measuring cut at that time.
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field

from sagemeter.evidence.sequential_simulation import simulate
from sagemeter.experiment.plan import Plan
from sagemeter.settings import MeasureSettings

SIMULATED_SEQUENCES = 200  # about 1 s for a 1,000-question set; the mean within a few percent
FLIP_RATE = 0.03  # each way, as in docs/statistics.md's table


class ExpectedQuestions(BaseModel):
    """Questions a sequential run asks per arm, on average, by simulation."""

    model_config = ConfigDict(frozen=True)  # one kept instance answers every call alike

    max_items: int
    block: int
    margin_points: float
    sequences: int = SIMULATED_SEQUENCES
    gain_rate: float = FLIP_RATE
    no_drop: float = Field(description="mean questions asked when the true drop is 0")
    at_margin: float = Field(description="mean questions asked at a true drop of the margin")


@cache
def expected_questions(max_items: int, block: int, margin_points: float) -> ExpectedQuestions:
    """The mean questions the sequential rule asks at no true drop and at the margin (seeded:
    the same plan gives the same figures, so they are worked out once a process: a dry run, the
    run after it and its resume in one MCP server take one simulation, about 1.5 CPU-s on a slow
    core)."""
    means = [
        simulate(drop, margin_points, max_items=max_items, block=block,
                 sequences=SIMULATED_SEQUENCES, gain_rate=FLIP_RATE).mean_items
        for drop in (0.0, margin_points)
    ]  # fmt: skip
    return ExpectedQuestions(
        max_items=max_items,
        block=block,
        margin_points=margin_points,
        no_drop=means[0],
        at_margin=means[1],
    )


def most_pairs(settings: MeasureSettings) -> int:
    """Decode pairs a measurement may ask: the fixed count, or a precision target's maximum."""
    return settings.speed_max_repeats if settings.speed_precision else settings.decode_repeats


def most_batches(settings: MeasureSettings) -> int:
    """Batches per parallel level a measurement may run (as `most_pairs`)."""
    return settings.speed_max_batches if settings.speed_precision else settings.load_batches


def quality_note(plan: Plan, questions: int) -> str | None:
    """`quality = "decided"`: the questions counted are the most a run asks; the expected."""
    if plan.stop.quality != "decided":
        return None
    margin = plan.settings().margin_points
    head = f'stop.quality "decided": {questions:,} questions per arm counted, the whole set'
    if questions <= plan.stop.block:
        return f"{head} (one look, at its end: all of them are asked)"
    try:
        expected = expected_questions(questions, plan.stop.block, margin)
    except ValueError as exc:  # too many looks: the plan's check says so in its own words
        return f"{head} and the most a run asks ({exc})"
    return (
        f"{head} and the most a run asks; expected about {expected.no_drop:,.0f} if the arms "
        f"truly agree and {expected.at_margin:,.0f} at a true drop of the margin "
        f"({margin:g} points) ({expected.sequences} simulated runs, {expected.gain_rate:.0%} "
        "of questions flipping each way)"
    )


def stop_notes(plan: Plan, questions: int) -> list[str]:
    """One sentence per `[stop]` setting the estimate counts at a bound."""
    settings = plan.settings()
    notes = [note] if (note := quality_note(plan, questions)) else []
    if settings.speed_precision is not None:
        notes.append(
            f"stop.speed {settings.speed_precision:g}: decode counted at its maximum of "
            f"{settings.speed_max_repeats} pairs and each parallel level at "
            f"{settings.speed_max_batches} batches (an upper bound: it stops once precise, never "
            f"below {settings.decode_repeats} pairs and {settings.load_batches} batches)"
        )
    if settings.max_minutes is not None:
        each = (
            "the interleaved step, whose arms measure at once,"
            if plan.interleaved
            else "each arm's measuring"
        )
        notes.append(
            f"stop.max_minutes {settings.max_minutes:g}: {each} counted at most "
            f"{settings.max_minutes:g} min (engine start included; the phase in progress ends at "
            "its next request, so a little over)"
        )
    return notes
