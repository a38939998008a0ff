"""Token-level fidelity against the real embedded llama.cpp engine (3 short prompts, 6 tokens)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from sagemeter.errors import UserError
from sagemeter.fidelity.collect import collect_fidelity
from sagemeter.fidelity.compare import compare_fidelity, summary_lines
from sagemeter.results.fidelity_record import FidelityRecord, Position

PROMPTS = ["What is 12 times 7?", "Name a colour.", "Say hi."]
TOP_K = 5
TOKENS = 6


@pytest.fixture(scope="module")
def reference(engine_url: str) -> FidelityRecord:
    return asyncio.run(collect_fidelity(engine_url, PROMPTS, top_k=TOP_K, max_tokens=TOKENS))


def server_root(engine_url: str) -> str:
    return engine_url.removesuffix("/v1")


def test_reference_is_the_greedy_chat_answer(engine_url: str, reference: FidelityRecord) -> None:
    assert (reference.engine, reference.model, reference.forced) == (
        "llamacpp",
        "smollm2-q4_1",
        False,
    )
    assert reference.chat_template_sha256 is not None and len(reference.chat_template_sha256) == 64
    with httpx.Client(timeout=120) as http:
        for item in reference.prompts:
            chat = http.post(
                f"{engine_url}/chat/completions",
                json={
                    "messages": [{"role": "user", "content": item.prompt}],
                    "max_tokens": TOKENS,
                    "temperature": 0,
                },
            ).json()
            # The same prompt tokens and the same answer as the server's own chat path.
            assert chat["usage"]["prompt_tokens"] == len(item.prompt_token_ids)
            assert item.answer_text == chat["choices"][0]["message"]["content"]
            assert len(item.positions) == TOKENS and item.finish == "length"
            for position in item.positions:
                assert len(position.top) == TOP_K
                assert position.token_id == position.top[0].id  # greedy: the top token is taken
                logprobs = [t.logprob for t in position.top]
                assert logprobs == sorted(logprobs, reverse=True) and logprobs[0] <= 0


def test_same_engine_twice_agrees_fully_with_zero_kl(
    engine_url: str, reference: FidelityRecord
) -> None:
    again = asyncio.run(collect_fidelity(engine_url, [], top_k=TOP_K, reference=reference))
    assert again.forced and [p.answer_token_ids for p in again.prompts] == [
        p.answer_token_ids for p in reference.prompts
    ]
    comparison = compare_fidelity(reference, again, floor=again)
    assert comparison.agreement.share == 1.0
    assert comparison.positions == len(PROMPTS) * TOKENS
    assert comparison.kl_max == pytest.approx(0.0, abs=1e-9)
    assert comparison.template_mismatches == 0
    assert all(p.first_divergence is None for p in comparison.per_prompt)
    assert any("top-token agreement 100.0% (18/18" in line for line in summary_lines(comparison))


def test_forcing_scores_every_position_under_the_forced_prefix(
    engine_url: str, reference: FidelityRecord
) -> None:
    """Emulate another model's answer: replace token 2 by A's runner-up there, then force along it."""
    changed = 2
    perturbed = reference.model_copy(deep=True)
    item = perturbed.prompts[0]
    original = item.positions[changed]
    runner_up = original.top[1]
    item.positions[changed] = Position(
        token_id=runner_up.id, token_text=runner_up.text, top=original.top
    )
    forced = asyncio.run(collect_fidelity(engine_url, [], top_k=TOP_K, reference=perturbed))
    scored = forced.prompts[0]
    assert scored.answer_token_ids == item.answer_token_ids
    # Up to and including the changed position the prefix is A's own: A's distributions.
    for i in range(changed + 1):
        assert scored.positions[i].top == reference.prompts[0].positions[i].top
    # After it, each position is the engine's distribution after the perturbed prefix, as asked
    # directly of the server, and no longer A's.
    with httpx.Client(base_url=server_root(engine_url), timeout=120) as http:
        for i in range(changed + 1, TOKENS):
            direct = http.post(
                "/completion",
                json={
                    "prompt": item.prompt_token_ids + item.answer_token_ids[:i],
                    "n_predict": 1,
                    "n_probs": TOP_K,
                    "temperature": 0,
                },
            ).json()["completion_probabilities"][0]["top_logprobs"]
            got = scored.positions[i].top
            assert [t.id for t in got] == [e["id"] for e in direct]
            assert [t.logprob for t in got] == pytest.approx(
                [e["logprob"] for e in direct], abs=1e-6
            )
    assert scored.positions[changed + 1].top != reference.prompts[0].positions[changed + 1].top
    # The other prompts were forced along unchanged answers: identical to A.
    assert [p.positions for p in forced.prompts[1:]] == [p.positions for p in reference.prompts[1:]]


def test_wrong_engine_override_is_a_clear_error(engine_url: str) -> None:
    with pytest.raises(UserError, match="/tokenize: the answer has no tokens"):
        asyncio.run(collect_fidelity(engine_url, PROMPTS[:1], engine="vllm", max_tokens=2))
