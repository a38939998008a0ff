"""Truth orders the two lengths: a long reply (or prompt) is never faster than a short one.

A stall shorter than the agreement rule's margins (1.5 × the fastest and 0.25 s more,
measure/agreement.py) is not set aside by that rule, yet on a short/long pair only tens of
milliseconds apart it can push the short median past the long one. Before this rule such a run
had no decode (or prefill) rate at all ("long replies were not slower than short ones"); now the
short ones that took as long as the long median are set aside and asked again, and the rate is
the truth's. The truth server's one-time stall is placed so that only this rule can see it.
"""

from __future__ import annotations

import asyncio

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.measure.agreement import SLOW_MARGIN_S, out_of_order
from sagemeter.measure.decode import OUT_OF_ORDER as DECODE_ORDER
from sagemeter.measure.decode import measure_decode
from sagemeter.measure.prefill import OUT_OF_ORDER as PREFILL_ORDER
from sagemeter.measure.prefill import measure_prefill
from sagemeter.results import DecodeDetail, PrefillDetail
from sagemeter.transport.openai import OpenAIChat
from tests.wire import STREAM_HEAD, WireServer, chunk, sse

pytestmark = pytest.mark.alone  # timing against truth: the CPU to itself


def test_out_of_order_names_the_short_times_at_or_past_the_long_median() -> None:
    assert out_of_order([0.02, 0.02], [0.06, 0.06]) == []
    assert out_of_order([0.17, 0.02], [0.06, 0.06]) == [0]  # median 0.095 ≥ 0.06
    assert out_of_order([0.05, 0.02, 0.05], [0.04, 0.06]) == [0, 2]  # median 0.05 ≥ 0.05
    assert out_of_order([0.07, 0.02, 0.02], [0.06, 0.06]) == []  # one slow, the median holds
    assert out_of_order([], [0.06]) == [] and out_of_order([0.1], []) == []


def _asked_again_once(measured_again: list[str], kind: str, marker: str) -> None:
    """The one round of asking again was the order rule's, for the one stalled short one."""
    assert measured_again and measured_again[0].startswith(f"1 short {kind} took up to"), (
        measured_again
    )
    assert marker in measured_again[0]


# Decode: 10 ms to the first token, 2 ms a token. 4 tokens end at 18 ms, 24 at 58 ms: 40 ms
# apart. The first short reply (request 2, after the warm-up) pauses 150 ms after its first
# token: 168 ms, far past the long replies yet 100 ms inside the agreement rule's margin.
DECODE = TruthTiming(ttft_s=0.01, itl_s=0.002)
DECODE_STALL_S = 0.15


async def _decode(url: str) -> DecodeDetail:
    async with OpenAIChat(url) as client:
        return await measure_decode(client, short_tokens=4, long_tokens=24, repeats=2)


def test_a_short_reply_as_slow_as_the_long_ones_is_asked_again() -> None:
    short_s, long_s = DECODE.request_seconds(4), DECODE.request_seconds(24)
    assert DECODE_STALL_S < SLOW_MARGIN_S  # the agreement rule cannot see it
    assert (2 * short_s + DECODE_STALL_S) / 2 >= long_s  # the order rule can
    faults = Faults(stall_once=2, stall_s=DECODE_STALL_S)
    with running_truth_server(DECODE, faults=faults) as url:
        detail = asyncio.run(_decode(url))
    assert detail.valid, detail.problems
    _asked_again_once(detail.measured_again, "replies", DECODE_ORDER)
    assert len([r for r in detail.records if r.max_tokens == 4]) == 3  # the stalled one kept
    assert max(detail.short_times_s) < DECODE_STALL_S  # and not counted
    assert detail.tokens_per_second == pytest.approx(1 / DECODE.itl_s, rel=0.15)


# Prefill: 20 ms, then 50 µs a prompt token. Short prompts (256) reach a first token at 33 ms,
# long ones (2,048) at 122 ms. The first short prompt (request 3, after the two sizing probes)
# pauses 220 ms before its first token: 253 ms, a short median of 143 ms, 30 ms inside the
# agreement rule's margin.
PREFILL = TruthTiming(ttft_s=0.02, itl_s=0.001, prefill_s=50e-6, prefix_cache=True)
PREFILL_STALL_S = 0.22


async def _prefill(url: str) -> PrefillDetail:
    async with OpenAIChat(url) as client:
        return await measure_prefill(client, short_tokens=256, long_tokens=2048, repeats=2)


def test_a_short_prompt_as_slow_as_the_long_ones_is_asked_again() -> None:
    short_s, long_s = PREFILL.first_token_seconds(256), PREFILL.first_token_seconds(2048)
    stalled_s = short_s + PREFILL_STALL_S
    assert stalled_s < short_s + SLOW_MARGIN_S  # the agreement rule cannot see it
    assert (stalled_s + short_s) / 2 >= long_s  # the order rule can
    faults = Faults(stall_once=3, stall_s=PREFILL_STALL_S, stall_after=0)
    with running_truth_server(PREFILL, faults=faults) as url:
        detail = asyncio.run(_prefill(url))
    assert detail.valid, detail.problems
    _asked_again_once(detail.measured_again, "prompts", PREFILL_ORDER)
    stalled = detail.records[0]
    assert stalled.first_token_s is not None and stalled.first_token_s >= PREFILL_STALL_S
    assert len(detail.short_ttft_s) == 2 and max(detail.short_ttft_s) < PREFILL_STALL_S
    assert detail.tokens_per_second == pytest.approx(PREFILL.prefill_tokens_per_second, rel=0.03)


# A server whose short replies are always the slow ones: 60 ms before the first of 4 tokens, no
# wait before the first of 24. No stall ends, so the order stays through every round.
SLOW_SHORT_S = 0.06


async def _short_is_slow(writer: asyncio.StreamWriter, body: dict[str, object]) -> None:
    tokens = body["max_tokens"]
    assert isinstance(tokens, int)
    writer.write(STREAM_HEAD)
    if tokens <= 4:
        await asyncio.sleep(SLOW_SHORT_S)
    for _ in range(tokens):
        writer.write(sse(chunk("tok ")))
    writer.write(sse({**chunk(finish="length"), "usage": {"completion_tokens": tokens}}))
    writer.write(b"data: [DONE]\n\n")


def test_an_order_that_stays_leaves_no_rate_after_the_rounds_not_for_want_of_replies() -> None:
    """Five pairs, then twice all five short replies set aside and asked again: 15 short
    replies, each round's in the budget, and the refusal says the order stayed (a stall?), not
    that replies were missing."""
    with WireServer({"/v1/chat/completions": _short_is_slow}) as server:

        async def decode() -> DecodeDetail:
            async with OpenAIChat(server.url) as client:
                return await measure_decode(client, short_tokens=4, long_tokens=24, repeats=5)

        detail = asyncio.run(decode())
    assert not detail.valid and detail.tokens_per_second is None
    assert len(detail.measured_again) == 2, detail.measured_again
    assert all(why.startswith("5 short replies") for why in detail.measured_again)
    assert len([r for r in detail.records if r.max_tokens == 4]) == 15
    assert detail.problems == [
        "no decode rate: long replies were not slower than short ones, and stayed so when the "
        "short ones were asked again (a stall?)"
    ]
