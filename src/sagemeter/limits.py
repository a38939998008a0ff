"""The bounds every value shares wherever it enters (CLI options, plan tables, MCP arguments),
and the one parser of a list of levels, so no face accepts what another refuses.

A bound here is a sanity limit, not a tuning: far above any real measurement, low enough that a
mistyped value (a level of 10,000 entries, 10^20 repeats, a timeout of a century, a price of
infinity) is one clear line before any work instead of a run that never ends. The README's
"Limits" section states them.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, TypeVar

from pydantic import Field, TypeAdapter, ValidationError

from sagemeter.bounds import (
    MAX_CONCURRENCY,
    MAX_COST_USD,
    MAX_DEADLINE_MINUTES,
    MAX_LEVELS,
    MAX_PRICE_PER_HOUR,
    MAX_SEED,
    MAX_TOKENS,
    MAX_WAIT_S,
    MAX_WORKERS,
)
from sagemeter.errors import UserError

# Constrained types for pydantic models and MCP tool arguments: finite, in range.
Seconds = Annotated[float, Field(gt=0, le=MAX_WAIT_S, allow_inf_nan=False)]
WaitSeconds = Annotated[float, Field(ge=0, le=MAX_WAIT_S, allow_inf_nan=False)]
PricePerHour = Annotated[float, Field(gt=0, le=MAX_PRICE_PER_HOUR, allow_inf_nan=False)]
CostUsd = Annotated[float, Field(gt=0, le=MAX_COST_USD, allow_inf_nan=False)]
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
Seed = Annotated[int, Field(ge=-MAX_SEED - 1, le=MAX_SEED)]
DeadlineMinutes = Annotated[float, Field(gt=0, le=MAX_DEADLINE_MINUTES, allow_inf_nan=False)]
Workers = Annotated[int, Field(ge=1, le=MAX_WORKERS)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Temperature = Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)]
TopK = Annotated[int, Field(ge=1, le=20)]  # logprobs per position: what servers give (vLLM: 20)

T = TypeVar("T")


def checked(value: T, kind: Any, label: str) -> T:
    """`value` if it is of `kind` (one of the types above), else one line naming `label`: the
    CLI's options are checked by the same types as the plan's and the MCP tools' fields."""
    try:
        TypeAdapter(kind).validate_python(value, strict=False)
    except ValidationError as exc:
        raise UserError(f"{label} {value!r}: {exc.errors()[0]['msg']}") from None
    return value


_NONE = frozenset({"", "0", "none", "off"})


def check_levels(
    levels: list[int], label: str = "--levels", *, most: int = MAX_CONCURRENCY
) -> None:
    """Requests at once: at most MAX_LEVELS whole numbers from 1 to `most`, each given once."""
    if len(levels) > MAX_LEVELS:
        raise UserError(f"{label}: {len(levels):,} levels given; give at most {MAX_LEVELS}")
    for level in levels:
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= most:
            raise UserError(
                f"{label}: {level}: give 1–{most} requests at once (a positive whole number)"
            )
    twice = sorted({level for level in levels if levels.count(level) > 1})
    if twice:
        raise UserError(f"{label}: {', '.join(map(str, twice))} given twice; give each level once")


def parse_levels(
    text: str, label: str = "--levels", *, allow_none: bool = False, most: int = MAX_CONCURRENCY
) -> list[int]:
    """`1,4,16` → [1, 4, 16], checked by `check_levels`; with `allow_none`, `none`, `off` or `0`
    → [] (the phase is not run). The one reader of levels for the CLI, plans and MCP."""
    if allow_none and text.strip().lower() in _NONE:
        return []
    if len(text) > 10_000:
        raise UserError(f"{label}: {len(text):,} characters; give at most {MAX_LEVELS} levels")
    try:
        levels = [int(part) for part in text.split(",")]
    except ValueError:
        hint = ", or none" if allow_none else ""
        raise UserError(
            f"{label} {text!r}: give whole numbers separated by commas (e.g. 1,4,16){hint}"
        ) from None
    check_levels(levels, label, most=most)
    return levels


def check_price(value: float | None, label: str = "--price-per-hour") -> None:
    """A price is a positive, finite number of USD (inf and nan are refused too), at most
    `MAX_PRICE_PER_HOUR`: the check of every command's --price-per-hour."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_PRICE_PER_HOUR):
        raise UserError(
            f"{label} {value!r}: give a positive number of USD up to {MAX_PRICE_PER_HOUR:,.0f}, "
            "e.g. 1.1267"
        )
