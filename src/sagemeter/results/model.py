"""The Result's schema: the versioned, validated record of one measurement of one endpoint.

The top level keeps the source article's keys, so its minimal files load as they are; everything
raw (every timing, every answer, the environment) lives in the versioned `detail` section.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sagemeter.evidence.bootstrap import Interval
from sagemeter.evidence.distribution import Spread
from sagemeter.questions import Question
from sagemeter.questions.scoring import ScoringRule, score
from sagemeter.request_record import RequestRecord
from sagemeter.results.checkpoint_facts import CheckpointFacts
from sagemeter.results.endpoint_metrics import EndpointMetrics
from sagemeter.results.fidelity_record import FidelityRecord
from sagemeter.results.predicted_decode import PredictedDecode
from sagemeter.results.server_identity import ServerIdentity
from sagemeter.results.server_metrics import ServerMetrics
from sagemeter.results.v1 import upgrade_records

# 2: records are the transport's (µs on the measurement's timeline, retries kept); batches say
# whether they count; quality items can be unanswered. Files of version 1 are read as well.
SCHEMA_VERSION = 2


class Share(BaseModel):
    """correct out of total with its Wilson 95% interval (fractions): an answer count's spread."""

    correct: int
    total: int
    low: float
    high: float


class FigureSummary(BaseModel):
    """One headline speed figure with the spread of its repeats and the figure's own interval."""

    value: float
    repeats: int = Field(description="independent repeats behind the figure (pairs or batches)")
    min: float | None = Field(None, description="the slowest repeat's own figure")
    median: float | None = None
    max: float | None = None
    ci95: Interval | None = None


class ClientShare(BaseModel):
    """The tool's own share of what it timed: client CPU against the wall time it measured.

    Near 1.0 the client (one event loop) was busy the whole time and may itself be what was timed.
    For levels sent by worker processes, `workers` and their loop's lag are kept too.
    """

    calls: int
    client_cpu_s: float = Field(
        description="this process's CPU time over the timed requests, every thread included"
    )
    loop_cpu_s: float | None = Field(
        None, description="the event-loop thread's CPU time (the requests' own processing)"
    )
    timed_wall_s: float = Field(description="the wall time the figure is computed from")
    cpu_per_call_ms: float = Field(description="loop-thread CPU per request")
    share: float = Field(description="client_cpu_s / timed_wall_s (an upper bound)")
    loop_share: float | None = Field(None, description="loop_cpu_s / timed_wall_s")
    workers: int | None = Field(None, description="worker processes that sent the requests")
    loop_lag_p99_s: float | None = Field(
        None, description="the workers' event-loop lag, p99 (10 ms sampler)"
    )


class PrecisionStop(BaseModel):
    """How a speed figure's repeats ended under a precision target (`[stop] speed`,
    `measure --speed-precision`): repeated until its 95% interval's half-width is within the
    target share of the figure, from the minimum of repeats up to the maximum."""

    target: float = Field(description="the half-width wanted, a share of the figure (0.03: 3%)")
    achieved: float | None = Field(
        None, description="the half-width reached, a share of the figure (None: no interval)"
    )
    repeats: int = Field(description="repeats used")
    min_repeats: int
    max_repeats: int
    reached: bool
    stopping_reason: str


