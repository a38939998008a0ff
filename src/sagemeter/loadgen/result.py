"""The load result file: the shared-interface keys at the top, then everything behind them.

Top-level keys other tools read (`output_tokens_per_second`, `ttft_s`, `tpot_s`, `itl_s`,
`requests_completed`, `output_tokens`, `client_cpu_s`, `cpu_s_per_1000_tokens`,
`achieved_concurrency`, `valid`, `problems`, `wall_s`) come first; the settings, the steady
window, goodput, token cross-checks, the client's self-awareness figures, shard identity and
(for shards or `--raw`) every request's timing follow.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sagemeter.evidence.distribution import Distribution
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.results.server_identity import ServerIdentity
from sagemeter.transport.pool import WorkerSummary

RESULT_KIND = "sagemeter.load/1"


class Window(BaseModel):
    """The steady window throughput and concurrency are measured over (seconds from start)."""

    start_s: float
    end_s: float
    rule: str
    steady: bool = Field(description="False when no steady span existed and the whole run was used")
    requests_counted: int = Field(description="requests sent inside the window (latency figures)")


class Goodput(BaseModel):
    """Requests sent in the steady window that met every SLO given, as a share and a rate."""

    slo_ttft_s: float | None
    slo_tpot_s: float | None
    requests_counted: int
    requests_meeting: int
    share: float | None
    requests_per_second: float
    tokens_per_second: float


class TokenCheck(BaseModel):
    """Output tokens three ways: usage, content events counted, the engine's own timings."""

    requests: int
    usage_missing: int
    usage_vs_events_mismatch: int
    engine_reported: int
    engine_vs_usage_mismatch: int
    shorter_than_asked: int


class WorkerFigures(BaseModel):
    worker: int
    loop: str
    requests: int
    run_s: float
    cpu_run_s: float
    cpu_share: float
    start_late_s: float


class SelfAwareness(BaseModel):
    """How the client itself fared; `problems` says when these show it was the bottleneck."""

    cores: int
    workers: list[WorkerFigures]
    loop_lag_s: Distribution
    send_lag_kind: Literal["closed-loop gap", "late against schedule"]
    send_lag_s: Distribution
    parent_cpu_s: float
    client_cpu_share_of_cores: float
    worker_cpu_share_max: float
    startup_s: float


class ShardInfo(BaseModel):
    index: int | None = Field(description="None for a merge of all shards")
    count: int
    seed: int
    wall_start: float = Field(description="the common start instant, Unix seconds (wall clock)")
    wall_start_utc: str


class RawRecord(BaseModel):
    """One request, µs since the run's start; content event k at first_us + sum(gaps_us[:k])."""

    model_config = ConfigDict(extra="forbid")

    stream: int
    index: int
    scheduled_us: int | None
    send_us: int
    end_us: int
    first_us: int | None
    gaps_us: list[int]
    usage_tokens: int | None
    engine_tokens: int | None
    finish_reason: str | None
    done: bool
    error: str | None
    reasoning_events: int = 0
    reopened_from_us: int | None = Field(
        default=None,
        description="sent first on a kept-alive connection the server had closed, then again "
        "at once on a new one from send_us; not a retry nor a failure",
    )
    connect_from_us: int | None = Field(
        default=None,
        description="when a new connection was begun because the server had ended the "
        "stream's last one (Connection: close, or closed idle)",
    )

    max_tokens: int | None = Field(
        default=None, description="the reply length this request asked (a workload's own)"
    )
    prompt_tokens: int | None = Field(
        default=None, description="the prompt as the server counted it (usage.prompt_tokens)"
    )
    cached_prompt_tokens: int | None = Field(
        default=None, description="the part of it the server's prefix cache served, if said"
    )


class RawRun(BaseModel):
    """Enough of a run to recompute every figure: records, lag samples, workers' CPU."""

    wall_start: float
    startup_s: float
    cores: int
    parent_cpu_s: float
    workers: list[WorkerSummary]
    loop_lag_us: list[int]
    records: list[RawRecord]


