"""One phase seen from both ends: the server's counts and histograms beside the client's.

The server's figures are differences between a snapshot taken before the phase and one after
it (settled: read again until the counters stop moving, since an engine may publish its last
step's counts a moment after the client has its last byte). Counts are compared, and a
disagreement beyond counting noise is flagged; latency histograms are shown beside the client's
means but not judged, since the server's clock starts after the request has crossed the wire.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field

from sagemeter.measure.server_metrics.prefix_cache import cache_counts
from sagemeter.measure.server_metrics.scrape import Histogram, Snapshot
from sagemeter.request_record import RequestRecord
from sagemeter.results.server_metrics import ClientCounts, HistogramDelta, PhaseMetrics

# Counts may differ by this share (rounded down) before a phase is flagged: a stats tick that
# lands after the settled read. Below 500 tokens or requests that means exactly.
COUNT_NOISE = 0.002


class MetricNames(BaseModel):
    """Where one engine keeps each figure in its `/metrics`."""

    generation_tokens: str
    prompt_tokens: str
    requests: str | None = None
    histograms: dict[str, str] = Field(default_factory=dict)
    generation_seconds: str | None = None  # llama.cpp: time spent generating
    prompt_seconds: str | None = None  # llama.cpp: time spent on prompts


VLLM_NAMES = MetricNames(
    generation_tokens="vllm:generation_tokens_total",
    prompt_tokens="vllm:prompt_tokens_total",
    requests="vllm:request_success_total",
    histograms={
        "ttft_s": "vllm:time_to_first_token_seconds",
        "inter_token_latency_s": "vllm:inter_token_latency_seconds",
        "e2e_s": "vllm:e2e_request_latency_seconds",
        "decode_time_s": "vllm:request_decode_time_seconds",
        "prefill_time_s": "vllm:request_prefill_time_seconds",
        "generation_tokens_per_request": "vllm:request_generation_tokens",
    },
)
# vLLM before the inter-token histogram was named so.
VLLM_OLD_ITL = "vllm:time_per_output_token_seconds"
LLAMACPP_NAMES = MetricNames(
    generation_tokens="llamacpp:tokens_predicted_total",
    prompt_tokens="llamacpp:prompt_tokens_total",
    generation_seconds="llamacpp:tokens_predicted_seconds_total",
    prompt_seconds="llamacpp:prompt_seconds_total",
)
NAMES = {"vllm": VLLM_NAMES, "llama.cpp": LLAMACPP_NAMES}


def client_counts(
    records: Sequence[RequestRecord],
    requests: int | None = None,
    unrecorded: tuple[int, int] = (0, 0),
) -> ClientCounts:
    """The client's side of a phase from its request records (`requests` when it kept none),
    plus `unrecorded` (requests, tokens) it sent without keeping a record."""
    answered = [r for r in records if r.ok]
    tokens = None
    if answered and all(r.tokens_source == "usage" for r in answered):
        tokens = sum(r.tokens for r in answered) + unrecorded[1]
    ttfts = [r.first_token_s for r in answered if r.first_token_s is not None]
    gaps = [gap for r in answered for gap in r.gaps_s()]
    return ClientCounts(
        requests=(len(records) if requests is None else requests) + unrecorded[0],
        failed=len(records) - len(answered),
        generation_tokens=tokens,
        ttft_mean_s=sum(ttfts) / len(ttfts) if ttfts else None,
        inter_token_latency_mean_s=sum(gaps) / len(gaps) if gaps else None,
    )


def _delta(before: Snapshot, after: Snapshot, name: str | None) -> float | None:
    if name is None or name not in after.samples:
        return None
    return after.samples[name] - before.samples.get(name, 0.0)


def _histogram_delta(before: Histogram | None, after: Histogram) -> HistogramDelta:
    base = before or Histogram()
    count = after.count - base.count
    total = after.sum - base.sum
    buckets = {
        ("+Inf" if math.isinf(bound) else f"{bound:g}"): value - base.buckets.get(bound, 0.0)
        for bound, value in sorted(after.buckets.items())
    }
    return HistogramDelta(
        count=count, sum=total, mean=total / count if count > 0 else None, buckets=buckets
    )


def _engine_rate(
    engine: str, before: Snapshot, after: Snapshot, phase: PhaseMetrics
) -> float | None:
    if engine == "vllm":
        decode = phase.histograms.get("decode_time_s")
        if decode is None or phase.generation_tokens is None or phase.requests is None:
            return None
        tokens = phase.generation_tokens - phase.requests  # the first token is not decoded
        return tokens / decode.sum if decode.sum > 0 and tokens > 0 else None
    seconds = _delta(before, after, LLAMACPP_NAMES.generation_seconds)
    if seconds and phase.generation_tokens:
        return phase.generation_tokens / seconds
    return None


def _engine_prompt_rate(
    engine: str, before: Snapshot, after: Snapshot, phase: PhaseMetrics
) -> float | None:
    """Prompt tokens computed over the time the engine says it spent on prompts in the phase;
    vLLM's tokens served from its prefix cache (counted as prompt tokens, but not computed) are
    taken out."""
    tokens = phase.prompt_tokens
    if engine == "vllm":
        prefill = phase.histograms.get("prefill_time_s")
        seconds = prefill.sum if prefill is not None else None

        first, last = cache_counts(before), cache_counts(after)
        if tokens is not None and first is not None and last is not None:
            tokens -= last.hits - first.hits
    else:
        seconds = _delta(before, after, LLAMACPP_NAMES.prompt_seconds)
    if seconds and seconds > 0 and tokens and tokens > 0:
        return tokens / seconds
    return None


def _within_noise(server: float, client: float) -> bool:
    return abs(server - client) <= math.floor(COUNT_NOISE * max(server, client))


def compare_phase(
    phase_name: str,
    engine: str,
    before: Snapshot,
    after: Snapshot,
    client: ClientCounts,
) -> PhaseMetrics:
    """The server's figures of one phase from two snapshots, judged against the client's."""
    names = NAMES[engine]
    phase = PhaseMetrics(
        phase=phase_name,
        generation_tokens=_delta(before, after, names.generation_tokens),
        prompt_tokens=_delta(before, after, names.prompt_tokens),
        requests=_delta(before, after, names.requests),
        client=client,
    )
    histogram_names = dict(names.histograms)
    if engine == "vllm" and histogram_names["inter_token_latency_s"] not in after.histograms:
        histogram_names["inter_token_latency_s"] = VLLM_OLD_ITL
    for key, name in histogram_names.items():
        if name in after.histograms:
            phase.histograms[key] = _histogram_delta(
                before.histograms.get(name), after.histograms[name]
            )
    phase.engine_tokens_per_second = _engine_rate(engine, before, after, phase)
    phase.engine_prompt_tokens_per_second = _engine_prompt_rate(engine, before, after, phase)
    _judge(phase)
    return phase


def _judge(phase: PhaseMetrics) -> None:
    client = phase.client
    checks: list[bool] = []
    if phase.requests is not None:
        checks.append(_within_noise(phase.requests, client.requests))
        if not checks[-1]:
            phase.problems.append(
                f"{phase.phase}: the server finished {phase.requests:,.0f} requests, the client "
                f"sent {client.requests:,}"
            )
    if client.failed:
        phase.notes.append(
            f"{phase.phase}: tokens not compared, {client.failed} requests failed on the client"
        )
    elif phase.generation_tokens is not None and client.generation_tokens is not None:
        checks.append(_within_noise(phase.generation_tokens, client.generation_tokens))
        if not checks[-1]:
            phase.problems.append(
                f"{phase.phase}: the server counted {phase.generation_tokens:,.0f} generated "
                f"tokens, the client {client.generation_tokens:,} (beyond counting noise)"
            )
    phase.agrees = all(checks) if checks else None
