"""Decode rate the article's way: fixed-length replies of two lengths, timed end to end.

rate = (long - short) / (median t(long) - median t(short)) cancels everything a call pays besides
decoding (client start-up, network, prompt processing); the intercept of the same line is that
per-call fixed cost. Beside it, the streaming view: TTFT, inter-token latency, time per output
token, and the engine's own decode rate where it reports one.

A reply that failed (after the wire's own retries) or stopped short is never a point of the
line: the pair is asked again, up to `repeats` extra times, so the figure rests on `repeats`
good replies of each length or is absent with its reason.
"""

from __future__ import annotations

import numpy as np

from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.bootstrap import interval
from sagemeter.measure.figure_samples import decode_samples, pair_rates, streaming_values
from sagemeter.measure.stats import CpuClock, client_share, median, spread
from sagemeter.results import ClientShare, DecodeDetail
from sagemeter.transport.chat import ChatClient, ChatRequest
from sagemeter.transport.health import WORKER_CPU_SHARE_MAX, pct
from sagemeter.transport.record import RequestRecord

DECODE_PROMPT = "Write a long story about a lighthouse keeper and the sea."
# A good reply this many times slower than its length's median (and a second more) is named in
# the warnings: the median does not move, but the server hiccupped.
SLOW_OUTLIER_FACTOR = 3.0


def decode_request_count(repeats: int, warmup: int) -> int:
    return 2 * repeats + warmup


def _good(record: RequestRecord) -> bool:
    return record.ok and record.honoured_length


async def measure_decode(
    client: ChatClient,
    *,
    short_tokens: int = 16,
    long_tokens: int = 512,
    repeats: int = 5,
    warmup: int = 1,
    prompt: str | None = None,
    progress: ProgressFn = no_progress,
) -> DecodeDetail:
    """Alternate short and long replies (so slow drift hits both alike) and fit the line."""
    prompt = prompt or DECODE_PROMPT
    if long_tokens <= short_tokens:
        raise ValueError("long_tokens must exceed short_tokens")
    for _ in range(warmup):
        await client.chat(_request(prompt, short_tokens))
        progress(1)
    short: list[RequestRecord] = []
    long: list[RequestRecord] = []
    cpu = CpuClock()
    pairs = 0
    while pairs < 2 * repeats:
        good_short = sum(_good(r) for r in short)
        good_long = sum(_good(r) for r in long)
        if good_short >= repeats and good_long >= repeats:
            break
        if any(r.ok and not r.honoured_length for r in (*short, *long)):
            break  # the server stops early: asking again cannot make the rate
        pairs += 1
        wanted = ((short_tokens, short, good_short), (long_tokens, long, good_long))
        for length, bucket, good in wanted:
            if good < repeats:
                bucket.append(await client.chat(_request(prompt, length)))
                progress(1)
    records = [*short, *long]
    share = client_share(len(records), cpu.elapsed(), sum(r.total_s for r in records))
    return fit_decode(
        short,
        long,
        short_tokens=short_tokens,
        long_tokens=long_tokens,
        repeats=repeats,
        client=share,
    )


def _request(prompt: str, max_tokens: int) -> ChatRequest:
    return ChatRequest(prompt=prompt, max_tokens=max_tokens, ignore_eos=True, stream=True)


def _problems(label: str, records: list[RequestRecord]) -> list[str]:
    problems = []
    failed = [record for record in records if not record.ok]
    if failed:
        problems.append(f"{len(failed)} {label} replies failed: {failed[0].error}")
    short_of_length = [r for r in records if r.ok and not r.honoured_length]
    if short_of_length:
        first = short_of_length[0]
        problems.append(
            f"{len(short_of_length)} {label} replies stopped early ({first.tokens} of "
            f"{first.max_tokens} tokens): the server did not honour ignore_eos"
        )
    return problems


def _slow_outliers(label: str, times: list[float]) -> list[str]:
    if len(times) < 3:
        return []
    middle = median(times)
    slow = [t for t in times if t > SLOW_OUTLIER_FACTOR * middle and t > middle + 1.0]
    if not slow:
        return []
    return [
        f"{len(slow)} {label} replies took up to {max(slow):.2f} s against a median of "
        f"{middle:.3f} s: the server paused (the rate uses medians, which it does not move)"
    ]