class DecodeDetail(BaseModel):
    short_tokens: int
    long_tokens: int
    repeats: int
    short_times_s: list[float]
    long_times_s: list[float]
    tokens_per_second: float | None = Field(
        None, description="(long - short) / (median t(long) - median t(short)), the article's rate"
    )
    per_call_fixed_cost_s: float | None = Field(
        None, description="median t(short) - short / rate: what every call pays besides decoding"
    )
    tokens_per_second_repeats: Spread | None = Field(
        None, description="the rate of each (short, long) pair alone: its min, median and max"
    )
    tokens_per_second_ci95: Interval | None = Field(
        None, description="bootstrap 95% interval of the rate, short and long times resampled"
    )
    precision: PrecisionStop | None = Field(
        None, description="how the repeats ended under a precision target ([stop] speed)"
    )
    short_reply_s: Spread | None = Field(None, description="the complete short replies' times")
    long_reply_s: Spread | None = Field(None, description="the complete long replies' times")
    least_squares_tokens_per_second: float | None = Field(
        None, description="slope of a straight-line fit through every (tokens, time) point"
    )
    engine_tokens_per_second: Spread | None = Field(
        None, description="the engine's own decode rate (llama.cpp timings) on the long replies"
    )
    ttft_s: Spread | None = None
    inter_token_latency_s: Spread | None = None
    time_per_output_token_s: Spread | None = Field(
        None, description="(total - TTFT) / (tokens - 1) per long reply"
    )
    client: ClientShare | None = Field(
        None, description="the measuring client's own CPU while the timed replies ran"
    )
    reasoning_events: int = Field(
        0, description="token events of the complete long replies that were reasoning (thinking)"
    )
    valid: bool = True
    problems: list[str] = Field(default_factory=list)
    measured_again: list[str] = Field(
        default_factory=list,
        description="replies set aside (far slower than their twins) and asked again, and why",
    )
    records: list[RequestRecord] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def read_version_1_records(cls, data: Any) -> Any:
        return upgrade_records(data)


class PrefixCacheCheck(BaseModel):
    """The same long prompt sent twice in a row: how much faster the second first token came."""

    prompt_tokens: int | None = Field(None, description="the server's count of the prompt")
    first_ttft_s: float | None = None
    second_ttft_s: float | None = None
    speedup: float | None = Field(None, description="first TTFT / second TTFT")
    cached_tokens_reported: int | None = Field(
        None,
        description="what the server said its prefix cache served on the second send "
        "(usage.prompt_tokens_details.cached_tokens, llama.cpp timings.cache_n); None: not said",
    )
    problem: str | None = Field(None, description="why there is no speed-up, when there is none")
    server_reports_caching: bool | None = Field(
        None,
        description="the server's own prefix-cache counters (vLLM /metrics) around the pair: "
        "true, hits counted; false, none counted; null, the server has no such counters "
        "(why: `server_counters_note`)",
    )
    server_cache_queries: int | None = Field(
        None, description="prompt tokens looked up in the prefix cache during the pair (vLLM)"
    )
    server_cache_hits: int | None = Field(
        None, description="of those, the tokens the prefix cache served (vLLM)"
    )
    server_counters_note: str | None = Field(
        None, description="what the counters said, or why the server's answer is not known"
    )
    records: list[RequestRecord] = Field(default_factory=list)


class PrefillDetail(BaseModel):
    """Prompt processing, the decode differential applied to the prompt: single streamed requests
    asking one token, at two prompt lengths, every prompt unique from its first token."""

    short_tokens: int = Field(description="the short prompt's length asked for, server tokens")
    long_tokens: int = Field(description="the long prompt's length asked for (after any clamp)")
    repeats: int
    context_tokens: int | None = Field(
        None, description="the server's context as it said it (max_model_len, n_ctx)"
    )
    short_words: int | None = Field(None, description="filler words sent for the short length")
    long_words: int | None = Field(None, description="filler words sent for the long length")
    prompt_count_source: str = Field(
        "server",
        description="who counted the prompts: the server (`usage.prompt_tokens`), or "
        "`tokenizer: …` (the model's own, where the server gave no count: the text alone)",
    )
    short_prompt_tokens: list[int] = Field(
        default_factory=list, description="the count of each counted short prompt"
    )
    long_prompt_tokens: list[int] = Field(default_factory=list)
    short_ttft_s: list[float] = Field(
        default_factory=list, description="time to first token of each counted short prompt"
    )
    long_ttft_s: list[float] = Field(default_factory=list)
    tokens_per_second: float | None = Field(
        None,
        description="(median long − median short prompt tokens) / (median TTFT(long) − median "
        "TTFT(short))",
    )
    tokens_per_second_ci95: Interval | None = Field(
        None, description="bootstrap 95% interval of the rate, both lengths resampled"
    )
    per_call_fixed_cost_s: float | None = Field(
        None,
        description="median TTFT(short) − short tokens / rate: what a first token costs "
        "besides the prompt",
    )
    least_squares_tokens_per_second: float | None = Field(
        None, description="one over the slope of a line through every (tokens, TTFT) point"
    )
    short_ttft: Spread | None = None
    long_ttft: Spread | None = None
    engine_tokens_per_second: Spread | None = Field(
        None,
        description="the engine's own prompt rate: on the long prompts (llama.cpp's timings), "
        "or over the phase from the server's /metrics (vLLM: n = 1)",
    )
    prefix_cache: PrefixCacheCheck | None = None
    client: ClientShare | None = None
    valid: bool = True
    problems: list[str] = Field(default_factory=list)
    measured_again: list[str] = Field(default_factory=list)
    probe_records: list[RequestRecord] = Field(
        default_factory=list, description="the requests that sized the text (not in any figure)"
    )
    records: list[RequestRecord] = Field(default_factory=list)


