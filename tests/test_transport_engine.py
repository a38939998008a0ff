"""The OpenAI client against the real embedded llama.cpp engine on loopback."""

from __future__ import annotations

import asyncio

from sagemeter.clients.base import ChatRequest
from sagemeter.clients.openai import OpenAIClient


async def test_streaming_reply_has_every_timing(engine_url: str) -> None:
    async with OpenAIClient(engine_url) as client:
        record = await client.chat(
            ChatRequest(prompt="Tell me a story.", max_tokens=24, ignore_eos=True)
        )
    assert record.ok, record.error
    assert record.streamed
    assert record.completion_tokens == 24
    assert record.tokens_source == "usage"
    assert record.honoured_length
    assert record.finish_reason == "length"
    assert record.first_token_s is not None
    assert 0 < record.first_token_s <= record.total_s
    arrivals = record.chunk_arrivals_s
    assert len(arrivals) >= 20  # llama.cpp streams one chunk per token
    assert arrivals == sorted(arrivals)
    assert all(gap >= 0 for gap in record.inter_token_gaps_s())
    assert record.text
    assert record.engine_timings is not None
    assert record.engine_timings["predicted_n"] == 24


async def test_plain_reply_and_natural_stop(engine_url: str) -> None:
    async with OpenAIClient(engine_url) as client:
        record = await client.chat(
            ChatRequest(
                prompt="What is the capital of France? One word.", max_tokens=64, stream=False
            )
        )
    assert record.ok, record.error
    assert not record.streamed
    assert record.first_token_s is None
    assert record.finish_reason == "stop"
    assert record.completion_tokens is not None
    assert 0 < record.completion_tokens < 64
    assert "Paris" in record.text


async def test_temperature_zero_is_repeatable(engine_url: str) -> None:
    request = ChatRequest(prompt="Name three colours.", max_tokens=16, stream=False)
    async with OpenAIClient(engine_url) as client:
        first = await client.chat(request)
        second = await client.chat(request)
    assert first.ok and second.ok
    assert first.text == second.text


async def test_concurrent_requests_share_the_pool(engine_url: str) -> None:
    async with OpenAIClient(engine_url, concurrency=4) as client:
        records = await asyncio.gather(
            *(
                client.chat(ChatRequest(prompt=f"Count to {n}.", max_tokens=8, ignore_eos=True))
                for n in range(4)
            )
        )
    assert all(record.ok for record in records)
    assert [record.completion_tokens for record in records] == [8, 8, 8, 8]
    starts = [record.sent_at for record in records]
    assert max(starts) - min(starts) < 0.5  # sent together, not one after another


async def test_describe_names_the_engine(engine_url: str) -> None:
    async with OpenAIClient(engine_url) as client:
        info = await client.describe()
    assert info["engine"] == "llama.cpp"
    assert info["model"] == "smollm2-q4_1"
