"""Decode rate the article's way: fixed-length replies of two lengths, timed end to end.

rate = (long - short) / (median t(long) - median t(short)) cancels everything a call pays besides
decoding (client start-up, network, prompt processing); the intercept of the same line is that
per-call fixed cost. Beside it, the streaming view: TTFT, inter-token latency, time per output
token, and the engine's own decode rate where it reports one.

A reply that failed (after the wire's own retries) or stopped short is never a point of the
line: the pair is asked again, up to `repeats` extra times, so the figure rests on `repeats`
good replies of each length or is absent with its reason. A good reply far slower than the
fastest of its length (a stall, measure/agreement.py) is set aside and its length asked again, up
to AGAIN_LIMIT rounds; if they still disagree there is no rate. Truth orders the two lengths too:
a long reply is never faster than a short one, so when the short replies' median is not below
the long ones', the short replies that took as long as that median stalled: they are set aside
and asked again the same way (a stall shorter than the margins above still erases a gap of a few
tokens).
"""

from __future__ import annotations

import numpy as np

from sagemeter.evidence.bootstrap import interval
from sagemeter.evidence.distribution import spread
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.agreement import AGAIN_LIMIT, order_stayed, out_of_order, too_slow
from sagemeter.measure.deadline import Deadline
from sagemeter.measure.figure_samples import decode_samples, pair_rates, streaming_values
from sagemeter.measure.precision import counted_half_width, precision_stop
from sagemeter.measure.stats import CpuClock, client_share, median
from sagemeter.request_record import RequestRecord
from sagemeter.results import ClientShare, DecodeDetail
from sagemeter.transport.chat import ChatClient, ChatRequest
from sagemeter.transport.health import WORKER_CPU_SHARE_MAX, pct

DECODE_PROMPT = "Write a long story about a lighthouse keeper and the sea."


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
    precision: float | None = None,
    max_repeats: int | None = None,
    deadline: Deadline | None = None,
) -> DecodeDetail:
    """Alternate short and long replies (so slow drift hits both alike) and fit the line.

    With `precision` (0.03: 3%), pairs go on past `repeats` until the rate's 95% interval's
    half-width is within that share of the rate, or `max_repeats` pairs are in; the detail's
    `precision` says which ended it. Past `deadline` no pair is begun (the detail says so)."""
    prompt = prompt or DECODE_PROMPT
    least = repeats
    if long_tokens <= short_tokens:
        raise ValueError("long_tokens must exceed short_tokens")
    for _ in range(warmup):
        await client.chat(_request(prompt, short_tokens))
        progress(1)
    short: list[RequestRecord] = []
    long: list[RequestRecord] = []
    aside: list[RequestRecord] = []
    again: list[str] = []
    cpu = CpuClock()
    pairs = rounds = extra = 0  # extra: replies set aside, each owed one more pair
    cut: str | None = None
    while pairs < 2 * repeats + AGAIN_LIMIT + extra:
        counted_short = _counted(short, aside)
        counted_long = _counted(long, aside)
        if len(counted_short) >= repeats and len(counted_long) >= repeats:
            slow = _disagreeing("short", counted_short) + _disagreeing("long", counted_long)
            slow = slow or _out_of_order(counted_short, counted_long)
            if slow and rounds < AGAIN_LIMIT:
                rounds += 1
                for records, why in slow:
                    aside.extend(records)
                    again.append(why)
                    extra += len(records)
                continue
            if slow or not _wants_more(
                counted_short, counted_long, short_tokens, long_tokens, precision, max_repeats
            ):
                break
            repeats += 1  # not precise enough yet: one more pair
            continue
        if any(r.ok and not r.honoured_length for r in (*short, *long)):
            break  # the server stops early: asking again cannot make the rate
        if deadline is not None and (cut := deadline.passed("decode")):
            break
        pairs += 1
        wanted = ((short_tokens, short, counted_short), (long_tokens, long, counted_long))
        for length, bucket, counted in wanted:
            if len(counted) < repeats:
                bucket.append(await client.chat(_request(prompt, length)))
                progress(1)
    records = [*short, *long]
    share = client_share(len(records), cpu.elapsed(), sum(r.total_s for r in records))
    detail = fit_decode(
        short,
        long,
        short_tokens=short_tokens,
        long_tokens=long_tokens,
        repeats=repeats,
        client=share,
        aside=aside,
        measured_again=again,
    )
    if cut is not None:  # first, so a rate missing for it names it
        detail.problems.insert(0, f"cut short: {cut}")
    if precision is not None:
        detail.precision = precision_stop(
            detail.tokens_per_second, detail.tokens_per_second_ci95, precision, repeats,
            least, max_repeats or repeats, "decode rate",
            _decode_span_s(detail.tokens_per_second, short_tokens, long_tokens),
        )  # fmt: skip
    return detail


