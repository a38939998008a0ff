"""A server's own `/metrics` around each phase, beside the client's counts, as a result keeps
them (the result schema's; `sagemeter.measure.server_metrics` reads and compares them)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class HistogramDelta(BaseModel):
    """One server histogram over the phase: how many observations, their sum and mean, and the
    cumulative count at each bucket bound."""

    count: float
    sum: float
    mean: float | None
    buckets: dict[str, float] = Field(description="upper bound → observations at or below it")


class ClientCounts(BaseModel):
    """What the client saw over the same phase."""

    requests: int
    failed: int
    generation_tokens: int | None = Field(
        None, description="completion tokens of the answered requests (None without usage)"
    )
    ttft_mean_s: float | None = None
    inter_token_latency_mean_s: float | None = None


class PhaseMetrics(BaseModel):
    """The server's own counts over one phase, beside the client's, and whether they agree."""

    phase: str
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    requests: float | None = Field(None, description="requests the server finished (any reason)")
    histograms: dict[str, HistogramDelta] = Field(default_factory=dict)
    engine_tokens_per_second: float | None = Field(
        None,
        description="the engine's own decode rate over the phase: vLLM (tokens - 1 per request) "
        "/ decode time; llama.cpp tokens / generation seconds",
    )
    engine_prompt_tokens_per_second: float | None = Field(
        None,
        description="the engine's own prompt rate over the phase: prompt tokens it computed / "
        "the time it spent on prompts (vLLM: prompt tokens less its prefix-cache hits, over its "
        "request_prefill_time histogram; llama.cpp: prompt_seconds_total)",
    )
    client: ClientCounts
    agrees: bool | None = Field(None, description="None when the counts could not be compared")
    problems: list[str] = Field(
        default_factory=list, description="counts that disagree beyond counting noise"
    )
    notes: list[str] = Field(default_factory=list, description="what could not be compared")


class ServerMetrics(BaseModel):
    """`/metrics` around every phase of one measurement (or, in `notes`, why there are none)."""

    engine: str | None = Field(None, description="vllm or llama.cpp; None when not read")
    url: str | None = None
    phases: list[PhaseMetrics] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
