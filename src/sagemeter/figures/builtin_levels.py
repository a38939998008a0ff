"""sagemeter's own figures keyed by a level, each family declared once: the throughput at each
concurrency of the load phase, the long prompts' throughput and first-token waits at each of
their levels, and the cost per million output tokens at each concurrency.

Their values are written at the result's top level by the phases that measure them (one
`{level: value}` object under each family's name); the cost is priced when compared. Registered
like a plug-in's families; their order here is the order of each level's rows in `combine`.
"""

from __future__ import annotations

from sagemeter.figures.declaration import LevelFigure

LOAD = LevelFigure(
    name="load_tokens_per_second",
    key_template="load_c{level}_tokens_per_second",
    label_template="{level} at once (tokens/s)",
    level_name="concurrency",
    level_unit="requests at once",
    unit="tokens/s",
    better="higher",
    speed=True,
    group="load",
    short_template="c{level} tok/s",
)
LONG_PROMPT = LevelFigure(
    name="long_prompt_tokens_per_second",
    key_template="long_prompt_c{level}_tokens_per_second",
    label_template="{level} at once, long prompts (tokens/s)",
    level_name="concurrency",
    level_unit="requests at once, each its own long prompt",
    unit="tokens/s",
    better="higher",
    speed=True,
    group="long_prompt",
    short_template="long c{level} tok/s",
)
LONG_PROMPT_TTFT_P50 = LevelFigure(
    name="long_prompt_ttft_p50_ms",
    key_template="long_prompt_c{level}_ttft_p50_ms",
    label_template="{level} at once, long prompts (TTFT p50, ms)",
    level_name="concurrency",
    level_unit="requests at once, each its own long prompt",
    unit="ms",
    better="lower",
    group="long_prompt",
    short_template="long c{level} ttft p50 ms",
)
LONG_PROMPT_TTFT_P90 = LevelFigure(
    name="long_prompt_ttft_p90_ms",
    key_template="long_prompt_c{level}_ttft_p90_ms",
    label_template="{level} at once, long prompts (TTFT p90, ms)",
    level_name="concurrency",
    level_unit="requests at once, each its own long prompt",
    unit="ms",
    better="lower",
    group="long_prompt",
    short_template="long c{level} ttft p90 ms",
)
LOAD_COST = LevelFigure(
    name="usd_per_million_tokens",
    key_template="usd_per_million_tokens_c{level}",
    label_template="{level} at once ($ per M output tokens)",
    level_name="concurrency",
    level_unit="requests at once",
    unit="USD/M tokens",
    better="lower",
    group="cost",
    stored=False,
    short_template="USD/Mtok c{level}",
    priced_from=LOAD.name,
)
