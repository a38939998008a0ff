"""Prompt text of a given length as the server counts it, and prompt blocks shared by id.

Text is common short English words (most tokenizers make each one token with its leading
space), drawn by a generator seeded from what the text stands for: a trace's block id (with the
run's seed), so two requests sharing leading block ids share that prefix word for word; or a
request of its own, whose text is unique from its first word on, so no prefix cache serves it.

How many words make N tokens is the server's own count: `Sizing` is a line
`tokens = overhead + per_word × words` fitted to the `usage.prompt_tokens` of two probes (the
way `measure`'s prefill phase sizes its prompts); the overhead is what the server adds to every
prompt (a chat template), taken off the text so the whole prompt counts N.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

_VOCABULARY_TEXT = (
    "the river ran past old stone walls where children played in long evening light and "
    "their parents sat on wooden steps to talk about rain bread work small news of town "
    "while a dog slept near open door house that had stood there for many years green hill "
    "cold wind warm fire blue sky red roof tall tree road field night day sun moon star boat "
    "sea fish bird song"
)
VOCABULARY = tuple(_VOCABULARY_TEXT.split())
PROBE_WORDS = (64, 576)


def words(seed: str, count: int) -> list[str]:
    """`count` words drawn by a generator seeded with `seed` (the same seed, the same words)."""
    return random.Random(seed).choices(VOCABULARY, k=count)


@dataclass(frozen=True)
class Sizing:
    """The server's count as a line in words: tokens = overhead + per_word × words."""

    overhead: float
    per_word: float

    def words_for(self, tokens: float) -> int:
        """Words whose text the server counts as `tokens` (its overhead included), at least 1."""
        return max(1, round((tokens - self.overhead) / self.per_word))

    def block_words(self, block_tokens: int) -> int:
        """Words of one block of `block_tokens` tokens inside a prompt (no overhead)."""
        return max(1, round(block_tokens / self.per_word))


def fit_sizing(counts: Sequence[tuple[int, int]]) -> Sizing | None:
    """The line through two (words, server tokens) probes; None when it does not rise."""
    (w1, t1), (w2, t2) = counts[0], counts[-1]
    if w2 == w1:
        return None
    per_word = (t2 - t1) / (w2 - w1)
    if per_word <= 0:
        return None
    return Sizing(overhead=t1 - per_word * w1, per_word=per_word)


def block_prompt(
    sizing: Sizing,
    hash_ids: Sequence[int],
    input_tokens: int,
    block_tokens: int,
    seed: int,
    own: str,
) -> str:
    """A trace request's prompt: its blocks' words in order, cut to `input_tokens` as the server
    counts them; past its blocks (a trace whose ids cover less than its length) words of its own
    (`own` seeds them)."""
    wanted = sizing.words_for(input_tokens)
    per_block = sizing.block_words(block_tokens)
    text: list[str] = []
    for block in hash_ids:
        if len(text) >= wanted:
            break
        text += words(f"{seed}:block:{block}", per_block)
    if len(text) < wanted:
        text += words(f"{seed}:own:{own}", wanted - len(text))
    return " ".join(text[:wanted])


def own_prompt(sizing: Sizing, input_tokens: int, nonce: str, seed: str) -> str:
    """A prompt of its own: `nonce` first (its words unique to the send), then drawn words, the
    whole counted as `input_tokens`; at least one drawn word follows the nonce."""
    wanted = sizing.words_for(input_tokens)
    return " ".join([nonce, *words(seed, max(1, wanted - len(nonce.split())))])
