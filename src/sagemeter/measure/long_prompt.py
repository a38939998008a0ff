"""Long prompts under load: the parallel levels again, every request a long prompt of its own.

Short story prompts leave the KV cache nearly empty, so the parallel phase cannot show what a
checkpoint's smaller weights buy: room for more long prompts at once. Here each level's batches
send `--long-prompt-levels` requests, each prompt the prefill phase's long length (sized by its
probes, so the server's own count), **unique from its first token** (a nonce first) so no prefix
cache serves any of them. Throughput (output tokens / the batch's wall time, pooled as the
parallel phase does) and the first token's wait (p50, p90) per level; the batches are judged,
run again and set aside by the parallel phase's own rules (measure/load.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from sagemeter.evidence.distribution import spread
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.deadline import Deadline
from sagemeter.measure.identity_span import AfterLevel
from sagemeter.measure.load import load_request_count, measure_load
from sagemeter.measure.prefill import (
    CONTEXT_MARGIN_SHARE,
    CONTEXT_MARGIN_TOKENS,
    Nonces,
    prompt_text,
)
from sagemeter.measure.stats import median
from sagemeter.results import LoadLevel, LongPromptLoad, PrefillDetail
from sagemeter.transport.chat import ChatClient, ChatRequest


def long_prompt_request_count(levels: Sequence[int], batches: int) -> int:
    """Requests the phase sends when every batch counts (0 when it is off)."""
    return load_request_count(levels, batches)


def long_prompt_request(words: int, max_tokens: int, nonce: str) -> ChatRequest:
    """One streamed request: `nonce` first, then `words` words of filler."""
    return ChatRequest(
        prompt=prompt_text(nonce, words), max_tokens=max_tokens, ignore_eos=True, stream=True
    )


def not_measured(
    levels: Sequence[int], prompt_tokens: int, max_tokens: int, batches: int, why: str
) -> LongPromptLoad:
    """Every level asked for, without a figure, saying why (no request sent)."""
    return LongPromptLoad(
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        batches_per_level=batches,
        levels=[
            LoadLevel(concurrency=level, problem=f"not measured: {why}", batches=[])
            for level in levels
        ],
        problem=why,
    )


async def measure_long_prompt_load(
    client: ChatClient,
    prefill: PrefillDetail,
    *,
    levels: Sequence[int],
    max_tokens: int,
    batches: int,
    reruns: int,
    statistic: str = "pooled",
    pause_s: float = 0.0,
    progress: ProgressFn = no_progress,
    precision: float | None = None,
    max_batches: int | None = None,
    deadline: Deadline | None = None,
    after_level: AfterLevel | None = None,
) -> LongPromptLoad:
    """The levels at the prefill phase's long length; none when that phase could not size it.
    `precision`, `max_batches` and `deadline` as the parallel phase takes them (measure_load)."""
    words = prefill.long_words
    if words is None:
        why = prefill.problems[0] if prefill.problems else "the prefill phase sized no prompt"
        return not_measured(
            levels,
            prefill.long_tokens,
            max_tokens,
            batches,
            f"the long prompt has no size: {why}",
        )
    tokens, notes, blocking = fit_context(prefill, max_tokens)
    if blocking:
        return not_measured(levels, prefill.long_tokens, max_tokens, batches, blocking)
    if tokens != prefill.long_tokens:
        words = words_for_tokens(prefill, tokens)
    nonces = Nonces()

    def requests(concurrency: int) -> list[ChatRequest]:
        return [long_prompt_request(words, max_tokens, nonces.next()) for _ in range(concurrency)]

    detail = await measure_load(
        client,
        levels=levels,
        max_tokens=max_tokens,
        batches=batches,
        reruns=reruns,
        statistic=statistic,
        pause_s=pause_s,
        progress=progress,
        requests=requests,
        precision=precision,
        max_batches=max_batches,
        deadline=deadline,
        after_level=after_level,
    )
    counted = [
        record.prompt_tokens
        for level in detail.levels
        for record in level.records
        if record.ok and record.prompt_tokens is not None
    ]
    return LongPromptLoad(
        prompt_tokens=tokens,
        prompt_words=words,
        notes=notes,
        prompt_tokens_counted=spread([float(count) for count in counted]),
        max_tokens=max_tokens,
        batches_per_level=batches,
        levels=detail.levels,
    )


def fit_context(prefill: PrefillDetail, max_tokens: int) -> tuple[int, list[str], str | None]:
    """The prompt length that leaves every reply its `max_tokens` in the server's context (the
    prefill phase's long length when it fits), a note when cut, and why not when nothing fits."""
    long, context = prefill.long_tokens, prefill.context_tokens
    if context is None:
        return long, [], None
    room = context - max_tokens - max(CONTEXT_MARGIN_TOKENS, int(context * CONTEXT_MARGIN_SHARE))
    if long <= room:
        return long, [], None
    if room <= prefill.short_tokens:
        return (
            long,
            [],
            f"the server's context ({context} tokens) leaves no room for a prompt longer than "
            f"the short one ({prefill.short_tokens}) beside {max_tokens}-token replies",
        )
    note = (
        f"long prompts: cut from {long} to {room} tokens so that each prompt and its "
        f"{max_tokens}-token reply fit the server's context of {context} tokens"
    )
    return room, [note], None


def words_for_tokens(prefill: PrefillDetail, tokens: int) -> int:
    """Filler words for `tokens` of the server's count, on the line through the prefill phase's
    two lengths (their counted medians where there are counts, else the lengths asked)."""
    short_words, long_words = prefill.short_words or 1, prefill.long_words or 1
    short = median(prefill.short_prompt_tokens) if prefill.short_prompt_tokens else None
    long = median(prefill.long_prompt_tokens) if prefill.long_prompt_tokens else None
    short_tokens = short if short is not None else prefill.short_tokens
    long_tokens = long if long is not None else prefill.long_tokens
    if long_words <= short_words or long_tokens <= short_tokens:
        return max(1, round(long_words * tokens / max(long_tokens, 1)))
    per_word = (long_tokens - short_tokens) / (long_words - short_words)
    return max(1, round(short_words + (tokens - short_tokens) / per_word))


def level_ttft_ms(level: LoadLevel, percentile: str) -> float | None:
    """The level's p50 ("median") or p90 time to first token in ms; None without a figure."""
    if level.tokens_per_second is None or level.ttft_s is None:
        return None
    value: float = getattr(level.ttft_s, percentile)
    return round(value * 1000.0, 3)
