"""Does the article's differential decode rate agree with the engine's own figure?

For each embedded checkpoint: the article's method (16 and 512 tokens, five each) through our
client, against llama.cpp's own `timings.predicted_per_second` on the same long replies.
Target: within 3%.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.engines.llamacpp import LocalEngine
from sagemeter.measure.decode import measure_decode
from sagemeter.transport.openai import OpenAIChat

CHECKPOINTS = ("smollm2-q4_1", "smollm2-f32")


async def _measure(url: str, name: str) -> dict[str, Any]:
    async with OpenAIChat(url, model=name) as client:
        detail = await measure_decode(client, short_tokens=16, long_tokens=512, repeats=5)
    assert detail.tokens_per_second is not None and detail.engine_tokens_per_second is not None
    engine = detail.engine_tokens_per_second.median
    assert engine is not None
    return {
        "differential_tokens_per_second": detail.tokens_per_second,
        "least_squares_tokens_per_second": detail.least_squares_tokens_per_second,
        "engine_tokens_per_second_median": engine,
        "engine_tokens_per_second_min": detail.engine_tokens_per_second.min,
        "engine_tokens_per_second_max": detail.engine_tokens_per_second.max,
        "relative_difference": detail.tokens_per_second / engine - 1.0,
        "per_call_fixed_cost_s": detail.per_call_fixed_cost_s,
        # Null with the measurement's own reason (a two-length line can put it below zero).
        "per_call_fixed_cost_problem": next(
            (p for p in detail.problems if p.startswith("no per-call fixed cost")), None
        ),
        "long_reply_seconds": detail.long_times_s,
    }


def run() -> dict[str, Any]:
    results = {}
    for name in CHECKPOINTS:
        with LocalEngine(resolve_checkpoint(name)) as engine:
            assert engine.base_url is not None
            results[name] = asyncio.run(_measure(engine.base_url, name))
    return {"target_relative_difference": 0.03, "checkpoints": results}


def to_markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Decode rate: the article's differential method against the engine's own figure",
        "",
        "16- and 512-token replies, five of each, temperature 0, ignore_eos, embedded llama.cpp, "
        f"one request at a time. Target: within {result['target_relative_difference']:.0%}.",
        "",
        "| checkpoint | differential tok/s | least-squares tok/s "
        "| engine tok/s median (min–max) | difference | fixed cost s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in result["checkpoints"].items():
        lines.append(
            f"| {name} | {row['differential_tokens_per_second']:.2f} | "
            f"{row['least_squares_tokens_per_second']:.2f} | "
            f"{row['engine_tokens_per_second_median']:.2f} "
            f"({row['engine_tokens_per_second_min']:.2f}–{row['engine_tokens_per_second_max']:.2f})"
            f" | {row['relative_difference']:+.2%} | {_fixed_cost(row)} |"
        )
    return "\n".join(lines) + "\n"


def _fixed_cost(row: dict[str, Any]) -> str:
    """The per-call fixed cost, or none with the measurement's reason."""
    fixed = row["per_call_fixed_cost_s"]
    if fixed is not None:
        return f"{fixed:.4f}"
    return f"none: {row.get('per_call_fixed_cost_problem') or 'not measured'}"
