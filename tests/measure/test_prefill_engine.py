"""The prefill phase on the embedded llama.cpp engine, beside the engine's own prompt rate.

llama.cpp reports `timings.prompt_per_second`: the prompt tokens it evaluated (`prompt_n`, the
part its slot did not reuse) over its own prompt-evaluation time. Our differential cancels what
every first token pays besides the prompt (HTTP, tokenizing, the chat template's shared prefix,
sampling the one token), so the two should agree closely. Measured once on this project's 2-core
host while another test run shared it (128 and 1,024 tokens, 3 repeats, SmolLM2 Q4_1): ours 31.6
prompt tokens/s (95% 30.4–34.4), the engine's 29.9 (29.1–31.0), 6% apart; the short prompts'
engine rates were lower (16–21), since a short prompt's evaluation is dominated by overhead the
engine counts in. This test's own lengths (64 and 512, 2 repeats) read 39.5 against the
engine's 38.3 (3% apart) in about a minute. The assertion allows a factor of 1.5, the spread of single repeats on a busy
shared host, far inside the gap a wrong figure makes (a cached prompt would read ten times
faster: the repeated-prompt pair showed a 12.6× speed-up).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.engines.llamacpp import LocalEngine
from sagemeter.measure.prefill import measure_prefill
from sagemeter.results import PrefillDetail
from sagemeter.transport.openai import OpenAIChat

AGREEMENT_FACTOR = 1.5


async def _measure(base_url: str) -> PrefillDetail:
    async with OpenAIChat(base_url.removesuffix("/v1")) as client:
        described = await client.describe()
        return await measure_prefill(
            client, short_tokens=64, long_tokens=512, repeats=2, context_tokens=described["n_ctx"]
        )


@pytest.mark.slow
def test_our_prefill_rate_beside_llamacpps_own(tmp_path: Path) -> None:
    engine = LocalEngine(
        resolve_checkpoint("smollm2-q4_1"),
        parallel=1,
        ctx_per_slot=1024,
        log_path=tmp_path / "engine.log",
    )
    engine.start()
    try:
        assert engine.base_url is not None
        detail = asyncio.run(_measure(engine.base_url))
    finally:
        engine.stop()
    ours, theirs = detail.tokens_per_second, detail.engine_tokens_per_second
    cache = detail.prefix_cache
    print(
        f"\nprefill on {detail.short_prompt_tokens} / {detail.long_prompt_tokens} tokens: ours "
        f"{ours} tokens/s ({detail.tokens_per_second_ci95}); llama.cpp's own "
        f"{theirs.median if theirs else None} ({theirs}); repeated prompt "
        f"{cache.speedup if cache else None}× faster"
    )
    assert detail.valid, detail.problems
    assert ours is not None and theirs is not None
    assert 1 / AGREEMENT_FACTOR < ours / theirs.median < AGREEMENT_FACTOR
    # The server's own counts, not words; the engine reused only the template's shared prefix.
    assert all(r.prompt_tokens is not None for r in detail.records)
    shared = {r.cached_prompt_tokens for r in detail.records}
    assert len(shared) == 1 and (shared.pop() or 0) < 64
    assert cache is not None and cache.speedup is not None and cache.speedup > 2