def fit_decode(
    short: list[RequestRecord],
    long: list[RequestRecord],
    *,
    short_tokens: int,
    long_tokens: int,
    repeats: int | None = None,
    client: ClientShare | None = None,
) -> DecodeDetail:
    """The decode figures from finished records; refuses to compute a rate from bad replies.

    Failed or short replies are kept as records but never enter the figures; with `repeats`, the
    rate needs that many good replies of each length. `client` is the measuring client's own
    share of the time it timed: a saturated client may have set the pace, so there is no rate.
    """
    notes = [*_problems("short", short), *_problems("long", long)]
    good_short = [r for r in short if _good(r)]
    good_long = [r for r in long if _good(r)]
    needed = repeats if repeats is not None else max(len(short), len(long))
    detail = DecodeDetail(
        short_tokens=short_tokens,
        long_tokens=long_tokens,
        repeats=needed,
        short_times_s=[r.total_s for r in good_short],
        long_times_s=[r.total_s for r in good_long],
        records=[*short, *long],
    )
    blocking = client_bound(client)
    detail.client = client
    if len(good_short) < needed or len(good_long) < needed:
        blocking.append(
            f"no decode rate: {len(good_short)} short and {len(good_long)} long replies were "
            f"complete, {needed} of each are needed"
        )
    else:
        delta_t = median(detail.long_times_s) - median(detail.short_times_s)
        if delta_t <= 0:
            blocking.append("no decode rate: long replies were not slower than short ones")
        else:
            detail.tokens_per_second = (long_tokens - short_tokens) / delta_t
            fixed = median(detail.short_times_s) - short_tokens / detail.tokens_per_second
            if fixed >= 0:
                detail.per_call_fixed_cost_s = fixed
            else:
                # No call costs less than nothing: each token took longer in the long replies
                # (attention over a longer context), so the two-length line cannot part a
                # fixed cost from the tokens. The rate (the slope) still stands.
                notes.append(
                    f"no per-call fixed cost: the two lengths put it at {fixed * 1000:.1f} ms, "
                    "below zero (tokens grew slower with the reply's length)"
                )
            tokens = np.array(
                [*(short_tokens for _ in good_short), *(long_tokens for _ in good_long)]
            )
            times = np.array([*detail.short_times_s, *detail.long_times_s])
            slope, _intercept = np.polyfit(tokens, times, 1)
            detail.least_squares_tokens_per_second = float(1.0 / slope) if slope > 0 else None
            detail.tokens_per_second_repeats = spread(pair_rates(detail))
            detail.tokens_per_second_ci95 = interval(decode_samples(detail))
    streaming = streaming_values(good_long)
    detail.reasoning_events = sum(r.reasoning_events for r in good_long)
    detail.engine_tokens_per_second = spread(streaming.engine_rates)
    detail.ttft_s = spread(streaming.ttfts_s)
    detail.inter_token_latency_s = spread(streaming.gaps_s)
    detail.time_per_output_token_s = spread(
        [
            (r.total_s - r.first_token_s) / (r.tokens - 1)
            for r in good_long
            if r.first_token_s is not None and r.tokens > 1
        ]
    )
    notes += _slow_outliers("short", detail.short_times_s)
    notes += _slow_outliers("long", detail.long_times_s)
    detail.problems = [*blocking, *notes]
    detail.valid = not blocking and detail.tokens_per_second is not None
    if not detail.valid:
        detail.tokens_per_second = detail.per_call_fixed_cost_s = None
        detail.least_squares_tokens_per_second = None
        detail.tokens_per_second_repeats = detail.tokens_per_second_ci95 = None
    return detail


def client_bound(client: ClientShare | None) -> list[str]:
    """Why the client, not the server, may have set the decode pace; empty when it kept up.

    The rule a parallel batch's worker process is judged by (transport/health.py): its event
    loop busy more than WORKER_CPU_SHARE_MAX of the time it timed was saturated, and every
    timestamp it took may hold its own delay.
    """
    if client is None:
        return []
    busy = client.loop_share if client.loop_share is not None else client.share
    if busy <= WORKER_CPU_SHARE_MAX:
        return []
    return [
        f"no decode rate: the client may have set the pace: its event loop was busy {pct(busy)} "
        f"of the wall time it timed (> {pct(WORKER_CPU_SHARE_MAX)}, WORKER_CPU_SHARE_MAX)"
    ]