class ClockOffset(BaseModel):
    """A node's wall clock against the driver's (node − driver), corrected for in the run."""

    offset_s: float = Field(description="measured before the run, from the tightest round trip")
    uncertainty_s: float = Field(description="± half that round trip")
    offset_after_s: float | None = Field(description="measured again after the run")
    remaining_error_s: float = Field(description="uncertainty + drift: what may still be off")


class NodeFigures(BaseModel):
    """One node of a Ray run: what it was given, its clock, and what it saw."""

    node: int
    node_id: str
    address: str
    hostname: str
    cores: int = Field(description="CPUs the node gives Ray")
    workers: list[int] = Field(description="the worker processes it ran (global numbers)")
    streams: list[int] = Field(description="closed loop: the stream ids it sent")
    arrivals: int = Field(description="open loop: how many of the schedule's arrivals it sent")
    clock: ClockOffset
    lost: str | None = Field(description="why its records are missing; None when it finished")
    requests_completed: int
    requests_failed: int
    output_tokens: int
    output_tokens_per_second: float | None = Field(description="over its own steady window")
    ttft_median_s: float | None
    tpot_median_s: float | None
    loop_lag_p99_s: float | None
    valid: bool | None = Field(description="its own figures judged alone; None when lost")
    invalid_because: list[str]


class ClusterInfo(BaseModel):
    """The Ray cluster a run was spread over, and which node saw what."""

    address: str
    ray_version: str
    nodes: list[NodeFigures]
    workers_per_node: list[int]
    lost_nodes: int


class LevelSummary(BaseModel):
    """One level of a sweep, in brief (the full figures are in `levels`)."""

    concurrency: int
    output_tokens_per_second: float
    rise_per_doubling: float | None
    ttft_median_s: float | None
    tpot_median_s: float | None
    goodput_share: float | None
    valid: bool


class Knee(BaseModel):
    concurrency: int | None
    reason: str


class Probe(BaseModel):
    """One load an operating-point search tried, and whether every SLO held at it."""

    concurrency: int | None
    rate: float | None
    duration_s: float
    requests_counted: int = Field(description="requests sent in the steady window")
    requests_failed: int
    ttft_s: float | None = Field(description="TTFT at the SLO's percentile")
    tpot_s: float | None = Field(description="TPOT at the SLO's percentile")
    output_tokens_per_second: float
    goodput_share: float | None
    valid: bool
    stopped_early: bool = Field(
        description="sending stopped once more requests had missed the SLO than the "
        "percentile allows of the whole probe"
    )
    passed: bool
    judged: bool = Field(
        default=True,
        description="False: no verdict, neither met nor missed (the client could not measure the "
        "probe, or it stayed too short for its percentile); the search ended there",
    )
    why: str


class OperatingPoint(BaseModel):
    """The largest load found that meets every SLO, what it serves there, and at what cost."""

    concurrency: int | None
    rate: float | None
    output_tokens_per_second: float
    ttft_s: Distribution
    tpot_s: Distribution
    goodput: Goodput | None
    usd_per_million_tokens: float | None = Field(
        description="--price-per-hour / output tokens per hour × 10⁶; None with its reason"
    )
    usd_per_million_tokens_why: str | None = None


class SloSearch(BaseModel):
    """How the operating point was searched: the SLO, the rule, every probe, the outcome."""

    search: Literal["concurrency", "rate"]
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    percentile: float
    min_requests: int = Field(description="requests a probe counts at least, for its percentile")
    price_per_hour: float | None
    found: bool
    client_limited: bool = Field(
        default=False,
        description="the search ended at a probe the client could not measure, or could not "
        "make long enough for its percentile: no point found, though the server might have met "
        "the SLO there",
    )
    reason: str
    probes: list[Probe]


