"""The server's own word on prefix caching: vLLM's /metrics prefix-cache counters read around the
prefill phase's cache pair, beside the TTFT speed-up.

Truth: the known-truth server counts every prompt token it was sent and those its prefix cache
served (`/stats`); a loopback /metrics page states those two counts under vLLM's counter names
(as vLLM's own page does, `# TYPE … counter` and `_total` samples). So during the pair the
counters must move by exactly two long prompts' tokens and the blocks the cache served.
"""

from __future__ import annotations

import asyncio
import asyncio.streams

import httpx
import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.prompts import BLOCK_TOKENS
from sagemeter.measure.prefill import measure_prefill
from sagemeter.measure.server_metrics.prefix_cache import PrefixCacheCounters, cache_counts
from sagemeter.measure.server_metrics.scrape import parse_metrics
from sagemeter.results import PrefillDetail
from tests.wire import WireServer

SHORT, LONG = 64, 512


def vllm_cache_page(queries: float, hits: float) -> str:
    """The two families as vLLM 0.11 prints them (trimmed to these)."""
    return f"""# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}
"""


def _text(body: str) -> bytes:
    data = body.encode()
    return (
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n"
        f"content-length: {len(data)}\r\nconnection: close\r\n\r\n"
    ).encode() + data


def _metrics_of(truth_url: str, with_counters: bool = True) -> WireServer:
    """A /metrics that says the truth server's own prompt and cached token counts."""

    async def metrics(writer: asyncio.streams.StreamWriter, _: dict[str, object]) -> None:
        stats = httpx.get(truth_url + "/stats").json()
        page = (
            vllm_cache_page(stats["prompt_tokens"], stats["cached_prompt_tokens"])
            if with_counters
            else "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
        )
        writer.write(_text(page))

    return WireServer({"/metrics": metrics})


def _prefill(url: str, counters: PrefixCacheCounters) -> PrefillDetail:
    async def run() -> PrefillDetail:
        from sagemeter.transport.openai import OpenAIChat

        async with OpenAIChat(url) as client:
            return await measure_prefill(
                client, short_tokens=SHORT, long_tokens=LONG, repeats=2, counters=counters
            )

    return asyncio.run(run())


@pytest.mark.parametrize("cache_on", [True, False])
def test_the_counters_say_what_the_cache_served_during_the_pair(cache_on: bool) -> None:
    truth = TruthTiming(ttft_s=0.01, itl_s=0.001, prefill_s=50e-6, prefix_cache=cache_on)
    with running_truth_server(truth) as url, _metrics_of(url) as metrics:
        detail = _prefill(url, PrefixCacheCounters(metrics.url.removesuffix("/v1")))
    cache = detail.prefix_cache
    assert cache is not None and cache.prompt_tokens == LONG
    assert cache.server_cache_queries == 2 * LONG  # the pair's two prompts, nothing else
    served = LONG // BLOCK_TOKENS * BLOCK_TOKENS if cache_on else 0
    assert cache.server_cache_hits == served == (cache.cached_tokens_reported or 0)
    assert cache.server_reports_caching is cache_on
    assert cache.server_counters_note is not None
    said = "reports" if cache_on else "reports no"
    assert cache.server_counters_note.startswith(f"the server {said} prefix caching: {served} of")
    assert cache.speedup is not None and (cache.speedup > 2) is cache_on  # the client's view


def test_a_server_without_the_counters_says_so() -> None:
    truth = TruthTiming(ttft_s=0.01, itl_s=0.001, prefill_s=20e-6, prefix_cache=True)
    with running_truth_server(truth) as url, _metrics_of(url, with_counters=False) as metrics:
        no_counters = _prefill(url, PrefixCacheCounters(metrics.url.removesuffix("/v1")))
        no_metrics = _prefill(url, PrefixCacheCounters(url))  # the truth server has no /metrics
    for detail, why in (
        (no_counters, "has no prefix-cache counters (vllm:prefix_cache_queries"),
        (no_metrics, "/metrics not read: GET /metrics answered HTTP 404"),
    ):
        cache = detail.prefix_cache
        assert cache is not None and cache.speedup is not None  # the client's figure stands
        assert cache.server_reports_caching is None and cache.server_cache_hits is None
        assert cache.server_counters_note is not None and why in cache.server_counters_note
        assert cache.server_counters_note.startswith("not known whether the server caches")


def test_both_spellings_of_a_counter_are_read() -> None:
    page = vllm_cache_page(100, 32)
    assert cache_counts(parse_metrics(page)) is not None
    bare = "# TYPE vllm:prefix_cache_hits gauge\nvllm:prefix_cache_hits 32\n"
    bare += "# TYPE vllm:prefix_cache_queries gauge\nvllm:prefix_cache_queries 100\n"
    found = cache_counts(parse_metrics(bare))
    assert found is not None and (found.queries, found.hits) == (100, 32)
    assert cache_counts(parse_metrics("# TYPE vllm:x gauge\nvllm:x 1\n")) is None
