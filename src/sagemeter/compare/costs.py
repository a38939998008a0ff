"""Cost per million output tokens: an hourly price spread over what the endpoint serves.

Holds only while the endpoint is kept busy: it bills per instance-hour, busy or idle.
"""

from __future__ import annotations

from sagemeter.limits import check_price as check_price  # one rule, kept in limits


def cost_per_million_tokens(price_per_hour: float, tokens_per_second: float) -> float:
    """USD per 1,000,000 output tokens at a steady `tokens_per_second`."""
    if tokens_per_second <= 0:
        raise ValueError("tokens_per_second must be positive")
    return price_per_hour / (tokens_per_second * 3600.0) * 1_000_000.0
