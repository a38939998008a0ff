"""sagemeter's own figures, each declared once: its key, unit, better direction, format, label,
how `combine` compares it, and how it is computed from the measurement's records.

Registered in pyproject.toml under `sagemeter.figures` like a plug-in's; their order here is
the order of their rows in `combine` within each group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sagemeter.figures.declaration import Declared
from sagemeter.results.predicted_decode import compared

if TYPE_CHECKING:
    from sagemeter.evidence.distribution import Spread
    from sagemeter.results.checkpoint_facts import CheckpointFacts
    from sagemeter.results.model import Detail, MeasureResult, PrefillDetail


def _valid_decode(detail: Detail, field: str) -> float | None:
    decode = detail.decode
    if decode is None or not decode.valid:
        return None
    value: float | None = getattr(decode, field)
    return value


def _decode_median(detail: Detail | None, field: str, scale: float = 1.0) -> float | None:
    """The median of one of the decode phase's spreads (its complete long replies)."""
    decode = detail.decode if detail is not None else None
    found: Spread | None = getattr(decode, field, None) if decode is not None else None
    return found.median * scale if found is not None else None


def _prefill_rate(detail: Detail) -> float | None:
    prefill = detail.prefill
    return prefill.tokens_per_second if prefill is not None and prefill.valid else None


def long_prompt_ttft_ms(prefill: PrefillDetail | None) -> float | None:
    """The long prompts' median TTFT, when every repeat of them was counted by the server."""
    if prefill is None or len(prefill.long_ttft_s) < prefill.repeats or not prefill.long_ttft:
        return None
    return prefill.long_ttft.median * 1000.0


def _startup(field: str) -> Callable[[Detail], float | None]:
    def compute(detail: Detail) -> float | None:
        value = getattr(detail.startup, field, None) if detail.startup is not None else None
        return None if value is None else float(value)

    return compute


def _from_detail(field: str, scale: float = 1.0) -> Callable[[MeasureResult], float | None]:
    """The comparison's reading: the detail's median unrounded (None without a detail)."""

    def read(result: MeasureResult) -> float | None:
        return _decode_median(result.detail, field, scale)

    return read


def tokens_per_gb_read(facts: CheckpointFacts | None) -> float | None:
    """1e9 / bytes per decoded token, or None without facts."""
    if facts is None or facts.decode.bytes_per_token <= 0:
        return None
    return 1e9 / facts.decode.bytes_per_token


def _ceiling(detail: Detail) -> float | None:
    predicted = detail.environment.predicted_decode
    return predicted.ceiling_tokens_per_second if predicted is not None else None


def _measured_over_ceiling(result: MeasureResult) -> float | None:
    """Measured decode / the predicted ceiling, where the prediction's type is the one placed."""
    found = compared(result)
    return found.measured_over_ceiling if found is not None else None