def _wants_more(
    short: list[RequestRecord],
    long: list[RequestRecord],
    short_tokens: int,
    long_tokens: int,
    precision: float | None,
    max_repeats: int | None,
) -> bool:
    """Whether another pair is due: a precision is set, not reached by the rate's 95%
    interval on the replies so far, and the maximum of pairs is not in yet."""
    if precision is None or len(short) >= (max_repeats or 0):
        return False
    fitted = fit_decode(short, long, short_tokens=short_tokens, long_tokens=long_tokens)
    rate = fitted.tokens_per_second
    span = _decode_span_s(rate, short_tokens, long_tokens)
    return counted_half_width(rate, fitted.tokens_per_second_ci95, span) > precision


def _decode_span_s(rate: float | None, short_tokens: int, long_tokens: int) -> float | None:
    """The time the decode rate is timed on: the long replies' extra tokens at that rate."""
    return (long_tokens - short_tokens) / rate if rate else None


def _counted(bucket: list[RequestRecord], aside: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in bucket if _good(r) and not any(r is other for other in aside)]


def _disagreeing(label: str, records: list[RequestRecord]) -> list[tuple[list[RequestRecord], str]]:
    """The replies far slower than the fastest of their length, and why (empty if none)."""
    slow = [records[index] for index in too_slow([r.total_s for r in records])]
    if not slow:
        return []
    fastest = min(r.total_s for r in records)
    return [
        (
            slow,
            f"{len(slow)} {label} replies took up to {max(r.total_s for r in slow):.2f} s "
            f"against {fastest:.2f} s for the fastest (a stall?)",
        )
    ]


# How a reason for setting short replies aside by the lengths' order reads (`measured_again`).
OUT_OF_ORDER = "no faster than the long replies' median"


def _out_of_order(
    short: list[RequestRecord], long: list[RequestRecord]
) -> list[tuple[list[RequestRecord], str]]:
    """The short replies no faster than the long replies' median, when the short median is not
    below it, and why (empty otherwise)."""
    late = [short[i] for i in out_of_order([r.total_s for r in short], [r.total_s for r in long])]
    if not late:
        return []
    long_median = median([r.total_s for r in long])
    return [
        (
            late,
            f"{len(late)} short replies took up to {max(r.total_s for r in late):.2f} s, "
            f"{OUT_OF_ORDER} of {long_median:.2f} s (a stall?)",
        )
    ]


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


def fit_decode(
    short: list[RequestRecord],
    long: list[RequestRecord],
    *,
    short_tokens: int,
    long_tokens: int,
    repeats: int | None = None,
    client: ClientShare | None = None,
    aside: list[RequestRecord] | None = None,
    measured_again: list[str] | None = None,
) -> DecodeDetail:
    """The decode figures from finished records; refuses to compute a rate from bad replies.

    Failed or short replies are kept as records but never enter the figures; with `repeats`, the
    rate needs that many good replies of each length. `client` is the measuring client's own
    share of the time it timed: a saturated client may have set the pace, so there is no rate.
    `aside`: replies set aside as stalled (kept, not counted); replies of one length that still
    disagree (measure/agreement.py) leave no rate.
    """
    notes = [*_problems("short", short), *_problems("long", long)]
    good_short = _counted(short, aside or [])
    good_long = _counted(long, aside or [])
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
    detail.measured_again = list(measured_again or [])
    for label, counted in (("short", good_short), ("long", good_long)):
        for _records, why in _disagreeing(label, counted):
            blocking.append(f"no decode rate: replies of one length disagree: {why}")
    if len(good_short) < needed or len(good_long) < needed:
        blocking.append(
            f"no decode rate: {len(good_short)} short and {len(good_long)} long replies were "
            f"complete, {needed} of each are needed"
        )
    else:
        delta_t = median(detail.long_times_s) - median(detail.short_times_s)
        if delta_t <= 0:
            blocking.append(
                "no decode rate: long replies were not slower than short ones"
                + order_stayed(detail.measured_again, OUT_OF_ORDER)
            )
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