class LoadBatch(BaseModel):
    """One batch: every request sent at once. Only complete batches make the level's figure."""

    concurrency: int
    wall_s: float
    output_tokens: int
    failed: int
    tokens_per_second: float
    complete: bool = True
    reason: str | None = Field(
        None, description="why the batch does not count (a failed or retried request, the client)"
    )
    retries: int = 0


class LoadLevel(BaseModel):
    concurrency: int
    tokens_per_second: float | None = Field(
        None,
        description="all output tokens of the level's complete batches / the sum of their walls",
    )
    problem: str | None = Field(None, description="why the level has no figure")
    batches: list[LoadBatch]
    tokens_per_second_ci95: Interval | None = Field(
        None, description="bootstrap 95% interval of the pooled figure, batches resampled"
    )
    batch_rates: Spread | None = Field(
        None, description="the complete batches' own tokens per second"
    )
    ttft_s: Spread | None = None
    counted_ttft_s: list[float] = Field(
        default_factory=list,
        description="the counted batches' first-token waits, the values behind `ttft_s` (empty "
        "in older files)",
    )
    inter_token_latency_s: Spread | None = None
    reasoning_events: int = Field(
        0, description="token events of the counted batches that were reasoning (thinking)"
    )
    client: ClientShare | None = Field(
        None, description="the measuring client's own CPU over the level's batches"
    )
    measured_again: list[str] = Field(
        default_factory=list,
        description="batches or the whole level set aside (a stall?) and run again, and why",
    )
    precision: PrecisionStop | None = Field(
        None, description="how the batches ended under a precision target ([stop] speed)"
    )
    records: list[RequestRecord] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def read_version_1_records(cls, data: Any) -> Any:
        return upgrade_records(data)

    @property
    def complete_batches(self) -> list[LoadBatch]:
        return [batch for batch in self.batches if batch.complete]


class LoadDetail(BaseModel):
    max_tokens: int
    batches_per_level: int
    levels: list[LoadLevel]


class LongPromptLoad(BaseModel):
    """The parallel levels again, every request with its own prompt of the prefill phase's long
    length (unique from its first token): throughput and TTFT where the KV cache is tight."""

    prompt_tokens: int = Field(
        description="the prompt's length asked for, server tokens (the prefill phase's long one, "
        "or less to leave the replies room in the context)"
    )
    prompt_words: int | None = Field(None, description="filler words sent per prompt")
    prompt_tokens_counted: Spread | None = Field(
        None, description="the server's own count of the counted batches' prompts"
    )
    max_tokens: int = Field(description="tokens per reply (the parallel phase's)")
    batches_per_level: int
    levels: list[LoadLevel] = Field(
        default_factory=list, description="as the parallel phase's: figures, batches, records"
    )
    problem: str | None = Field(None, description="why no level was measured, when none was")
    notes: list[str] = Field(
        default_factory=list, description="e.g. the prompt cut so prompt and reply fit the context"
    )


class QualityItem(BaseModel):
    """One question asked. An item whose request failed (`error`) is unanswered: not wrong, and
    left out of the score and of the paired comparison."""

    id: str
    family: str
    prompt: str
    expected: str
    reply: str | None = None
    extracted: str | None = None
    correct: bool
    finish_reason: str | None = None
    error: str | None = None
    retries: int = 0
    reopened: bool = Field(
        False, description="sent again at once after the server closed its kept-alive connection"
    )

    @property
    def answered(self) -> bool:
        return self.error is None

    @classmethod
    def scored(
        cls, question: Question, reply: str | None, rule: ScoringRule, **facts: Any
    ) -> QualityItem:
        """The item for `question` and its `reply` (None: unanswered), scored by `rule`;
        `facts` are the request's own (finish reason, error, retries)."""
        correct, extracted = score(question, reply, rule) if reply is not None else (False, None)
        return cls(
            id=question.id,
            family=question.family,
            prompt=question.prompt,
            expected=question.answer,
            reply=reply,
            extracted=extracted,
            correct=correct,
            **facts,
        )