WEIGHTS = Declared(
    key="weights_gib",
    label="Weights (GiB)",
    unit="GiB",
    compute_with=_startup("weights_gib"),
    digits=None,
    group="startup",
    drifts=False,
)
KV_CACHE = Declared(
    key="kv_cache_tokens",
    label="KV cache (tokens)",
    unit="tokens",
    compute_with=_startup("kv_cache_tokens"),
    digits=None,
    integer=True,
    group="startup",
    drifts=False,
)
LOAD_SECONDS = Declared(
    key="load_seconds",
    label="Weight load (s)",
    unit="s",
    compute_with=_startup("load_seconds"),
    digits=None,
    group="startup",
)
DECODE = Declared(
    key="decode_tokens_per_second",
    label="Decode (tokens/s)",
    unit="tokens/s",
    compute_with=lambda detail: _valid_decode(detail, "tokens_per_second"),
    better="higher",
    speed=True,
    group="decode",
)
# Beside the measured decode: tokens per GB of weights read, the decode ceiling in tokens/s per
# GB/s of memory bandwidth, from the checkpoint's facts; its ratio is the predicted decode ratio.
PREDICTED = Declared(
    key="predicted_decode_tokens_per_gb",
    label="Predicted decode (tokens per GB read)",
    unit="tokens/GB",
    compute_with=lambda detail: tokens_per_gb_read(detail.environment.checkpoint_facts),
    group="predicted",
    stored=False,
    drifts=False,
    short="predicted tok/s/GB",
)
# A SageMaker arm whose plan carried `sagemaker recommend`'s prediction: its decode ceiling, and
# the measured decode over it (null where another instance type was placed).
CEILING = Declared(
    key="predicted_decode_ceiling_tokens_per_second",
    label="Predicted decode ceiling (tokens/s)",
    unit="tokens/s",
    compute_with=_ceiling,
    group="ceiling",
    stored=False,
    drifts=False,
)
MEASURED_OVER_CEILING = Declared(
    key="decode_measured_over_predicted_ceiling",
    label="Measured decode / predicted ceiling",
    unit="ratio",
    compute_with=lambda detail: None,  # needs the result's decode: read off the result
    group="ceiling",
    stored=False,
    read=_measured_over_ceiling,
    drifts=False,
)
FIXED_COST = Declared(
    key="per_call_fixed_cost_seconds",
    label="Per-call fixed cost (s)",
    unit="s",
    compute_with=lambda detail: _valid_decode(detail, "per_call_fixed_cost_s"),
    better="lower",
    group="call",
    short="fixed cost s",
)
ENGINE_DECODE = Declared(
    key="engine_decode_tokens_per_second",
    label="Engine's own decode (tokens/s)",
    unit="tokens/s",
    compute_with=lambda detail: _decode_median(detail, "engine_tokens_per_second"),
    better="higher",
    speed=True,
    group="streaming",
    stored=False,
)
TTFT = Declared(
    key="ttft_median_ms",
    label="Time to first token, median (ms)",
    unit="ms",
    compute_with=lambda detail: _decode_median(detail, "ttft_s", 1000.0),
    better="lower",
    group="streaming",
    read=_from_detail("ttft_s", 1000.0),
)
INTER_TOKEN = Declared(
    key="inter_token_latency_median_ms",
    label="Inter-token latency, median (ms)",
    unit="ms",
    compute_with=lambda detail: _decode_median(detail, "inter_token_latency_s", 1000.0),
    better="lower",
    digits=4,
    group="streaming",
    read=_from_detail("inter_token_latency_s", 1000.0),
    short="ITL median ms",
)
PREFILL = Declared(
    key="prefill_tokens_per_second",
    label="Prefill (prompt tokens/s)",
    unit="tokens/s",
    compute_with=_prefill_rate,
    better="higher",
    speed=True,
    group="prefill",
)
TTFT_LONG_PROMPT = Declared(
    key="ttft_long_prompt_ms",
    label="Time to first token, long prompt (ms)",
    unit="ms",
    compute_with=lambda detail: long_prompt_ttft_ms(detail.prefill),
    better="lower",
    group="prefill",
)


def _correct(result: MeasureResult) -> float | None:
    """The count of correct answers: None when the file answered no question (nothing to
    count), read off the `quality` string so the article's files without a detail have it."""
    counts = result.quality_counts()
    return float(counts[0]) if counts is not None and counts[1] else None


def _correct_in(detail: Detail) -> float | None:
    quality = detail.quality
    return float(quality.correct) if quality is not None and quality.answered_count else None


# The quality phase's count, beside the answers' verdict: not written at the top level (the
# result's `quality` says "correct/answered"), its row after the other figures' in `combine`.
QUALITY_CORRECT = Declared(
    key="quality_correct",
    label="Correct answers",
    unit="answers",
    compute_with=_correct_in,
    better="higher",
    digits=None,
    integer=True,
    group="quality",
    stored=False,
    read=_correct,
    counted=True,
)


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


# The cost at your SLO (a plan's [slo] table): written at the result's top level by the
# operating-point search (measure/slo.py), not computed from the records (so not `stored` by
# the registry); `combine` builds their rows itself (the cost at the comparison's price).
SLO_CONCURRENCY = Declared(
    key="slo_concurrency",
    label="Requests at once at the SLO",
    unit="requests",
    compute_with=lambda detail: None,
    better="higher",
    digits=None,
    group="slo",
    stored=False,
    read=lambda result: _float(result.slo_concurrency),
)
SLO_RATE = Declared(
    key="slo_rate",
    label="Requests/s at the SLO",
    unit="requests/s",
    compute_with=lambda detail: None,
    better="higher",
    group="slo",
    stored=False,
    read=lambda result: result.slo_rate,
)
SLO_THROUGHPUT = Declared(
    key="slo_tokens_per_second",
    label="Output tokens/s at the SLO",
    unit="tokens/s",
    compute_with=lambda detail: None,
    better="higher",
    speed=True,
    group="slo",
    stored=False,
    read=lambda result: result.slo_tokens_per_second,
)
SLO_COST = Declared(
    key="usd_per_million_tokens_at_slo",
    label="$ per M output tokens at the SLO",
    unit="USD/M tokens",
    compute_with=lambda detail: None,
    better="lower",
    group="slo",
    stored=False,
    read=lambda result: result.usd_per_million_tokens_at_slo,
    priced_from=SLO_THROUGHPUT.key,
)
SLO_FIGURES = (SLO_CONCURRENCY, SLO_RATE, SLO_THROUGHPUT, SLO_COST)
