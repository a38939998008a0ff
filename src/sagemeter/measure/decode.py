"""Decode rate the article's way: fixed-length replies of two lengths, timed end to end.

rate = (long - short) / (median t(long) - median t(short)) cancels everything a call pays besides
decoding (client start-up, network, prompt processing); the intercept of the same line is that
per-call fixed cost. Beside it, the streaming view: TTFT, inter-token latency, time per output
token, and the engine's own decode rate where it reports one.
"""

from __future__ import annotations

import numpy as np

from sagemeter.clients.base import ChatClient, ChatRequest, RequestRecord
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.bootstrap import interval
from sagemeter.measure.figure_samples import decode_samples, pair_rates, streaming_values
from sagemeter.measure.stats import CpuClock, client_share, median, spread
from sagemeter.results import DecodeDetail

DECODE_PROMPT = "Write a long story about a lighthouse keeper and the sea."


def decode_request_count(repeats: int, warmup: int) -> int:
    return 2 * repeats + warmup


async def measure_decode(
    client: ChatClient,
    *,
    short_tokens: int = 16,
    long_tokens: int = 512,
    repeats: int = 5,
    warmup: int = 1,
    progress: ProgressFn = no_progress,
) -> DecodeDetail:
    """Alternate short and long replies (so slow drift hits both alike) and fit the line."""
    if long_tokens <= short_tokens:
        raise ValueError("long_tokens must exceed short_tokens")
    for _ in range(warmup):
        await client.chat(_request(short_tokens))
        progress(1)
    short: list[RequestRecord] = []
    long: list[RequestRecord] = []
    cpu = CpuClock()
    for _ in range(repeats):
        for length, bucket in ((short_tokens, short), (long_tokens, long)):
            bucket.append(await client.chat(_request(length)))
            progress(1)
    detail = fit_decode(short, long, short_tokens=short_tokens, long_tokens=long_tokens)
    detail.client = client_share(
        len(detail.records), cpu.elapsed(), sum(r.total_s for r in detail.records)
    )
    return detail


def _request(max_tokens: int) -> ChatRequest:
    return ChatRequest(prompt=DECODE_PROMPT, max_tokens=max_tokens, ignore_eos=True, stream=True)


def fit_decode(
    short: list[RequestRecord],
    long: list[RequestRecord],
    *,
    short_tokens: int,
    long_tokens: int,
) -> DecodeDetail:
    """The decode figures from finished records; refuses to compute a rate from bad replies."""
    problems: list[str] = []
    for label, records in (("short", short), ("long", long)):
        failed = [record for record in records if not record.ok]
        if failed:
            problems.append(f"{len(failed)} {label} replies failed: {failed[0].error}")
        short_of_length = [r for r in records if r.ok and not r.honoured_length]
        if short_of_length:
            got = short_of_length[0].completion_tokens
            problems.append(
                f"{len(short_of_length)} {label} replies stopped early ({got} of "
                f"{short_of_length[0].max_tokens} tokens): the server did not honour ignore_eos"
            )
    good_short = [r for r in short if r.ok and r.honoured_length]
    good_long = [r for r in long if r.ok and r.honoured_length]
    detail = DecodeDetail(
        short_tokens=short_tokens,
        long_tokens=long_tokens,
        repeats=max(len(short), len(long)),
        short_times_s=[r.total_s for r in good_short],
        long_times_s=[r.total_s for r in good_long],
        records=[*short, *long],
    )
    if not good_short or not good_long:
        problems.append("no decode rate: too few complete replies of both lengths")
        detail.valid = False
        detail.problems = problems
        return detail
    delta_t = median(detail.long_times_s) - median(detail.short_times_s)
    if delta_t <= 0:
        problems.append("no decode rate: long replies were not slower than short ones")
        detail.valid = False
    else:
        detail.tokens_per_second = (long_tokens - short_tokens) / delta_t
        detail.per_call_fixed_cost_s = median(detail.short_times_s) - short_tokens / (
            detail.tokens_per_second
        )
        tokens = np.array([*(short_tokens for _ in good_short), *(long_tokens for _ in good_long)])
        times = np.array([*detail.short_times_s, *detail.long_times_s])
        slope, _intercept = np.polyfit(tokens, times, 1)
        detail.least_squares_tokens_per_second = float(1.0 / slope) if slope > 0 else None
        detail.tokens_per_second_repeats = spread(pair_rates(detail))
        detail.tokens_per_second_ci95 = interval(decode_samples(detail))
    streaming = streaming_values(good_long)
    detail.engine_tokens_per_second = spread(streaming.engine_rates)
    detail.ttft_s = spread(streaming.ttfts_s)
    detail.inter_token_latency_s = spread(streaming.gaps_s)
    detail.time_per_output_token_s = spread(
        [
            (r.total_s - r.first_token_s) / (r.completion_tokens - 1)
            for r in good_long
            if r.first_token_s is not None and r.completion_tokens and r.completion_tokens > 1
        ]
    )
    detail.problems = problems
    detail.valid = detail.valid and detail.tokens_per_second is not None and not problems
    return detail
