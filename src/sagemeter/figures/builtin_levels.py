"""sagemeter's own figures keyed by a level, each family declared once: the throughput at each
concurrency of the load phase, the long prompts' throughput and first-token waits at each of
their levels, and the cost per million output tokens at each concurrency.

Their values are written at the result's top level by the phases that measure them (one
`{level: value}` object under each family's name); the cost is priced when compared. Registered
like a plug-in's families; their order here is the order of each level's rows in `combine`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sagemeter.figures.declaration import LevelFigure, LevelValues

if TYPE_CHECKING:
    from sagemeter.results.model import MeasureResult

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


def _endpoint(field: str) -> Callable[[MeasureResult], LevelValues]:
    """One of an endpoint's own CloudWatch figures at each phase its result holds (null where
    it did not arrive: `detail.endpoint_metrics` says why); none for another backend's."""

    def read(result: MeasureResult) -> LevelValues:
        metrics = result.detail.endpoint_metrics if result.detail is not None else None
        phases = metrics.phases if metrics is not None else []
        return {phase.phase: getattr(phase, field) for phase in phases}

    return read


# An endpoint's own account of each phase (a SageMaker endpoint's CloudWatch means), kept in the
# result's detail rather than at its top level; each phase's four rows together, in the order
# the files hold the phases.
def _endpoint_family(field: str, what: str, unit: str, better: str = "none") -> LevelFigure:
    """An endpoint's CloudWatch mean `field` at each phase: `endpoint_{phase}_{field}`."""
    return LevelFigure(
        name=f"endpoint_{field}",
        key_template=f"endpoint_{{level}}_{field}",
        label_template=f"Endpoint, {{level}}: {what}, mean ({unit})",
        level_name="phase",
        level_unit="a phase of the measurement",
        unit=unit,
        better=better,
        group="endpoint",
        stored=False,
        read=_endpoint(field),
        named_levels=True,
    )


ENDPOINT_MODEL_LATENCY = _endpoint_family("model_latency_ms", "model latency", "ms", "lower")
ENDPOINT_OVERHEAD_LATENCY = _endpoint_family(
    "overhead_latency_ms", "overhead latency", "ms", "lower"
)
ENDPOINT_CLIENT_AND_NETWORK = _endpoint_family(
    "client_and_network_ms", "client and network", "ms", "lower"
)
ENDPOINT_GPU_UTILIZATION = _endpoint_family("gpu_utilization_pct", "GPU utilization", "%")
