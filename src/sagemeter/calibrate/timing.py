"""The known truth: how long the calibration server takes, and what a perfect client must see.

A load generator is only trustworthy if its figures match a server whose timing is known in
advance; this is that timing, and the figures it implies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagemeter.bounds import MAX_WAIT_S
from sagemeter.errors import UserError

_DURATION = re.compile(r"^\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>ms|us|µs|s|m|h)?\s*$")
_UNIT_SECONDS = {
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "m": 60.0,
    "h": 3600.0,
    None: 1.0,
}
# One prompt token may take at most this long: a second per token is no server anyone measures.
MAX_PREFILL_S = 1.0


@dataclass(frozen=True)
class TruthTiming:
    """Time to first token, the gap between tokens and the time per prompt token, in seconds.

    One streamed request asking N tokens whose prompt has P tokens (the server's count,
    `sagemeter.calibrate.prompts`), C of them served by the prefix cache: content chunk k
    (1-based) leaves at ttft + (P - C) * prefill + (k - 1) * itl after the request arrived, and
    the last chunk (finish_reason "length", usage) with `data: [DONE]` at
    ttft + (P - C) * prefill + N * itl. With `prefix_cache`, a prompt's leading full blocks of
    16 tokens that an earlier prompt had are C (vLLM's rule); without it C is 0.
    """

    ttft_s: float
    itl_s: float
    prefill_s: float = 0.0
    prefix_cache: bool = False

    def __post_init__(self) -> None:
        for name, value in (("ttft", self.ttft_s), ("itl", self.itl_s)):
            if not value >= 0.0 or value > 3600.0:
                raise UserError(f"{name} {value!r} s: give a duration from 0 to 3600 seconds")
        if not 0.0 <= self.prefill_s <= MAX_PREFILL_S:
            raise UserError(
                f"prefill {self.prefill_s!r} s: give a time per prompt token from 0 to "
                f"{MAX_PREFILL_S:g} s"
            )

    @property
    def tpot_s(self) -> float:
        """Time per output token (first token excluded) equals the inter-token gap here."""
        return self.itl_s

    @property
    def prefill_tokens_per_second(self) -> float | None:
        """The prefill rate a perfect client measures; None when prompts cost nothing."""
        return 1.0 / self.prefill_s if self.prefill_s > 0 else None

    def first_token_seconds(self, prompt_tokens: int = 0, cached_tokens: int = 0) -> float:
        """Request arrival to the first token, for a prompt of `prompt_tokens` tokens of which
        `cached_tokens` came from the prefix cache."""
        return self.ttft_s + max(prompt_tokens - cached_tokens, 0) * self.prefill_s

    def request_seconds(self, tokens: int, prompt_tokens: int = 0) -> float:
        """Request arrival to the final chunk of a reply of `tokens` tokens (nothing cached)."""
        return self.first_token_seconds(prompt_tokens) + tokens * self.itl_s

    def tokens_per_second(self, concurrency: int, tokens: int) -> float:
        """Output tokens per second of `concurrency` closed-loop streams with no client gap."""
        return concurrency * tokens / self.request_seconds(tokens)


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds from '50ms', '0.05s', '250us', '3m', '1h' or a bare number of seconds ('0.05'),
    at most a day (`limits.MAX_WAIT_S`): every duration of every face is read here."""
    match = _DURATION.match(text)
    shown = repr(text if len(text) <= 40 else text[:40] + "…")
    if match is None:
        raise UserError(
            f"{what} {shown}: give a duration such as 50ms, 0.05s, 3m or 0.05 (seconds)"
        )
    seconds = float(match["number"]) * _UNIT_SECONDS[match["unit"]]
    if not seconds <= MAX_WAIT_S:  # a mistyped duration would wait for ever (or overflow)
        raise UserError(f"{what} {shown}: more than a day; give at most 24h")
    return seconds


def duration_field(value: object) -> object:
    """A settings field's value as a pydantic before-validator takes it: a string such as
    "120s" or "500ms" becomes seconds (a bad one a ValueError naming only the problem, which
    pydantic puts after the key); a number passes through."""
    if isinstance(value, str):
        try:
            return parse_duration(value, repr(value))
        except UserError as exc:
            raise ValueError(str(exc).removeprefix(f"{value!r} ")) from None
    return value
