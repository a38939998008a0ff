"""Collect a fidelity record from a running endpoint, with or without a reference.

Without a reference (measuring A): for each prompt, the server's chat template gives the prompt
tokens, the server answers greedily, then the answer is scored through the same forced path a
candidate uses, so A's distributions and B's come from identical calls. With a reference
(measuring B, or A again): the reference's prompt tokens and answer tokens are used as they are,
and B's own template is only checked against them. Prompts run one after another: on llama.cpp
that keeps each prompt on one slot, whose KV cache makes every forced step a one-token call, and
it keeps other requests out of the batch, so the numbers do not depend on what else was running.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sagemeter.errors import UserError
from sagemeter.fidelity.adapter import FidelityEngine
from sagemeter.fidelity.detect import check_engine, detect_engine, engine_for, server_root
from sagemeter.results.fidelity_record import Engine, FidelityRecord, Position, PromptRecord
from sagemeter.transport.client import HttpClient
from sagemeter.transport.retry import NO_RETRIES, RetryPolicy

MAX_TOP_K = 20  # vLLM's default --max-logprobs; llama.cpp has no cap, but k beyond 20 adds little
TIMEOUT_S = 600.0  # a long prompt on a busy CPU takes minutes


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _messages(prompt: str, system_prompt: str | None) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*messages, {"role": "user", "content": prompt}]


def _check_inputs(
    prompts: list[str], top_k: int, max_tokens: int, reference: FidelityRecord | None
) -> None:
    if reference is None and not prompts:
        raise UserError("give at least one prompt")
    if not 1 <= top_k <= MAX_TOP_K:
        raise UserError(f"top_k must be between 1 and {MAX_TOP_K}, got {top_k}")
    if max_tokens < 1:
        raise UserError(f"max_tokens must be at least 1, got {max_tokens}")
    if reference is not None:
        if prompts and prompts != [p.prompt for p in reference.prompts]:
            raise UserError(
                "the prompts differ from the reference's; leave them out to use the reference's"
            )
        if top_k > reference.top_k:
            raise UserError(f"top_k {top_k} exceeds the reference's top_k {reference.top_k}")


async def collect_fidelity(
    base_url: str,
    prompts: list[str],
    *,
    top_k: int = 5,
    max_tokens: int = 16,
    reference: FidelityRecord | None = None,
    engine: str | None = None,
    system_prompt: str | None = None,
    api_key: str | None = None,
    timeout_s: float = TIMEOUT_S,
    retry: RetryPolicy = NO_RETRIES,
) -> FidelityRecord:
    """One endpoint's top-k next-token distributions along greedy (or the reference's) answers.

    `base_url` is the server (a trailing /v1 is fine). With `reference`, the prompts, system
    prompt and answer tokens are the reference's (`prompts` may be empty, else must match).
    A call that fails transiently is sent again under `retry`; the record counts those tries.
    """
    _check_inputs(prompts, top_k, max_tokens, reference)
    started = _utc_now()
    root = server_root(base_url)
    http = HttpClient(root, api_key=api_key, timeout_s=timeout_s, retry=retry)
    try:
        kind: Engine = check_engine(engine) if engine else await detect_engine(http)
        server = engine_for(kind, http)
        info = await server.describe()
        if reference is None:
            system = system_prompt
            records = [await _own_answer(server, p, system, top_k, max_tokens) for p in prompts]
        else:
            system = reference.system_prompt
            records = [await _forced(server, item, system, top_k) for item in reference.prompts]
    finally:
        await http.aclose()
    return FidelityRecord(
        engine=kind,
        engine_version=info.version,
        model=info.model,
        base_url=root,
        top_k=top_k,
        max_tokens=reference.max_tokens if reference else max_tokens,
        system_prompt=system,
        chat_template_sha256=info.chat_template_sha256,
        forced=reference is not None,
        reference_model=reference.model if reference else None,
        started_utc=started,
        ended_utc=_utc_now(),
        prompts=records,
        retries=http.sent_again,
    )


async def _own_answer(
    server: FidelityEngine, prompt: str, system: str | None, top_k: int, max_tokens: int
) -> PromptRecord:
    prompt_ids = await server.prompt_tokens(_messages(prompt, system))
    answer = await server.generate(prompt_ids, max_tokens)
    positions = await server.score(prompt_ids, answer.token_ids, top_k)
    return PromptRecord(
        prompt=prompt, prompt_token_ids=prompt_ids, finish=answer.finish, positions=positions
    )


async def _forced(
    server: FidelityEngine, reference: PromptRecord, system: str | None, top_k: int
) -> PromptRecord:
    own_ids = await server.prompt_tokens(_messages(reference.prompt, system))
    scored = await server.score(reference.prompt_token_ids, reference.answer_token_ids, top_k)
    # The forced token is the reference's: keep its text as the reference spelled it.
    positions = [
        Position(token_id=ref.token_id, token_text=ref.token_text, top=mine.top)
        for ref, mine in zip(reference.positions, scored, strict=True)
    ]
    return PromptRecord(
        prompt=reference.prompt,
        prompt_token_ids=reference.prompt_token_ids,
        template_agrees=own_ids == reference.prompt_token_ids,
        finish=reference.finish,
        positions=positions,
    )
