"""The known-truth server's prompt side: its token count, its prefill time, its prefix cache.

Timing is checked from below (never early) and loosely from above (a shared machine may be
late, but not by a whole prompt's prefill).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.calibrate.prompts import BLOCK_TOKENS, TEMPLATE_TOKENS, PrefixCache, prompt_tokens

TIMING = TruthTiming(ttft_s=0.02, itl_s=0.001, prefill_s=100e-6, prefix_cache=True)
WORDS = 1000  # 1003 prompt tokens: 100 ms of prefill, 62 full blocks


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with running_truth_server(TIMING, max_model_len=4096) as url:
        yield url


def _prompt(first: str, words: int = WORDS) -> str:
    return " ".join([first, *(f"w{i % 50}" for i in range(words - 1))])


def _ask(client: httpx.Client, prompt: str, max_tokens: int = 1) -> tuple[float, dict[str, Any]]:
    """TTFT (send to the first token's event) and the final usage of one streamed chat."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    first: float | None = None
    usage: dict[str, Any] = {}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if '"content":"tok ' in line and first is None:
                first = time.perf_counter() - start
            if '"usage"' in line:
                usage = json.loads(line.removeprefix("data: "))["usage"]
    assert first is not None
    return first, usage


def test_the_token_rule_counts_template_and_words() -> None:
    body = {"messages": [{"role": "system", "content": "be brief"}, {"content": "a b  c\nd"}]}
    assert len(prompt_tokens(body)) == TEMPLATE_TOKENS + 6
    assert len(prompt_tokens({"prompt": "one two"})) == TEMPLATE_TOKENS + 2
    assert prompt_tokens({"max_tokens": 3}) == []  # no prompt at all: nothing to count


def test_the_prefix_cache_serves_leading_full_blocks_only() -> None:
    cache = PrefixCache()
    tokens = [f"t{i}" for i in range(40)]  # two full blocks and 8 tokens
    assert cache.take(tokens) == 0
    assert cache.take(tokens) == 2 * BLOCK_TOKENS
    assert cache.take([*tokens[:20], "other", *tokens[21:]]) == BLOCK_TOKENS
    assert cache.take(["new", *tokens[1:]]) == 0  # differs in its first token: nothing shared


def test_truth_timing_names_what_a_perfect_client_sees() -> None:
    assert TIMING.prefill_tokens_per_second == pytest.approx(10_000)
    assert TIMING.first_token_seconds(1003) == pytest.approx(0.1203)
    assert TIMING.first_token_seconds(1003, cached_tokens=992) == pytest.approx(0.0211)
    assert TruthTiming(0.05, 0.01).prefill_tokens_per_second is None
    assert TruthTiming(0.05, 0.01).request_seconds(10) == pytest.approx(0.15)


def test_prefill_time_usage_and_the_cache_over_the_wire(truth_url: str) -> None:
    with httpx.Client(base_url=truth_url, timeout=10) as client:
        models = client.get("/v1/models").json()
        assert models["data"][0]["max_model_len"] == 4096
        before = client.get("/stats").json()
        cold, usage = _ask(client, _prompt("first"))
        assert usage["prompt_tokens"] == WORDS + TEMPLATE_TOKENS
        assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
        truth = TIMING.first_token_seconds(WORDS + TEMPLATE_TOKENS)
        assert truth <= cold < truth + 0.08
        warm, usage = _ask(client, _prompt("first"))  # the same prompt again: cached
        cached = (WORDS + TEMPLATE_TOKENS) // BLOCK_TOKENS * BLOCK_TOKENS
        assert usage["prompt_tokens_details"] == {"cached_tokens": cached}
        assert TIMING.first_token_seconds(WORDS + TEMPLATE_TOKENS, cached) <= warm < 0.06
        other, usage = _ask(client, _prompt("second"))  # unique from its first word: cold
        assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
        assert other >= truth
        after = client.get("/stats").json()
        assert after["cached_prompt_tokens"] - before["cached_prompt_tokens"] == cached
        assert after["prompt_tokens"] - before["prompt_tokens"] == 3 * (WORDS + TEMPLATE_TOKENS)
        assert after["prefill_s"] == TIMING.prefill_s and after["prefix_cache"] is True
        too_long = client.post(
            "/v1/chat/completions",
            json={"messages": [{"content": _prompt("x", 4000)}], "max_tokens": 200},
        )
        assert too_long.status_code == 400
        assert "maximum context length is 4096" in too_long.json()["error"]["message"]


def test_a_server_that_gives_no_prompt_count() -> None:
    timing = TruthTiming(ttft_s=0.01, itl_s=0.001, prefill_s=50e-6)
    with (
        running_truth_server(timing, faults=Faults(no_prompt_tokens=True)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        first, usage = _ask(client, _prompt("only", 400))
    assert "prompt_tokens" not in usage and usage["completion_tokens"] == 1
    assert first >= timing.first_token_seconds(400 + TEMPLATE_TOKENS)  # prefill still costs


def test_a_pause_before_the_first_token_delays_that_reply_once() -> None:
    """`stall_after=0`: the Nth generation's first token comes `stall_s` late (a prefill that
    stalled once); the next reply's is on time."""
    timing = TruthTiming(ttft_s=0.01, itl_s=0.001, prefill_s=50e-6)
    faults = Faults(stall_once=1, stall_s=0.5, stall_after=0)
    with (
        running_truth_server(timing, faults=faults) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        stalled, usage = _ask(client, _prompt("one", 100), max_tokens=3)
        on_time, _ = _ask(client, _prompt("two", 100), max_tokens=3)
    truth = timing.first_token_seconds(100 + TEMPLATE_TOKENS)
    assert usage["completion_tokens"] == 3  # every token still sent after the pause
    assert stalled >= truth + 0.5  # the server never writes early
    assert on_time < truth + 0.25  # once: half the pause is far beyond a busy host's jitter