class SequentialStop(BaseModel):
    """How a sequential quality run ended (`[stop] quality = "decided"`): the same record in
    both arms' results, since one look decides for both."""

    method: str
    margin_points: float = Field(description="the margin declared before the run")
    reference: str = Field(description="arm A, the baseline")
    candidate: str = Field(description="arm B")
    max_items: int = Field(description="questions in the set: the most the run would ask")
    items_asked: int = Field(description="questions asked of each arm before it stopped")
    items_paired: int = Field(description="questions both arms answered at the deciding look")
    block: int
    looks_taken: int
    looks_planned: int
    boundaries_z: list[float] = Field(description="the one-sided z boundary of every look")
    level: float | None = Field(None, description="the two-sided level at the deciding look")
    nominal_false_pass: float
    nominal_false_fail: float
    verdict: str = Field(description="PASS | FAIL | INCONCLUSIVE at the deciding look")
    stopping_reason: str

    @property
    def sentence(self) -> str:
        """ "stopped after N of M because …", as every face says it."""
        return (
            f"stopped after {self.items_asked:,} of {self.max_items:,} questions because "
            f"{self.stopping_reason}"
        )


class QualityDetail(BaseModel):
    """Every item asked the same way for every checkpoint; how it was asked is kept to check."""

    question_set: str
    question_set_sha256: str
    max_tokens: int
    temperature: float = 0.0
    seed: int | None = 0
    scoring: str = Field("strict", description="the scoring rule: strict (ours) or article")
    system_prompt: str | None = None
    chat_template_sha256: str | None = Field(
        None,
        description="SHA-256 of the chat template the server reported (llama.cpp /props, "
        "vLLM /tokenizer_info)",
    )
    chat_template_note: str | None = Field(
        None, description="why the chat template's checksum is missing, when it is"
    )
    correct: int
    total: int
    answered: int | None = Field(None, description="items with an answer (None: every item)")
    by_family: dict[str, dict[str, int]]
    family_accuracy: dict[str, Share] = Field(
        default_factory=dict, description="each family's correct/answered with its interval"
    )
    items: list[QualityItem]
    sequential: SequentialStop | None = Field(
        None,
        description="set when the questions were asked in blocks and a sequential test stopped "
        'them ([stop] quality = "decided"); items then holds only those asked',
    )

    @property
    def answered_count(self) -> int:
        return self.total if self.answered is None else self.answered

    @classmethod
    def from_items(
        cls,
        items: list[QualityItem],
        *,
        question_set: str,
        question_set_sha256: str,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        scoring: str,
        system_prompt: str | None = None,
    ) -> QualityDetail:
        """The detail of `items` asked this way: the counts overall and per family."""
        by_family: dict[str, dict[str, int]] = {}
        for item in items:
            counts = by_family.setdefault(item.family, {"correct": 0, "total": 0, "answered": 0})
            counts["total"] += 1
            counts["answered"] += int(item.answered)
            counts["correct"] += int(item.correct)
        return cls(
            question_set=question_set,
            question_set_sha256=question_set_sha256,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            scoring=scoring,
            system_prompt=system_prompt,
            correct=sum(item.correct for item in items),
            total=len(items),
            answered=sum(item.answered for item in items),
            by_family=by_family,
            items=items,
        )


class StartupFacts(BaseModel):
    """What the server's start-up log says it allocated (vLLM, llama.cpp or SGLang wording)."""

    source: str = Field(description="the log's dialect and where it was read (file, container)")
    weights_gib: float | None = None
    load_seconds: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens_per_request: int | None = None
    quantization: str | None = None
    lines: list[str] = Field(default_factory=list, description="the log lines the facts came from")
    startups_in_log: int | None = Field(
        None, description="start-ups the log held; the facts are the newest one's"
    )


