"""The raw repeats behind each speed figure of a result, for intervals and ratio intervals.

Decode: the short and long reply times (the rate is the article's ratio of medians). A parallel
level: its complete batches, each batch's tokens and wall time kept together; the figure pools
them (ours) or is the median of their rates (the article's method, `load_statistic: median`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sagemeter.evidence.bootstrap import FigureSamples, interval, samples_of
from sagemeter.figures.builtin import (
    DECODE,
    ENGINE_DECODE,
    INTER_TOKEN,
    PREFILL,
    TTFT,
    TTFT_LONG_PROMPT,
)
from sagemeter.figures.builtin_levels import LOAD, LONG_PROMPT, LONG_PROMPT_TTFT_P50
from sagemeter.figures.declaration import level_key
from sagemeter.request_record import RequestRecord
from sagemeter.results import (
    DecodeDetail,
    FigureSummary,
    Interval,
    LoadDetail,
    LoadLevel,
    LongPromptLoad,
    MeasureResult,
    PrefillDetail,
)


def decode_samples(detail: DecodeDetail | None) -> FigureSamples | None:
    """(long - short) / (median t(long) - median t(short)); a resample where long replies are not
    slower counts as an unbounded rate."""
    if detail is None or not detail.short_times_s or not detail.long_times_s:
        return None
    extra_tokens = detail.long_tokens - detail.short_tokens

    def rate(groups: Sequence[np.ndarray]) -> np.ndarray:
        short, long = groups
        delta = np.median(long[..., 0], axis=1) - np.median(short[..., 0], axis=1)
        with np.errstate(divide="ignore"):
            return np.where(delta > 0, extra_tokens / np.where(delta > 0, delta, 1.0), np.inf)

    return FigureSamples(
        groups=(
            np.asarray(detail.short_times_s, dtype=float).reshape(-1, 1),
            np.asarray(detail.long_times_s, dtype=float).reshape(-1, 1),
        ),
        statistic=rate,
    )


def prefill_samples(detail: PrefillDetail | None) -> FigureSamples | None:
    """(median long − median short prompt tokens) / (median TTFT(long) − median TTFT(short)),
    each prompt's own count kept with its TTFT when resampled; a resample where long prompts
    are not slower counts as an unbounded rate."""
    if detail is None or not detail.short_ttft_s or not detail.long_ttft_s:
        return None
    if len(detail.short_prompt_tokens) != len(detail.short_ttft_s):
        return None
    if len(detail.long_prompt_tokens) != len(detail.long_ttft_s):
        return None

    def rate(groups: Sequence[np.ndarray]) -> np.ndarray:
        short, long = groups
        tokens = np.median(long[..., 0], axis=1) - np.median(short[..., 0], axis=1)
        delta = np.median(long[..., 1], axis=1) - np.median(short[..., 1], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(delta > 0, tokens / np.where(delta > 0, delta, 1.0), np.inf)

    def group(tokens: list[int], ttfts: list[float]) -> np.ndarray:
        return np.column_stack([np.asarray(tokens, float), np.asarray(ttfts, float)])

    return FigureSamples(
        groups=(
            group(detail.short_prompt_tokens, detail.short_ttft_s),
            group(detail.long_prompt_tokens, detail.long_ttft_s),
        ),
        statistic=rate,
    )


def pair_rates(detail: DecodeDetail) -> list[float]:
    """The rate from each (short, long) pair alone: the spread of the repeats."""
    extra_tokens = detail.long_tokens - detail.short_tokens
    return [
        extra_tokens / (long - short)
        for short, long in zip(detail.short_times_s, detail.long_times_s, strict=False)
        if long > short
    ]


def level_samples(level: LoadLevel | None, statistic: str = "pooled") -> FigureSamples | None:
    """The level's figure over its complete batches, batches resampled whole: all tokens / all
    wall time (`pooled`), or the median of the batches' own rates (`median`)."""
    if level is None or not level.complete_batches:
        return None
    if statistic == "median":
        return samples_of([batch.tokens_per_second for batch in level.complete_batches])

    def pooled(groups: Sequence[np.ndarray]) -> np.ndarray:
        batches = groups[0]
        wall = batches[..., 1].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(wall > 0, batches[..., 0].sum(axis=1) / wall, np.nan)

    rows = [(batch.output_tokens, batch.wall_s) for batch in level.complete_batches]
    return FigureSamples(groups=(np.asarray(rows, dtype=float),), statistic=pooled)


def speed_samples(result: MeasureResult) -> dict[str, FigureSamples]:
    """Every speed figure of `result` that has its raw repeats, keyed like the comparison rows."""
    detail = result.detail
    if detail is None:
        return {}
    found: dict[str, FigureSamples] = {}
    if result.decode_tokens_per_second is not None and (decode := decode_samples(detail.decode)):
        found[DECODE.key] = decode
    if detail.decode is not None:
        found.update(_streaming_samples(detail.decode))
    prefill = detail.prefill
    if result.prefill_tokens_per_second is not None and (samples := prefill_samples(prefill)):
        found[PREFILL.key] = samples
    if result.ttft_long_prompt_ms is not None and prefill is not None and prefill.long_ttft_s:
        found[TTFT_LONG_PROMPT.key] = samples_of([t * 1000.0 for t in prefill.long_ttft_s])
    if detail.load is not None:
        statistic = str(detail.settings.get("load_statistic", "pooled"))
        for level in detail.load.levels:
            samples = level_samples(level, statistic)
            if level.tokens_per_second is not None and samples:
                found[level_key(LOAD, level.concurrency)] = samples
    if detail.long_prompt_load is not None:
        statistic = str(detail.settings.get("load_statistic", "pooled"))
        found.update(long_prompt_samples(detail.long_prompt_load, statistic))
    return found


