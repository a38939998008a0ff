"""The OpenAI-compatible wire against the real embedded llama.cpp engine on loopback."""

from __future__ import annotations

from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.openai import OpenAIChat


async def test_streaming_reply_has_every_timing(engine_url: str) -> None:
    async with OpenAIChat(engine_url) as client:
        record = await client.chat(
            ChatRequest(prompt="Tell me a story.", max_tokens=24, ignore_eos=True)
        )
    assert record.ok, record.error
    assert record.usage_tokens == 24
    assert record.tokens_source == "usage"
    assert record.honoured_length
    assert record.finish_reason == "length"
    assert record.first_token_s is not None
    assert 0 < record.first_token_s <= record.total_s
    arrivals = record.arrivals_us
    assert len(arrivals) == 24  # llama.cpp streams one event per token, each a token event
    assert arrivals == sorted(arrivals)
    assert all(gap >= 0 for gap in record.gaps_s())
    assert record.engine_tokens == 24
    assert record.engine_rate is not None and record.engine_rate > 0
    assert record.retries == 0


async def test_plain_reply_and_natural_stop(engine_url: str) -> None:
    async with OpenAIChat(engine_url) as client:
        record = await client.chat(
            ChatRequest(
                prompt="What is the capital of France? One word.", max_tokens=64, stream=False
            )
        )
    assert record.ok, record.error
    assert record.first_token_s is None
    assert record.finish_reason == "stop"
    assert record.usage_tokens is not None
    assert 0 < record.usage_tokens < 64
    assert record.text is not None and "Paris" in record.text


async def test_temperature_zero_is_repeatable(engine_url: str) -> None:
    request = ChatRequest(prompt="Name three colours.", max_tokens=16, stream=False)
    async with OpenAIChat(engine_url) as client:
        first = await client.chat(request)
        second = await client.chat(request)
    assert first.ok and second.ok
    assert first.text == second.text


async def test_a_batch_is_sent_together_by_worker_processes(engine_url: str) -> None:
    requests = [
        ChatRequest(prompt=f"Count to {n}.", max_tokens=8, ignore_eos=True) for n in range(4)
    ]
    async with OpenAIChat(engine_url) as client:
        run = await client.batch(requests)
        again = await client.batch(requests)  # the same worker pool serves a second batch
    for batch in (run, again):
        assert batch.failure is None
        assert [record.stream for record in batch.records] == [0, 1, 2, 3]
        assert all(record.ok for record in batch.records)
        assert [record.tokens for record in batch.records] == [8, 8, 8, 8]
        # Sent together, not one after another: every request left before the first one ended.
        assert max(r.send_us for r in batch.records) < min(r.end_us for r in batch.records)
        assert batch.workers == 1 and batch.client_cpu_s > 0
    assert min(r.send_us for r in again.records) > max(r.end_us for r in run.records)


async def test_describe_names_the_engine(engine_url: str) -> None:
    async with OpenAIChat(engine_url) as client:
        info = await client.describe()
        await client.preflight()
    assert info["engine"] == "llama.cpp"
    assert info["model"] == "smollm2-q4_1"
    assert len(info["chat_template_sha256"]) == 64
