"""How the calibration server counts a prompt's tokens, and its prefix cache.

The rule is simple on purpose, so a test can know the count in advance: a prompt's tokens are
`TEMPLATE_TOKENS` fixed tokens (what a chat template adds) followed by the whitespace-separated
words of every message's content, in order (a completion's `prompt` alike). A body with neither
`messages` nor `prompt` has no prompt at all (0 tokens). The count goes back in
`usage.prompt_tokens`.

The prefix cache works as vLLM's does: tokens are grouped in blocks of `BLOCK_TOKENS`; a block is
known by its own tokens and every token before it (a chain of hashes), so a prompt's leading full
blocks that an earlier prompt also began with are served from the cache and cost no prefill. A
prompt that differs from every earlier one in its first word shares nothing but the template,
which is shorter than a block.
"""

from __future__ import annotations

from typing import Any

TEMPLATE_TOKENS = 3
TEMPLATE_TOKEN = "<|template|>"
BLOCK_TOKENS = 16
# Blocks remembered at most; the cache is emptied when it would grow past this (a bound on RAM).
MAX_BLOCKS = 1_000_000


def _text_of(content: Any) -> str:
    """A message's content: a string, or OpenAI's list of parts whose `text` is kept."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def prompt_tokens(body: dict[str, Any]) -> list[str]:
    """The prompt's tokens by the server's rule: the template's, then every word."""
    messages = body.get("messages")
    prompt = body.get("prompt")
    if isinstance(messages, list):
        text = " ".join(_text_of(m.get("content")) for m in messages if isinstance(m, dict))
    elif isinstance(prompt, str):
        text = prompt
    else:
        return []
    return [TEMPLATE_TOKEN] * TEMPLATE_TOKENS + text.split()


class PrefixCache:
    """Which leading blocks of 16 tokens some earlier prompt had."""

    def __init__(self) -> None:
        self._blocks: set[int] = set()

    def __len__(self) -> int:
        return len(self._blocks)

    def take(self, tokens: list[str]) -> int:
        """Tokens of `tokens` served from the cache (leading full blocks seen before); the
        prompt's own full blocks are remembered for the prompts after it."""
        cached = 0
        matching = True
        chain = 0
        keys = []
        for start in range(0, len(tokens) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
            chain = hash((chain, *tokens[start : start + BLOCK_TOKENS]))
            keys.append(chain)
            if matching and chain in self._blocks:
                cached += BLOCK_TOKENS
            else:
                matching = False
        if len(self._blocks) + len(keys) > MAX_BLOCKS:
            self._blocks.clear()
        self._blocks.update(keys)
        return cached
