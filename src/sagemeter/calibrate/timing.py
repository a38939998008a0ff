"""The known truth: how long the calibration server takes, and what a perfect client must see.

A load generator is only trustworthy if its figures match a server whose timing is known in
advance; this is that timing, and the figures it implies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagemeter.errors import UserError

_DURATION = re.compile(r"^\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>ms|us|µs|s)?\s*$")
_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, None: 1.0}


@dataclass(frozen=True)
class TruthTiming:
    """Time to first token and the gap between tokens, both in seconds.

    One streamed request asking N tokens: content chunk k (1-based) leaves at
    ttft + (k - 1) * itl after the request arrived, and the last chunk (finish_reason "length",
    usage) with `data: [DONE]` at ttft + N * itl.
    """

    ttft_s: float
    itl_s: float

    def __post_init__(self) -> None:
        for name, value in (("ttft", self.ttft_s), ("itl", self.itl_s)):
            if not value >= 0.0 or value > 3600.0:
                raise UserError(f"{name} {value!r} s: give a duration from 0 to 3600 seconds")

    @property
    def tpot_s(self) -> float:
        """Time per output token (first token excluded) equals the inter-token gap here."""
        return self.itl_s

    def request_seconds(self, tokens: int) -> float:
        """Request arrival to the final chunk of a reply of `tokens` tokens."""
        return self.ttft_s + tokens * self.itl_s

    def tokens_per_second(self, concurrency: int, tokens: int) -> float:
        """Output tokens per second of `concurrency` closed-loop streams with no client gap."""
        return concurrency * tokens / self.request_seconds(tokens)


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds from '50ms', '0.05s', '250us' or a bare number of seconds ('0.05')."""
    match = _DURATION.match(text)
    if match is None:
        raise UserError(f"{what} {text!r}: give a duration such as 50ms, 0.05s or 0.05 (seconds)")
    return float(match["number"]) * _UNIT_SECONDS[match["unit"]]
