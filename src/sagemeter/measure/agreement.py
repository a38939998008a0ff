"""When repeats of one figure disagree: the rule that sends a stalled batch or reply again.

A server that stalls once (a GC pause, a swap, a neighbour's burst) makes one repeat far slower
than its twins. A median of five hides it; a figure of one or two batches becomes it. So a
repeat far slower than the fastest of its kind is set aside and measured again (a bounded number
of times); one that stays leaves no figure, with its reason. The same holds between figures that
truth orders: more requests at once never make fewer tokens per second by a wide margin, nor
each stream faster by a wide margin, one at a time runs near the decode rate, and a short reply
(or prompt) is never slower than the long ones.

The margins are wide on purpose (a busy host's jitter is not a stall): a repeat disagrees when
it took `SLOW_FACTOR` times the fastest and `SLOW_MARGIN_S` more. The order of the two lengths
has no margin: where they end only milliseconds apart, jitter that inverts their medians is asked
again like a stall (a bounded number of rounds), since no figure can come from that order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SLOW_FACTOR = 1.5
SLOW_MARGIN_S = 0.25
# Extra rounds (each running again what was set aside) per decode length or parallel level.
AGAIN_LIMIT = 2
# A level below this share of a smaller level's figure, or one at a time below this share of
# what the decode rate and per-call cost predict, is far outside any noise.
LEVEL_FLOOR_SHARE = 0.5


def too_slow(times_s: Sequence[float]) -> list[int]:
    """Indexes of the times that disagree with the fastest (empty with fewer than two)."""
    if len(times_s) < 2:
        return []
    fastest = min(times_s)
    return [
        index
        for index, time_s in enumerate(times_s)
        if time_s > SLOW_FACTOR * fastest and time_s > fastest + SLOW_MARGIN_S
    ]


def out_of_order(short_s: Sequence[float], long_s: Sequence[float]) -> list[int]:
    """Indexes of the short times no faster than the long times' median, when the short median
    is not below it (empty otherwise, or with either side empty). Truth orders the two: more
    tokens never take less time, so those short ones stalled, however briefly."""
    if not short_s or not long_s:
        return []
    long_median = float(np.median(long_s))
    if float(np.median(short_s)) < long_median:
        return []
    return [index for index, time_s in enumerate(short_s) if time_s >= long_median]


def order_stayed(measured_again: Sequence[str], marker: str) -> str:
    """What a "not slower" refusal adds when the short ones were set aside for the order
    (their reason holds `marker`) and asked again, and the order stayed: then it is called a
    stall; seen without asking again, it is not."""
    if not any(marker in why for why in measured_again):
        return ""
    return ", and stayed so when the short ones were asked again (a stall?)"


def one_at_once_expected(
    decode_rate: float | None, fixed_cost_s: float | None, tokens: int
) -> float | None:
    """Tokens per second one request at a time should make: tokens / (fixed + tokens / rate)."""
    if decode_rate is None or decode_rate <= 0:
        return None
    return tokens / ((fixed_cost_s or 0.0) + tokens / decode_rate)


def level_doubt(
    concurrency: int,
    figure: float | None,
    smaller: Sequence[tuple[int, float]],
    one_expected: float | None,
) -> str | None:
    """Why a level's figure cannot be right (None when it can): far below a smaller level's
    figure, or (one at a time) far below what the decode rate predicts."""
    if figure is None:
        return None
    if concurrency == 1 and one_expected is not None and figure < LEVEL_FLOOR_SHARE * one_expected:
        return (
            f"1 at once made {figure:.1f} tokens/s, under half the {one_expected:.1f} the "
            "decode rate predicts (a stall?)"
        )
    for other, other_figure in smaller:
        if other < concurrency and figure < LEVEL_FLOOR_SHARE * other_figure:
            return (
                f"{concurrency} at once made {figure:.1f} tokens/s, under half of {other} at "
                f"once ({other_figure:.1f}) (a stall?)"
            )
    return None


def level_doubt_from_above(
    concurrency: int, figure: float | None, larger: Sequence[tuple[int, float]]
) -> str | None:
    """Why a level's figure cannot be right, judged by the levels above it: more requests at
    once never make each stream faster by a wide margin, so a level whose figure is under half
    of what a larger level makes per stream, times its own streams, was stalled (a level measured
    before the decode rate could vouch for it, or with no decode rate at all)."""
    if figure is None:
        return None
    for other, other_figure in larger:
        implied = other_figure * concurrency / other
        if other > concurrency and figure < LEVEL_FLOOR_SHARE * implied:
            return (
                f"{concurrency} at once made {figure:.1f} tokens/s, under half the "
                f"{implied:.1f} that {other} at once ({other_figure:.1f}) makes per "
                f"{concurrency} stream{'s' if concurrency > 1 else ''} (a stall?)"
            )
    return None