class Environment(BaseModel):
    target: str
    backend: str
    engine: str | None = None
    engine_version: str | None = None
    model: str | None = None
    checkpoint_file: str | None = None
    checkpoint_sha256: str | None = None
    checkpoint_bits_per_weight: float | None = None
    checkpoint_facts: CheckpointFacts | None = Field(
        None, description="what the checkpoint stores and the bytes a decoded token reads"
    )
    host_cpu: str | None = None
    host_cores: int | None = None
    platform: str | None = None
    python: str | None = None
    sagemeter_version: str
    started_utc: str
    ended_utc: str | None = None
    ray_cluster: str | None = Field(
        None, description="the Ray cluster the parallel batches were sent from (measure --ray)"
    )
    server: dict[str, Any] = Field(
        default_factory=dict,
        description="what the endpoint said about itself (e.g. SageMaker image, instance types)",
    )
    predicted_decode: PredictedDecode | None = Field(
        None,
        description="the decode `sagemaker recommend` predicted for the arm's instance type, "
        "copied from the plan by `sagemeter run` (None: no prediction was given)",
    )


class HostPhase(BaseModel):
    """One phase's shares of all the host's cores (0–1), from /proc/stat and the client's CPU."""

    phase: str
    seconds: float
    load_average: float | None = Field(None, description="the 1-minute load average at its end")
    busy_share: float | None = Field(None, description="all cores' busy share (steal left out)")
    steal_share: float | None = Field(None, description="ticks the hypervisor stole")
    client_share: float = Field(
        0.0, description="this client's CPU (its finished workers too) over the phase's cores"
    )


class HostLoad(BaseModel):
    """Was the measuring host busy? Named beside the figures; never by itself incomplete."""

    cores: int
    load_average_before: float | None = Field(None, description="1-minute, before measuring")
    load_average_during: float | None = Field(None, description="the highest at a phase's end")
    steal_share: float | None = Field(None, description="the highest phase's CPU steal (0–1)")
    client_share: float | None = Field(
        None, description="the highest phase's client CPU share of all cores (0–1)"
    )
    server_here: bool = Field(
        False, description="the measured server ran on this host (its CPU is not others')"
    )
    busy: bool = False
    busy_because: list[str] = Field(default_factory=list)
    phases: list[HostPhase] = Field(default_factory=list)

    def busy_note(self) -> str | None:
        """The one line a busy host gets beside the figures (terminal, combine, report)."""
        if not self.busy:
            return None
        return (
            f"measured on a busy host ({'; '.join(self.busy_because)}): its speed figures may "
            "be slower than the server can give"
        )


class Detail(BaseModel):
    schema_version: int = SCHEMA_VERSION
    settings: dict[str, Any]
    environment: Environment
    startup: StartupFacts | None = None
    decode: DecodeDetail | None = None
    prefill: PrefillDetail | None = Field(
        None, description="prompt processing (None: not measured, e.g. --method article)"
    )
    load: LoadDetail | None = None
    long_prompt_load: LongPromptLoad | None = Field(
        None, description="long prompts under load (None: not measured, --long-prompt-levels)"
    )
    quality: QualityDetail | None = None
    fidelity: FidelityRecord | None = Field(
        None, description="top-k logprobs along the answers (this run's own, or a reference's)"
    )
    server_metrics: ServerMetrics | None = Field(
        None, description="the server's own /metrics counts per phase beside the client's"
    )
    endpoint_metrics: EndpointMetrics | None = Field(
        None,
        description="a SageMaker endpoint's own CloudWatch metrics per phase beside the "
        "client's (None: not a SageMaker target, or an older file)",
    )
    host: HostLoad | None = Field(
        None, description="the measuring host's load before and during (None: older files)"
    )
    server_identity: ServerIdentity | None = Field(
        None, description="the server's model read between phases (None: it lists no models)"
    )
    failed_requests: int = 0
    timed_out_requests: int = Field(
        0, description="of the failed requests, those that timed out (never sent again)"
    )
    retried_requests: int = Field(0, description="requests that needed more than one try")
    retries: int = Field(0, description="tries sent again after a transient failure, in all")
    reopened_requests: int = Field(
        0,
        description="requests sent again at once on a new connection because the server had "
        "closed their kept-alive one before answering (not retries, not failures)",
    )
    warnings: list[str] = Field(default_factory=list)
    source_format: str = Field(
        "sagemeter", description="who wrote the file: sagemeter, or the article's compare.py"
    )