def long_prompt_samples(long_load: LongPromptLoad, statistic: str) -> dict[str, FigureSamples]:
    """Each long-prompt level's throughput (its batches resampled whole) and median TTFT."""
    found: dict[str, FigureSamples] = {}
    for level in long_load.levels:
        if level.tokens_per_second is None:
            continue
        if samples := level_samples(level, statistic):
            found[level_key(LONG_PROMPT, level.concurrency)] = samples
        if ttfts := level.counted_ttft_s:
            found[level_key(LONG_PROMPT_TTFT_P50, level.concurrency)] = samples_of(
                [t * 1000.0 for t in ttfts]
            )
    return found


class StreamingValues(NamedTuple):
    """The streaming view of complete long replies: the values behind their spreads."""

    engine_rates: list[float]  # the engine's own decode rate (llama.cpp `timings`)
    ttfts_s: list[float]
    gaps_s: list[float]  # every inter-token gap


def streaming_values(long: list[RequestRecord]) -> StreamingValues:
    """One place that reads them, for the result's spreads and the comparison's intervals."""
    return StreamingValues(
        engine_rates=[r.engine_rate for r in long if r.engine_rate is not None],
        ttfts_s=[r.first_token_s for r in long if r.first_token_s is not None],
        gaps_s=[gap for r in long for gap in r.gaps_s()],
    )


def complete_long_replies(detail: DecodeDetail) -> list[RequestRecord]:
    """The long replies that finished with every token asked: the ones the figures use."""
    return [r for r in detail.records if r.honoured_length and r.max_tokens == detail.long_tokens]


def _streaming_samples(decode: DecodeDetail) -> dict[str, FigureSamples]:
    """Medians of the long replies' engine rate, TTFT and gaps (the comparison's streaming rows)."""
    streaming = streaming_values(complete_long_replies(decode))
    values = {
        ENGINE_DECODE.key: streaming.engine_rates,
        TTFT.key: [ttft * 1000.0 for ttft in streaming.ttfts_s],
        INTER_TOKEN.key: [gap * 1000.0 for gap in streaming.gaps_s],
    }
    return {key: samples_of(found) for key, found in values.items() if found}


def level_figure(level: LoadLevel, statistic: str = "pooled") -> float | None:
    """The level's throughput from its complete batches, by the method's statistic."""
    complete = level.complete_batches
    if not complete:
        return None
    if statistic == "median":
        return float(np.median([batch.tokens_per_second for batch in complete]))
    wall = sum(batch.wall_s for batch in complete)
    return sum(batch.output_tokens for batch in complete) / wall if wall > 0 else None


def speed_summaries(
    decode: DecodeDetail | None,
    load: LoadDetail | None,
    statistic: str = "pooled",
    prefill: PrefillDetail | None = None,
    long_load: LongPromptLoad | None = None,
) -> dict[str, FigureSummary]:
    """The top-level `intervals`: each speed figure, its repeats' spread, its interval."""
    summaries: dict[str, FigureSummary] = {}
    if decode is not None and decode.valid and decode.tokens_per_second is not None:
        repeats = decode.tokens_per_second_repeats
        summaries[DECODE.key] = FigureSummary(
            value=round(decode.tokens_per_second, 3),
            repeats=min(len(decode.short_times_s), len(decode.long_times_s)),
            min=_rounded(repeats.min if repeats else None),
            median=_rounded(repeats.median if repeats else None),
            max=_rounded(repeats.max if repeats else None),
            ci95=_rounded_interval(
                decode.tokens_per_second_ci95 or interval(decode_samples(decode))
            ),
        )
    if prefill is not None and prefill.valid and prefill.tokens_per_second is not None:
        summaries[PREFILL.key] = FigureSummary(
            value=round(prefill.tokens_per_second, 3),
            repeats=min(len(prefill.short_ttft_s), len(prefill.long_ttft_s)),
            ci95=_rounded_interval(prefill.tokens_per_second_ci95),
        )
    levels = [
        (level_key(LOAD, lv.concurrency), lv) for lv in (load.levels if load is not None else [])
    ] + [
        (level_key(LONG_PROMPT, lv.concurrency), lv)
        for lv in (long_load.levels if long_load is not None else [])
    ]
    for key, level in levels:
        if level.tokens_per_second is None:
            continue
        rates = [batch.tokens_per_second for batch in level.complete_batches]
        summaries[key] = FigureSummary(
            value=round(level.tokens_per_second, 3),
            repeats=len(rates),
            min=_rounded(min(rates)),
            median=_rounded(float(np.median(rates))),
            max=_rounded(max(rates)),
            ci95=_rounded_interval(
                level.tokens_per_second_ci95 or interval(level_samples(level, statistic))
            ),
        )
    return summaries


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _rounded_interval(found: Interval | None) -> Interval | None:
    if found is None:
        return None
    return found.model_copy(update={"low": _rounded(found.low), "high": _rounded(found.high)})
