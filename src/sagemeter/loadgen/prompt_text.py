"""Prompt text of a given length as the server counts it, and prompt blocks shared by id.

Text is common short English words (most tokenizers make each one token with its leading
space), drawn by a generator seeded from what the text stands for: a trace's block id (with the
run's seed), so two requests sharing leading block ids share that prefix word for word; or a
request of its own, whose text is unique from its first word on, so no prefix cache serves it.

How many words make N tokens is the server's own count: `Sizing` is a line
`tokens = overhead + per_word × words` fitted to the `usage.prompt_tokens` of two probes (the
way `measure`'s prefill phase sizes its prompts); the overhead is what the server adds to every
prompt (a chat template), taken off the text so the whole prompt counts N.

With the model's own tokenizer (`load --tokenizer`), `ExactSizing` cuts the text to exactly
N − overhead tokens by that tokenizer's count (whole words, then one-token filler words for what
a cut word would overshoot); only the overhead, the chat template's tokens, is the server's
(two probes' usage.prompt_tokens less the tokenizer's count of their text, which must agree).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from sagemeter.errors import UserError
from sagemeter.prompt_tokenizer import PromptTokenizer

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


@dataclass(frozen=True)
class ExactSizing:
    """Text cut by the tokenizer's own count to N − overhead tokens; `overhead` is the server's
    chat template (its count of a probe less the tokenizer's count of the probe's text)."""

    tokenizer: PromptTokenizer = field(compare=False)
    overhead: int
    filler: str = ""  # a vocabulary word the tokenizer counts as one token, with or without space
    _blocks: dict[tuple[str, int], tuple[str, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if not self.filler:
            object.__setattr__(self, "filler", one_token_word(self.tokenizer))

    def text_tokens(self, tokens: int) -> int:
        """Tokens of text for a prompt the server counts as `tokens`, at least 1."""
        return max(1, tokens - self.overhead)

    def cut(self, text: Sequence[str], tokens: int, first: bool = True) -> list[str]:
        """Leading words of `text` counting exactly `tokens` (`first`: the first word has no
        space before it), filler words making up what the next word would overshoot. The
        pre-tokenizer splits text at each space before a word, so counts add up by word."""
        kept: list[str] = []
        total = 0
        for word in text:
            count = self.tokenizer.count(word if first and not kept else " " + word)
            if total + count > tokens:
                break
            kept.append(word)
            total += count
        return kept + [self.filler] * (tokens - total)

    def block(self, seed: str, block_tokens: int) -> tuple[str, ...]:
        """One block's words (drawn by `seed`), `block_tokens` by the tokenizer's count inside a
        prompt; kept, since a trace's shared blocks recur."""
        key = (seed, block_tokens)
        if key not in self._blocks:
            self._blocks[key] = tuple(self.cut(words(seed, block_tokens), block_tokens, False))
        return self._blocks[key]


def one_token_word(tokenizer: PromptTokenizer) -> str:
    """A vocabulary word the tokenizer counts as one token with and without a space before it;
    none is one UserError (the prompts could not be cut exactly)."""
    for word in VOCABULARY:
        if tokenizer.count(word) == 1 and tokenizer.count(" " + word) == 1:
            return word
    raise UserError(
        f"--tokenizer {tokenizer.source}: it spells none of the prompt words as one token, so "
        "prompts cannot be cut to an exact length; leave out --tokenizer to size by the server"
    )


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
    sizing: Sizing | ExactSizing,
    hash_ids: Sequence[int],
    input_tokens: int,
    block_tokens: int,
    seed: int,
    own: str,
) -> str:
    """A trace request's prompt: its blocks' words in order, cut to `input_tokens` as the server
    counts them; past its blocks (a trace whose ids cover less than its length) words of its own
    (`own` seeds them)."""
    if isinstance(sizing, ExactSizing):
        tokens = sizing.text_tokens(input_tokens)
        exact: list[str] = []
        for block in hash_ids:
            if len(exact) >= tokens:  # every word is at least one token
                break
            exact += sizing.block(f"{seed}:block:{block}", block_tokens)
        exact += words(f"{seed}:own:{own}", max(0, tokens - len(exact)))
        return " ".join(sizing.cut(exact, tokens))
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


def own_prompt(sizing: Sizing | ExactSizing, input_tokens: int, nonce: str, seed: str) -> str:
    """A prompt of its own: `nonce` first (its words unique to the send), then drawn words, the
    whole counted as `input_tokens`; at least one drawn word follows the nonce."""
    if isinstance(sizing, ExactSizing):
        head = nonce.split()
        nonce_tokens = sizing.tokenizer.count(nonce)  # stamped digits: one token each, alike
        rest = max(1, sizing.text_tokens(input_tokens) - nonce_tokens)
        return " ".join([*head, *sizing.cut(words(seed, rest), rest, first=False)])
    wanted = sizing.words_for(input_tokens)
    return " ".join([nonce, *words(seed, max(1, wanted - len(nonce.split())))])
