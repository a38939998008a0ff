"""Parallel requests: N at once, fixed-length replies, two batches per level.

Throughput of a batch = its output tokens / its wall time (first send to last byte). A level's
figure pools its batches (all tokens / all wall time); every batch and request is kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sagemeter.clients.base import ChatClient, ChatRequest, RequestRecord
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.bootstrap import interval
from sagemeter.measure.figure_samples import level_samples
from sagemeter.measure.stats import CpuClock, client_share, spread
from sagemeter.results import LoadBatch, LoadDetail, LoadLevel

TOPICS = (
    "a lighthouse keeper",
    "a mountain railway",
    "a clockmaker's apprentice",
    "a desert caravan",
    "a lost satellite",
    "a night market",
    "an old river boat",
    "a glacier expedition",
)


def load_request_count(levels: Sequence[int], batches: int) -> int:
    return sum(levels) * batches


def _request(index: int, max_tokens: int) -> ChatRequest:
    topic = TOPICS[index % len(TOPICS)]
    return ChatRequest(
        prompt=f"Write a long story about {topic}.",
        max_tokens=max_tokens,
        ignore_eos=True,
        stream=True,
    )


async def _one(client: ChatClient, request: ChatRequest, progress: ProgressFn) -> RequestRecord:
    record = await client.chat(request)
    progress(1)
    return record


async def run_batch(
    client: ChatClient, concurrency: int, max_tokens: int, progress: ProgressFn = no_progress
) -> list[RequestRecord]:
    """Send `concurrency` requests at once and wait for all of them."""
    requests = [_request(index, max_tokens) for index in range(concurrency)]
    return list(await asyncio.gather(*(_one(client, r, progress) for r in requests)))


def summarise_batch(concurrency: int, records: list[RequestRecord]) -> LoadBatch:
    start = min(record.sent_at for record in records)
    end = max(record.sent_at + record.total_s for record in records)
    tokens = sum(record.completion_tokens or 0 for record in records if record.ok)
    wall = end - start
    return LoadBatch(
        concurrency=concurrency,
        wall_s=wall,
        output_tokens=tokens,
        failed=sum(1 for record in records if not record.ok),
        tokens_per_second=tokens / wall if wall > 0 else 0.0,
    )


async def measure_load(
    client: ChatClient,
    *,
    levels: Sequence[int] = (1, 4, 16),
    max_tokens: int = 256,
    batches: int = 2,
    progress: ProgressFn = no_progress,
) -> LoadDetail:
    results = []
    for concurrency in levels:
        level_records: list[RequestRecord] = []
        level_batches = []
        cpu = CpuClock()
        for _ in range(batches):
            records = await run_batch(client, concurrency, max_tokens, progress)
            level_batches.append(summarise_batch(concurrency, records))
            level_records.extend(records)
        used = cpu.elapsed()
        good = [record for record in level_records if record.ok]
        wall = sum(batch.wall_s for batch in level_batches)
        tokens = sum(batch.output_tokens for batch in level_batches)
        level = LoadLevel(
            concurrency=concurrency,
            tokens_per_second=tokens / wall if good and wall > 0 else None,
            batches=level_batches,
            ttft_s=spread([r.first_token_s for r in good if r.first_token_s is not None]),
            inter_token_latency_s=spread([g for r in good for g in r.inter_token_gaps_s()]),
            records=level_records,
            client=client_share(len(level_records), used, wall),
        )
        if level.tokens_per_second is not None:
            level.tokens_per_second_ci95 = interval(level_samples(level))
        results.append(level)
    return LoadDetail(max_tokens=max_tokens, batches_per_level=batches, levels=results)
