"""The structured content of the tools whose answer is not one library model as it is."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sagemeter import sagemaker as sm
from sagemeter.compare import Comparison
from sagemeter.engines.checkpoints import CheckpointRow


class QuotaAnswer(BaseModel):
    instance_type: str
    rows: list[sm.QuotaRow]


class DeployAnswer(BaseModel):
    dry_run: bool
    result: sm.DeployResult | None = Field(None, description="what happened (not on a dry run)")
    plans: list[sm.PlannedRegion] = Field(
        default_factory=list, description="dry run: the create requests per region, secrets masked"
    )


class InvokeAnswer(BaseModel):
    endpoint: str
    text: str
    completion_tokens: int | None
    total_s: float
    first_token_s: float | None
    finish_reason: str | None


class MeasureAnswer(BaseModel):
    """The figures are filled from the figure registry; a plug-in's figures (the entry-point
    group `sagemeter.figures`) are keys of their own beside sagemeter's."""

    model_config = ConfigDict(extra="allow")

    name: str
    target: str
    path: str = Field(description="the result file, for compare_results")
    decode_tokens_per_second: float | None
    per_call_fixed_cost_seconds: float | None
    prefill_tokens_per_second: float | None = Field(
        None, description="prompt tokens per second (null: not measured; see incomplete_because)"
    )
    ttft_long_prompt_ms: float | None = Field(
        None, description="time to first token at the long prompt, median"
    )
    load_tokens_per_second: dict[str, float | None] = Field(
        description="keyed by requests at once; null for a level with no figure (see "
        "incomplete_because)"
    )
    long_prompt_tokens_per_second: dict[str, float | None] = Field(
        default_factory=dict,
        description="long prompts under load, keyed by requests at once (empty: not measured)",
    )
    quality: str | None = Field(description='"correct/answered" (unanswered are left out)')
    ttft_median_ms: float | None = None
    inter_token_latency_median_ms: float | None = None
    weights_gib: float | None
    kv_cache_tokens: int | None
    load_seconds: float | None
    quick: bool
    complete: bool = Field(True, description="False when a figure asked for is missing")
    incomplete_because: list[str] = Field(default_factory=list)
    failed_requests: int
    retries: int = 0
    warnings: list[str]
    stopped: list[str] = Field(
        default_factory=list,
        description="with speed_precision: how decode and each parallel level ended, e.g. "
        '"decode: stopped after 7 of at most 20 repeats because …"',
    )


class CompareAnswer(Comparison):
    path: str = Field(description="where the comparison JSON was written")


class CheckpointsAnswer(BaseModel):
    checkpoints: list[CheckpointRow]


class LocalEngineAnswer(BaseModel):
    checkpoint: str
    target: str = Field(description="the engine's OpenAI base URL: a target for measure_endpoint")
    pid: int | None
    log_path: str
    already_running: bool
    start_seconds: float | None


class StopAnswer(BaseModel):
    stopped: list[str]
    not_running: list[str]
