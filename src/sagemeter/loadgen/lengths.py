"""Token-length distributions for synthetic workloads: `fixed:N`, `uniform:A,B`,
`normal:MEAN,SD`, `lognormal:MEAN,SD`.

Every draw is a whole number of tokens, at least 1 (a normal's tail below 1 is drawn again, so the
mean stays what was asked as long as the tail is small). `lognormal` takes the mean and standard
deviation of the lengths themselves, not of their logarithm, so `lognormal:500,200` has a mean of
500 tokens. Draws come from Python's own Mersenne Twister seeded per use, the same on every
platform, so a seed replays the same lengths.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

from sagemeter.errors import UserError

Kind = Literal["fixed", "uniform", "normal", "lognormal"]
MAX_TOKENS = 10_000_000
REDRAWS = 1000  # a normal whose mass lies below 1 token is refused rather than looped on


@dataclass(frozen=True)
class LengthSpec:
    """A parsed distribution; `text` is how it was given (kept in the result)."""

    kind: Kind
    a: float
    b: float
    text: str

    @property
    def mean(self) -> float:
        """The mean asked (a normal's cut tail aside)."""
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a

    def draw(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        if self.kind == "lognormal":
            sigma2 = math.log(1 + (self.b / self.a) ** 2)
            value = rng.lognormvariate(math.log(self.a) - sigma2 / 2, math.sqrt(sigma2))
            return min(MAX_TOKENS, max(1, round(value)))
        for _ in range(REDRAWS):
            value = round(rng.gauss(self.a, self.b))
            if 1 <= value <= MAX_TOKENS:
                return value
        raise UserError(f"{self.text}: almost every draw is below 1 token; raise the mean")

    def sample(self, count: int, seed: int | str) -> list[int]:
        rng = random.Random(seed)
        return [self.draw(rng) for _ in range(count)]


def parse_lengths(text: str, flag: str) -> LengthSpec:
    """`fixed:N` and the rest, checked: one UserError line naming the flag when wrong."""
    kind, _, rest = text.strip().partition(":")
    hint = "give fixed:N, uniform:A,B, normal:MEAN,SD or lognormal:MEAN,SD (tokens)"
    try:
        numbers = [float(part) for part in rest.split(",")] if rest else []
    except ValueError:
        raise UserError(f"{flag} {text!r}: {hint}") from None
    if not all(math.isfinite(n) for n in numbers):
        raise UserError(f"{flag} {text!r}: {hint}")
    given = f"{flag} {text!r}"
    if kind == "fixed" and len(numbers) == 1:
        n = numbers[0]
        if not (n.is_integer() and 1 <= n <= MAX_TOKENS):
            raise UserError(f"{given}: give a whole number of tokens from 1 to {MAX_TOKENS:,}")
        return LengthSpec("fixed", n, n, text)
    if kind == "uniform" and len(numbers) == 2:
        low, high = numbers
        if not (low.is_integer() and high.is_integer() and 1 <= low <= high <= MAX_TOKENS):
            raise UserError(f"{given}: give whole numbers 1 ≤ A ≤ B ≤ {MAX_TOKENS:,}")
        return LengthSpec("uniform", low, high, text)
    if kind in ("normal", "lognormal") and len(numbers) == 2:
        mean, sd = numbers
        if not (1 <= mean <= MAX_TOKENS and sd >= 0):
            raise UserError(f"{given}: give a mean from 1 to {MAX_TOKENS:,} and an SD ≥ 0")
        if kind == "lognormal" and sd == 0:
            return LengthSpec("fixed", float(round(mean)), float(round(mean)), text)
        return LengthSpec(kind, mean, sd, text)  # type: ignore[arg-type]
    raise UserError(f"{given}: {hint}")
