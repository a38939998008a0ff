"""A concurrency sweep: 1, 2, 4, … up to --concurrency, stopping at the saturation knee.

The knee is the last level before throughput stops rising by at least RISE_PER_DOUBLING_MIN per
doubling of concurrency, or the last level before the SLO breaks (fewer than SLO_SHARE_MIN of
the requests meet it). A level the client could not measure (invalid) ends the sweep: past it
the figures would be the client's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from sagemeter.loadgen.identity import ServerChanged
from sagemeter.loadgen.result import Knee, LevelSummary, LoadResult
from sagemeter.loadgen.settings import LoadSettings

RISE_PER_DOUBLING_MIN = 0.10
SLO_SHARE_MIN = 0.90

RunLevel = Callable[[LoadSettings], LoadResult]


def sweep_levels(maximum: int) -> list[int]:
    """Powers of two up to `maximum`, and `maximum` itself."""
    levels = [2**k for k in range(int(math.log2(maximum)) + 1)]
    if levels[-1] != maximum:
        levels.append(maximum)
    return levels


def rise_per_doubling(before: LoadResult, after: LoadResult) -> float | None:
    """Throughput growth per doubling of concurrency between two levels."""
    low, high = before.asked_concurrency, after.asked_concurrency
    if not low or not high or high <= low or before.output_tokens_per_second <= 0:
        return None
    ratio = after.output_tokens_per_second / before.output_tokens_per_second
    return float(ratio ** (1 / math.log2(high / low)) - 1)


def level_summary(result: LoadResult, before: LoadResult | None) -> LevelSummary:
    return LevelSummary(
        concurrency=result.asked_concurrency or 0,
        output_tokens_per_second=result.output_tokens_per_second,
        rise_per_doubling=rise_per_doubling(before, result) if before is not None else None,
        ttft_median_s=result.ttft_s.median,
        tpot_median_s=result.tpot_s.median,
        goodput_share=result.goodput.share if result.goodput else None,
        valid=result.valid,
    )


def knee_after(levels: Sequence[LevelSummary], invalid_because: Sequence[str] = ()) -> Knee | None:
    """The knee once the last level of `levels` shows it, else None (keep sweeping)."""
    last = levels[-1]
    previous = levels[-2].concurrency if len(levels) > 1 else None
    if not last.valid:
        why = "; ".join(invalid_because) or "invalid"
        return Knee(
            concurrency=None,
            reason=f"the client could not measure {last.concurrency} at once ({why}); "
            "no knee found below it",
        )
    share = last.goodput_share
    if share is not None and share < SLO_SHARE_MIN:
        return Knee(
            concurrency=previous,
            reason=f"the SLO broke at {last.concurrency} at once: {share * 100:.0f}% of requests "
            f"met it (< {SLO_SHARE_MIN * 100:.0f}%)",
        )
    rise = last.rise_per_doubling
    if rise is not None and rise < RISE_PER_DOUBLING_MIN:
        return Knee(
            concurrency=previous,
            reason=f"throughput rose {rise * 100:.1f}% per doubling from {previous} to "
            f"{last.concurrency} at once (< {RISE_PER_DOUBLING_MIN * 100:.0f}%)",
        )
    return None


def run_sweep(
    settings: LoadSettings, run_level: RunLevel, wall_s: Callable[[], float]
) -> LoadResult:
    """Every level until the knee; the result is the knee level's, with all levels inside."""
    results: list[LoadResult] = []
    summaries: list[LevelSummary] = []
    knee: Knee | None = None
    for level in sweep_levels(settings.concurrency):
        try:
            result = run_level(settings.model_copy(update={"concurrency": level, "sweep": False}))
        except ServerChanged as exc:  # this level may hold both servers' replies: the last
            result = exc.result
            kept = "; the levels before it are the first server's" if results else ""
            knee = Knee(
                concurrency=None, reason=f"the sweep stopped at {level} at once: {exc.reason}{kept}"
            )
        summaries.append(level_summary(result, results[-1] if results else None))
        results.append(result)
        knee = knee or knee_after(summaries, result.invalid_because)
        if knee is not None:
            break
    if knee is None:
        knee = Knee(
            concurrency=None,
            reason=f"throughput still rising at {settings.concurrency} at once: "
            "raise --concurrency",
        )
    chosen = next(
        (r for r in results if knee.concurrency and r.asked_concurrency == knee.concurrency),
        next((r for r in reversed(results) if r.valid), results[-1]),
    )
    return chosen.model_copy(
        update={
            "settings": settings.model_copy(update={"model": chosen.settings.model}),
            "sweep": summaries,
            "knee": knee,
            "levels": results,
            "wall_s": wall_s(),
        }
    )