class LengthSizing(BaseModel):
    """How prompt text was sized: by the server's count (tokens = overhead + per word × words,
    fitted to two probes), or cut by the model's tokenizer with the server's template overhead."""

    method: str
    counter: Literal["server", "tokenizer"] = Field(
        default="server", description="which count sized the prompts' text"
    )
    tokenizer: str | None = Field(default=None, description="the tokenizer read, when one cut")
    tokens_per_word: float
    overhead_tokens: float
    probes: list[tuple[int, int]] = Field(description="(words sent, usage.prompt_tokens)")


class Workload(BaseModel):
    """What was sent beyond one fixed request: a replayed trace, or drawn lengths and arrivals,
    and how close the prompts came to the lengths asked, by the server's own count."""

    kind: Literal["trace", "synthetic"]
    seed: int
    trace_file: str | None = None
    trace_sha256: str | None = None
    trace_requests: int | None = Field(default=None, description="requests in the file")
    trace_span_s: float | None = Field(default=None, description="first to last, as written")
    trace_speed: float | None = None
    requests_scheduled: int | None = Field(
        default=None, description="open loop: requests the schedule sent (a trace: in --duration)"
    )
    block_tokens: int | None = Field(default=None, description="tokens per hash id")
    unique_blocks: int | None = Field(default=None, description="distinct hash ids scheduled")
    block_reuses: int | None = Field(
        default=None, description="hash ids scheduled after their first use (shared prefixes)"
    )
    input_tokens: str | None = Field(default=None, description="the distribution asked")
    output_tokens: str | None = None
    burstiness: float | None = Field(default=None, description="gamma shape of --rate's gaps")
    shapes: int = Field(
        description="distinct requests built (a synthetic deck is cycled, each "
        "send's prompt made unique by a nonce)"
    )
    sizing: LengthSizing | None
    asked_input_tokens: Distribution | None
    asked_output_tokens: Distribution
    counted_input_tokens: Distribution | None = Field(
        default=None, description="usage.prompt_tokens of the answered requests"
    )
    input_off_by_tokens: Distribution | None = Field(
        default=None,
        description="|server's count − asked| per answered request (open loop; None otherwise)",
    )
    cached_input_tokens: int | None = Field(
        default=None, description="prompt tokens the server said its prefix cache served"
    )
    schedule_lateness_s: Distribution | None = Field(
        default=None, description="open loop: each send's lateness against its scheduled time"
    )


class LoadResult(BaseModel):
    """One load run (or a sweep's chosen level, with every level in `levels`)."""

    output_tokens_per_second: float
    ttft_s: Distribution
    tpot_s: Distribution
    itl_s: Distribution
    requests_completed: int
    output_tokens: int
    client_cpu_s: float
    cpu_s_per_1000_tokens: float | None
    achieved_concurrency: float
    valid: bool
    problems: list[str]
    wall_s: float
    kind: str = RESULT_KIND
    target: str
    mode: Literal["closed", "poisson", "trace"]
    asked_concurrency: int | None
    asked_rate: float | None
    requests_failed: int
    requests_reopened: int = Field(
        default=0,
        description="requests whose kept-alive connection the server had closed unanswered, "
        "sent again at once on a new connection (not retries, not failures)",
    )
    reopen_lost_s: float = Field(
        default=0.0,
        description="seconds those lost sends cost in all (TTFT counts from the resend)",
    )
    decode_tokens_per_second: Distribution
    invalid_because: list[str]
    window: Window
    goodput: Goodput | None
    tokens: TokenCheck
    self_awareness: SelfAwareness
    settings: LoadSettings
    started_utc: str
    sagemeter_version: str
    shard: ShardInfo | None = None
    cluster: ClusterInfo | None = None
    sweep: list[LevelSummary] | None = None
    knee: Knee | None = None
    levels: list[LoadResult] | None = None
    operating_point: OperatingPoint | None = None
    slo_search: SloSearch | None = None
    server_identity: ServerIdentity | None = Field(
        default=None,
        description="the server's model (/v1/models) and start read before the first run and "
        "after each; a change makes the result invalid (None: not read, or an older file)",
    )
    workload: Workload | None = None
    raw: RawRun | None = None