class MeasureResult(BaseModel):
    """`measure-NAME.json`. Article keys first; `detail` holds the evidence behind each figure."""

    # A hand-edited NaN, inf or negative figure is refused when read back, naming the key.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    name: str | None = None
    complete: bool | None = Field(
        None, description="False when a figure that was asked for is missing (None: not said)"
    )
    decode_tokens_per_second: float | None = Field(None, ge=0)
    per_call_fixed_cost_seconds: float | None = None
    load_tokens_per_second: dict[str, Annotated[float, Field(ge=0)] | None] = Field(
        default_factory=dict,
        description="keyed by requests at once; null for a level asked for that has no figure "
        "(why: `incomplete_because`, `detail.load.levels[].problem`)",
    )
    quality: str | None = Field(
        None, description='"correct/answered", e.g. "37/40" (unanswered items are left out)'
    )
    quality_interval: Share | None = Field(
        None, description="the quality count with its Wilson 95% interval"
    )
    ttft_median_ms: float | None = Field(
        None, ge=0, description="time to first token, median of the decode phase's long replies"
    )
    inter_token_latency_median_ms: float | None = Field(
        None,
        ge=0,
        description="gap between token events, median over the decode phase's long replies",
    )
    prefill_tokens_per_second: float | None = Field(
        None,
        ge=0,
        description="prompt tokens per second, the two-length differential (null: not measured "
        "or no honest figure; why: `detail.prefill.problems`, `incomplete_because`)",
    )
    ttft_long_prompt_ms: float | None = Field(
        None, ge=0, description="time to first token at the long prompt, median (prefill phase)"
    )
    long_prompt_tokens_per_second: dict[str, Annotated[float, Field(ge=0)] | None] = Field(
        default_factory=dict,
        description="long prompts under load: output tokens/s keyed by requests at once (null: "
        "no figure, why in `detail.long_prompt_load`; empty: not measured)",
    )
    long_prompt_ttft_p50_ms: dict[str, Annotated[float, Field(ge=0)] | None] = Field(
        default_factory=dict,
        description="long prompts under load: median time to first token, keyed by level",
    )
    long_prompt_ttft_p90_ms: dict[str, Annotated[float, Field(ge=0)] | None] = Field(
        default_factory=dict,
        description="long prompts under load: 90th percentile time to first token, by level",
    )
    weights_gib: float | None = Field(None, ge=0)
    kv_cache_tokens: int | None = Field(None, ge=0)
    load_seconds: float | None = Field(None, ge=0)
    # The cost at your SLO (a plan's [slo] table, measure/slo.py): the operating point found.
    slo_concurrency: int | None = Field(
        None, ge=1, description="the most streams at once meeting every SLO (search = concurrency)"
    )
    slo_rate: float | None = Field(
        None, gt=0, description="the highest Poisson rate meeting every SLO (search = rate)"
    )
    slo_tokens_per_second: float | None = Field(
        None, ge=0, description="output tokens per second at the operating point"
    )
    usd_per_million_tokens_at_slo: float | None = Field(
        None, ge=0, description="the price per hour / output tokens per hour there × 10⁶"
    )
    slo_note: str | None = Field(None, description="why an SLO figure above is null")
    slo_search: dict[str, Any] | None = Field(
        None, description="the SLO, the rule and every probe (`sagemeter load --search`'s)"
    )
    incomplete_because: list[str] = Field(
        default_factory=list, description="each figure asked for and missing, with its reason"
    )
    intervals: dict[str, FigureSummary] = Field(
        default_factory=dict,
        description="each speed figure above with its repeats' min/median/max and a 95% interval",
    )
    detail: Detail | None = None

    def questions_asked(self) -> int | None:
        """Questions asked, answered or not (the detail's count, else the string's)."""
        if self.detail is not None and self.detail.quality is not None:
            return self.detail.quality.total
        counts = self.quality_counts()
        return None if counts is None else counts[1]

    def quality_counts(self) -> tuple[int, int] | None:
        """(correct, answered) from the `quality` string, or None when absent."""
        if self.quality is None:
            return None
        correct, _, total = self.quality.partition("/")
        return int(correct), int(total)
