"""Cost per million output tokens: an hourly price spread over what the endpoint serves.

Holds only while the endpoint is kept busy: it bills per instance-hour, busy or idle.
"""

from __future__ import annotations

import math

from sagemeter.errors import UserError
from sagemeter.limits import MAX_PRICE_PER_HOUR


def cost_per_million_tokens(price_per_hour: float, tokens_per_second: float) -> float:
    """USD per 1,000,000 output tokens at a steady `tokens_per_second`."""
    if tokens_per_second <= 0:
        raise ValueError("tokens_per_second must be positive")
    return price_per_hour / (tokens_per_second * 3600.0) * 1_000_000.0


def check_price(value: float | None, label: str = "--price-per-hour") -> None:
    """A price is a positive, finite number of USD (inf and nan are refused too), at most
    `limits.MAX_PRICE_PER_HOUR`: the check of every command's --price-per-hour."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_PRICE_PER_HOUR):
        raise UserError(
            f"{label} {value!r}: give a positive number of USD up to {MAX_PRICE_PER_HOUR:,.0f}, "
            "e.g. 1.1267"
        )
