"""The verbs both faces call: measure a target, run the demo. No printing here, only callbacks."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemeter import __version__
from sagemeter.atomic import (
    check_output_file,
    check_output_folder,
    describe_write_error,
)
from sagemeter.engines.endpoints import (
    Endpoint,
    WireOptions,
    check_target,
    open_endpoint,
    placement_hint,
)
from sagemeter.engines.vllm_probe import vllm_chat_template_sha256
from sagemeter.errors import UserError
from sagemeter.fidelity.collect import collect_fidelity
from sagemeter.fidelity.detect import server_root
from sagemeter.fidelity.records import load_record
from sagemeter.figures import problems as figure_problems
from sagemeter.figures import top_level_figures, top_level_levels
from sagemeter.figures.builtin import long_prompt_ttft_ms
from sagemeter.figures.builtin_levels import (
    LOAD,
    LONG_PROMPT,
    LONG_PROMPT_TTFT_P50,
    LONG_PROMPT_TTFT_P90,
)
from sagemeter.filekinds import MEASURE
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.agreement import one_at_once_expected
from sagemeter.measure.deadline import Deadline
from sagemeter.measure.decode import client_bound, decode_request_count, measure_decode
from sagemeter.measure.figure_samples import speed_summaries
from sagemeter.measure.host_load import HostSampler
from sagemeter.measure.identity import IdentityWatch, sagemaker_identity
from sagemeter.measure.identity_span import (
    AfterLevel,
    WatchedLooks,
    dropped_decode,
    dropped_load,
    dropped_prefill,
    level_label,
    spanned_phase,
    spanned_reason,
    spanned_text,
)
from sagemeter.measure.load import load_request_count, measure_load
from sagemeter.measure.long_prompt import (
    level_ttft_ms,
    long_prompt_request_count,
    measure_long_prompt_load,
    not_measured,
)
from sagemeter.measure.prefill import measure_prefill, prefill_request_count
from sagemeter.measure.quality import QualityLooks, measure_quality
from sagemeter.measure.sent_log import LoggingClient, SentLog
from sagemeter.measure.server_metrics.prefix_cache import PrefixCacheCounters
from sagemeter.measure.server_metrics.recorder import (
    MetricsRecorder,
    use_engine_prompt_rate_from_metrics,
    use_engine_rate_from_metrics,
)
from sagemeter.measure.slo import SloFigures, search_slo
from sagemeter.paths import state_dir
from sagemeter.questions import QuestionSet, load_question_set
from sagemeter.request_record import RequestRecord
from sagemeter.results import (
    DecodeDetail,
    Detail,
    Environment,
    LoadDetail,
    LoadLevel,
    LongPromptLoad,
    MeasureResult,
    PrefillDetail,
    QualityDetail,
    QualityItem,
    StartupFacts,
    load_result,
    result_path,
    save_result,
)
from sagemeter.results.derived import fill_derived
from sagemeter.results.endpoint_metrics import EndpointMetrics, wait_text
from sagemeter.results.fidelity_record import SCHEMA, FidelityRecord
from sagemeter.results.model import HostLoad
from sagemeter.results.predicted_decode import PredictedDecode
from sagemeter.results.server_identity import ServerIdentity
from sagemeter.results.server_metrics import ServerMetrics
from sagemeter.settings import MeasureSettings
from sagemeter.targets import SageMakerTarget, Target
from sagemeter.textfiles import probe_json
from sagemeter.transport.address import parse_address
from sagemeter.transport.chat import ChatClient, Unreachable
from sagemeter.transport.client import TransportError
from sagemeter.transport.token_check import answered, disagreement_note, usage_disagreements

if TYPE_CHECKING:
    from sagemeter.measure.endpoint_metrics_recorder import EndpointMetricsRecorder
    from sagemeter.options.slo import SloOptions  # declared in the options layer, above this one

PhaseFn = Callable[[str], None]


def _no_phase(_: str) -> None:
    """Default phase callback."""


def engine_log_path(out_dir: Path, name: str) -> Path:
    """Where a target this measure starts (local:, vllm:, cmd:) writes its log."""
    return out_dir / f"engine-{name}.log"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def host_cpu() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def selected_questions(settings: MeasureSettings) -> QuestionSet:
    """The question set, cut to the first N of each family when the settings ask for it."""
    question_set = load_question_set(settings.questions)
    limit = settings.questions_per_family
    if limit is None:
        return question_set
    kept, seen = [], Counter[str]()
    for question in question_set.questions:
        seen[question.family] += 1
        if seen[question.family] <= limit:
            kept.append(question)
    name = f"{question_set.name} (first {limit} per family)"
    return question_set.model_copy(update={"name": name, "questions": kept})


def total_requests(settings: MeasureSettings, question_count: int) -> int:
    return (
        decode_request_count(settings.decode_repeats, settings.decode_warmup)
        + prefill_request_count(settings.prefill_tokens, settings.decode_repeats)
        + load_request_count(settings.load_levels, settings.load_batches)
        + long_prompt_request_count(settings.long_prompt_levels, settings.load_batches)
        + question_count
    )


async def measure_target(
    target: Target,
    *,
    name: str,
    settings: MeasureSettings,
    out_dir: Path,
    progress: ProgressFn = no_progress,
    on_phase: PhaseFn = _no_phase,
    fidelity_reference: FidelityRecord | None = None,
    api_key: str | None = None,
    server_log_facts: StartupFacts | None = None,
    wrap_client: Callable[[ChatClient], ChatClient] | None = None,
    slo: SloOptions | None = None,
    price_per_hour: float | None = None,
    quality_looks: QualityLooks | None = None,
    predicted_decode: PredictedDecode | None = None,
) -> tuple[MeasureResult, Path]:
    """Measure `target` the article's way and write `OUT_DIR/measure-NAME.json` atomically.

    One short request first proves the target speaks the chat API (else a UserError, and no
    file). With `settings.fidelity_prompts` (or a `fidelity_reference`, A's record to force
    along), the top-k logprobs along the answers are recorded too. The result says `complete:
    false` when a figure that was asked for could not be measured. `server_log_facts` (from
    `--server-log` or `--docker`) stand in for an HTTP target's start-up facts. The server's
    `/metrics` (vLLM, llama.cpp) are read around each phase and compared with the client's counts.
    `wrap_client` lets an experiment put its own layer around the endpoint's client (the
    interleaved order's turns); `quality_looks`, a sequential stop's side for this arm, may end
    the questions early (`[stop] quality = "decided"`). `slo` (a plan's [slo] table) adds the
    operating-point search as a last phase, priced at `price_per_hour` (measure/slo.py).
    `predicted_decode` (a plan arm's, from `sagemaker recommend`) is recorded in the environment
    as given: no network call reads it.
    """
    check_target(target)
    question_set = selected_questions(settings)
    check_output_folder(out_dir, "OUT_DIR")
    check_output_file(result_path(out_dir, name), "the result file", force=True, kind=MEASURE)
    check_output_file(engine_log_path(out_dir, name), "the engine log", force=True)
    started = utc_now()
    limit = Deadline(settings.max_minutes) if settings.max_minutes is not None else None
    cut: list[str] = []  # phases max_minutes kept from running (each a missing figure)

    def passed(phase: str) -> str | None:
        return limit.passed(phase) if limit is not None else None

    host = HostSampler()
    host.start()
    on_phase("starting")
    log_path = engine_log_path(out_dir, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    wire = WireOptions(
        timeout_s=settings.timeout_s,
        stall_s=settings.stall_s,
        retries=settings.retries,
        api_key=api_key,
    )
    async with (
        open_endpoint(
            target,
            concurrency=settings.max_concurrency,
            max_reply_tokens=settings.max_reply_tokens,
            max_prompt_tokens=settings.max_prompt_tokens,
            log_path=log_path,
            wire=wire,
            startup_timeout_s=settings.startup_timeout_s,
            on_wait=on_phase,
        ) as endpoint,
        contextlib.AsyncExitStack() as closing,
    ):
        cloud = _endpoint_metrics(target, settings)
        client: ChatClient = endpoint.client
        if cloud is not None:  # every request noted, for CloudWatch's per-minute counts
            client = LoggingClient(client, cloud.log)
        client = wrap_client(client) if wrap_client else client
        on_phase("preflight")
        try:
            await client.preflight()
        except Unreachable as exc:
            where = placement_hint(target)
            raise UserError(
                f"target {target} does not answer as a chat API: {exc}{where}"
            ) from None
        described = await client.describe()
        watch = IdentityWatch(
            endpoint.http_root,
            endpoint.api_key,
            endpoint.process,
            reader=(
                sagemaker_identity(target.name, target.region)
                if isinstance(target, SageMakerTarget)
                else None
            ),
        )
        await watch.open()
        meter = MetricsRecorder(_server_root(endpoint))
        closing.push_async_callback(meter.close)
        await meter.open()
        on_phase("decode")
        await meter.begin()
        host.begin("decode")
        _begin(cloud, "decode")
        decode = await measure_decode(
            client,
            short_tokens=settings.short_tokens,
            long_tokens=settings.long_tokens,
            repeats=settings.decode_repeats,
            warmup=settings.decode_warmup,
            prompt=settings.decode_prompt,
            progress=progress,
            precision=settings.speed_precision,
            max_repeats=settings.speed_max_repeats,
            deadline=limit,
        )
        _end(cloud)
        await meter.end(
            "decode",
            decode.records,
            unrecorded=(settings.decode_warmup, settings.decode_warmup * settings.short_tokens),
        )
        host.end()
        prefill = None
        if settings.prefill_tokens and (why := passed("prefill")):
            cut.append(f"prefill rate: not measured: {why}")
            if settings.long_prompt_levels:  # they send the prefill phase's long prompt
                cut.append(f"long prompts: not measured: {why}")
        elif settings.prefill_tokens and not await watch.check("decode", "prefill"):
            on_phase("prefill")
            await meter.begin()
            host.begin("prefill")
            _begin(cloud, "prefill")
            counters = PrefixCacheCounters(_server_root(endpoint))
            tokenizer = Path(settings.tokenizer) if settings.tokenizer else endpoint.tokenizer_path
            prefill = await _prefill(client, settings, described, progress, counters, tokenizer)
            _end(cloud)
            host.end()
            await meter.end("prefill", prefill_sent(prefill))
        last = "prefill" if settings.prefill_tokens else "decode"
        # How batches are run, one set for the long-prompt levels and the parallel ones alike
        # (measure_load's keywords), so the two phases are measured the same way.
        batches: dict[str, Any] = {
            "max_tokens": settings.load_max_tokens,
            "batches": settings.load_batches,
            "reruns": settings.batch_reruns,
            "statistic": settings.load_statistic,
            "pause_s": settings.batch_pause_s,
            "progress": progress,
            "precision": settings.speed_precision,
            "max_batches": settings.speed_max_batches,
            "deadline": limit,
        }
        long_load = None
        if settings.long_prompt_levels and prefill is not None:
            if why := passed(LONG_PROMPTS):
                long_load = skipped_long_prompts(settings, prefill, why)
            elif await watch.check("prefill", LONG_PROMPTS):
                long_load = skipped_long_prompts(settings, prefill, str(watch.changed))
            else:
                on_phase(LONG_PROMPTS)
                await meter.begin()
                host.begin(LONG_PROMPTS)
                _begin(cloud, "long_prompts")  # a row key's part: endpoint_long_prompts_…
                long_load = await measure_long_prompt_load(
                    client,
                    prefill,
                    levels=settings.long_prompt_levels,
                    after_level=watch_levels(watch, LONG_PROMPTS),
                    **batches,
                )
                _end(cloud)
                host.end()
                await meter.end(LONG_PROMPTS, long_prompt_records(long_load))
            last = LONG_PROMPTS
        if why := passed("parallel"):
            load = skipped_load(settings, why)
        elif await watch.check(last, "parallel"):
            load = skipped_load(settings, str(watch.changed))
        else:
            on_phase("parallel")
            await meter.begin()
            host.begin("parallel")
            _begin(cloud, "parallel")
            load = await measure_load(
                client,
                levels=settings.load_levels,
                prompt=settings.load_prompt,
                after_level=watch_levels(watch, "parallel"),
                **batches,
                one_at_once_expected=(
                    one_at_once_expected(
                        decode.tokens_per_second,
                        decode.per_call_fixed_cost_s,
                        settings.load_max_tokens,
                    )
                    if decode.valid
                    else None
                ),
            )
            _end(cloud)
            host.end()
            await meter.end("parallel", [r for level in load.levels for r in level.records])
        if why := passed("quality"):
            quality = skipped_quality(settings, question_set, why)
        elif await watch.check("parallel", "quality"):
            quality = skipped_quality(settings, question_set, str(watch.changed))
        else:
            on_phase("quality")
            await meter.begin()
            host.begin("quality")
            _begin(cloud, "quality")
            quality = await measure_quality(
                client,
                question_set,
                max_tokens=settings.quality_max_tokens,
                system_prompt=settings.system_prompt,
                seed=settings.quality_seed,
                scoring=settings.scoring,
                progress=progress,
                looks=watched_looks(quality_looks, watch),
                deadline=limit,
            )
            _end(cloud)
            host.end()
            asked = [i for i in quality.items if not (i.error or "").startswith("not asked")]
            await meter.end("quality", [], requests=len(asked))  # what a time limit left unsent
            # is not the server's to count
        quality.chat_template_sha256 = described.get("chat_template_sha256")
        if quality.chat_template_sha256 is None and meter.engine == "vllm" and meter.root:
            sha, why = await vllm_chat_template_sha256(meter.root)
            quality.chat_template_sha256, quality.chat_template_note = sha, why
        fidelity: FidelityRecord | None = None
        fidelity_warnings: list[str] = []
        wants_fidelity = settings.fidelity_prompts or fidelity_reference is not None
        if wants_fidelity and (why := passed("fidelity")):
            fidelity_warnings = [f"fidelity: not measured: {why}"]
        elif wants_fidelity and await watch.check("quality", "fidelity"):
            fidelity_warnings = [f"fidelity: not measured: {watch.changed}"]
        elif wants_fidelity:
            on_phase("fidelity")
            host.begin("fidelity")
            fidelity, fidelity_warnings = await _fidelity(
                endpoint, settings, question_set, fidelity_reference, wire
            )
            host.end()
        before_slo = "fidelity" if wants_fidelity else "quality"
        slo_figures = None
        if slo is None or (why := passed("slo")) is not None:
            await watch.check(before_slo, None)
            if slo is not None:
                slo_figures = SloFigures(slo_note=f"not searched: {why}")
        elif await watch.check(before_slo, "slo"):
            slo_figures = SloFigures(slo_note=f"not searched: {watch.changed}")
        else:
            on_phase("slo")
            host.begin("slo")
            slo_figures = await _search_slo(endpoint, slo, price_per_hour, watch)
            host.end()
            if await watch.check("slo", None):  # another server answered some of its probes
                slo_figures = SloFigures(slo_note=f"search dropped: {watch.changed}")
        startup = server_log_facts or await asyncio.to_thread(endpoint.startup_facts)
        startup = startup or meter.startup_facts()
        use_engine_rate_from_metrics(decode, meter.detail)
        use_engine_prompt_rate_from_metrics(prefill, meter.detail)
        # The phase the change fell in keeps its records, not its figures (measure/identity_span).
        spanned = spanned_phase(watch.record())
        why = spanned_reason(str(watch.changed))
        if spanned == "decode":
            decode = dropped_decode(decode, why)
        elif spanned == "prefill" and prefill is not None:
            prefill = dropped_prefill(prefill, why)
        elif spanned == LONG_PROMPTS and prefill is not None:
            long_load = skipped_long_prompts(settings, prefill, why)
        elif spanned == "parallel":
            load = dropped_load(load, why)
        elif spanned == "quality":
            quality = skipped_quality(settings, question_set, why, asked=True)
        elif spanned == "fidelity":
            fidelity, fidelity_warnings = None, [f"fidelity: {why}"]
        environment = _environment(endpoint, described, started)
        environment.predicted_decode = predicted_decode
        endpoint_metrics = None
        if cloud is not None:
            on_phase(f"endpoint metrics (CloudWatch, up to {wait_text(cloud.wait_s)})")
            endpoint_metrics = await cloud.read()
    result = assemble_result(
        name,
        settings,
        environment,
        startup,
        decode,
        load,
        quality,
        fidelity,
        [*fidelity_warnings, *meter.warnings()],
        server_metrics=meter.detail,
        prefill=prefill,
        long_prompt_load=long_load,
        server_identity=watch.record(),
        host=host.record(server_here=_server_here(endpoint)),
        endpoint_metrics=endpoint_metrics,
        cut=cut,
    )
    if slo_figures is not None:
        result = with_slo(result, slo_figures)
    path = result_path(out_dir, name)
    return result, save_or_rescue(result, path)


LONG_PROMPTS = "long prompts"


def skipped_long_prompts(
    settings: MeasureSettings, prefill: PrefillDetail, why: str
) -> LongPromptLoad:
    """Long prompts under load not run: every level asked for, without a figure, saying why."""
    return not_measured(
        settings.long_prompt_levels,
        prefill.long_tokens,
        settings.load_max_tokens,
        settings.load_batches,
        why,
    )


def long_prompt_records(long_load: LongPromptLoad | None) -> list[RequestRecord]:
    """Every request long prompts under load sent."""
    if long_load is None:
        return []
    return [record for level in long_load.levels for record in level.records]


def _endpoint_metrics(target: Target, settings: MeasureSettings) -> EndpointMetricsRecorder | None:
    """A SageMaker target's CloudWatch recorder (other targets have `/metrics` instead)."""
    if not isinstance(target, SageMakerTarget):
        return None
    # Imported here: it brings the SageMaker package, which every other target can do without.
    from sagemeter.measure.endpoint_metrics_recorder import EndpointMetricsRecorder

    return EndpointMetricsRecorder(target.name, target.region, settings.metrics_wait_s, SentLog())


def _begin(cloud: EndpointMetricsRecorder | None, phase: str) -> None:
    if cloud is not None:
        cloud.begin(phase)


def _end(cloud: EndpointMetricsRecorder | None) -> None:
    if cloud is not None:
        cloud.end()


async def _search_slo(
    endpoint: Endpoint, slo: SloOptions, price_per_hour: float | None, watch: IdentityWatch
) -> SloFigures:
    """The operating-point search in a thread (its workers are processes); a search that cannot
    run is null figures with the reason, never a lost measurement. Cancelled (a stop), the
    thread ends after the probe in flight rather than search on against a stopped server. The
    server's identity (`watch`) is checked after every probe: a change stops the search."""
    cancelled = threading.Event()

    def between_probes() -> None:
        if cancelled.is_set():
            raise SearchCancelled

    try:
        return await asyncio.to_thread(
            search_slo,
            endpoint.http_root,
            slo,
            price_per_hour,
            endpoint.api_key,
            between_probes,
            watch,
        )
    except UserError as exc:
        return SloFigures(slo_note=f"not searched: {exc}")
    except asyncio.CancelledError:
        cancelled.set()
        raise


class SearchCancelled(Exception):
    """The measurement was stopped while its SLO search ran."""


def with_slo(result: MeasureResult, figures: SloFigures) -> MeasureResult:
    """The result with the SLO figures at its top level; a search that did not run, or that a
    probe the client could not measure ended, makes it incomplete (no load meeting the SLO is a
    finding, not a missing figure)."""
    update: dict[str, Any] = figures.model_dump()
    search = figures.slo_search
    if search is None or search.get("client_limited"):
        update["incomplete_because"] = [
            *result.incomplete_because,
            f"slo: {figures.slo_note or 'not searched'}",
        ]
        update["complete"] = False
    return result.model_copy(update=update)


def watch_levels(watch: IdentityWatch, phase: str) -> AfterLevel:
    """The identity check after each level of a phase of levels (parallel, long prompts)."""

    async def after(concurrency: int) -> str | None:
        return await watch.check_at(*level_label(phase, concurrency))

    return after


def watched_looks(looks: QualityLooks | None, watch: IdentityWatch) -> QualityLooks | None:
    """A sequential stop's looks with the identity checked before each (a change drops the
    quality phase: the phase is the span, `quality/look at N` the boundary)."""
    if looks is None:
        return None

    async def check(answered: int) -> str | None:
        return await watch.check_at(
            f"quality/look at {answered}",
            f"before the sequential look at {answered} answers of the quality phase",
        )

    return WatchedLooks(looks, check)


def identity_reason(identity: ServerIdentity) -> str:
    """The incomplete-note of a server whose identity changed: what changed and where, the phase
    (or level) it fell in (its figures dropped) and that nothing later was measured."""
    spanned = spanned_phase(identity)
    dropped = f"; figures of {spanned_text(spanned)} dropped" if spanned else ""
    last = identity.checked[-1] if identity.checked else ""
    closing = "/" not in last and ": " not in last  # the check after the last phase
    after = "" if closing else "; later phases not measured"
    return f"server identity: {identity.changed}{dropped}{after}"


def skipped_load(settings: MeasureSettings, why: str) -> LoadDetail:
    """The parallel phase not run: every level asked for, without a figure, saying why."""
    levels = [
        LoadLevel(concurrency=level, problem=f"not measured: {why}", batches=[])
        for level in settings.load_levels
    ]
    return LoadDetail(
        max_tokens=settings.load_max_tokens,
        batches_per_level=settings.load_batches,
        levels=levels,
    )


def skipped_quality(
    settings: MeasureSettings, questions: QuestionSet, why: str, *, asked: bool = False
) -> QualityDetail:
    """The questions not asked (or, `asked`, whose answers are not counted): every one
    unanswered (not wrong), saying why."""
    error = why if asked else f"not asked: {why}"
    items = [
        QualityItem.scored(question, None, settings.scoring, error=error)
        for question in questions.questions
    ]
    return QualityDetail.from_items(
        items,
        question_set=questions.name,
        question_set_sha256=questions.sha256,
        max_tokens=settings.quality_max_tokens,
        temperature=0.0,
        seed=settings.quality_seed,
        scoring=settings.scoring,
        system_prompt=settings.system_prompt,
    )


async def _prefill(
    client: ChatClient,
    settings: MeasureSettings,
    described: dict[str, Any],
    progress: ProgressFn,
    counters: PrefixCacheCounters | None = None,
    tokenizer: Path | None = None,
) -> PrefillDetail:
    """The prefill phase at the settings' two lengths, within the context the server said;
    the server's prefix-cache `counters` read around the cache pair; `tokenizer` counts prompts
    where the server gives no count."""
    short, long = settings.prefill_tokens
    context = described.get("max_model_len") or described.get("n_ctx")
    return await measure_prefill(
        client,
        short_tokens=short,
        long_tokens=long,
        repeats=settings.decode_repeats,
        context_tokens=context if isinstance(context, int) else None,
        progress=progress,
        counters=counters,
        tokenizer=tokenizer,
    )


def prefill_records(prefill: PrefillDetail | None) -> list[RequestRecord]:
    """The phase's timed requests: the points and the prefix-cache pair (not the probes)."""
    if prefill is None:
        return []
    cache = prefill.prefix_cache.records if prefill.prefix_cache else []
    return [*prefill.records, *cache]


def prefill_sent(prefill: PrefillDetail | None) -> list[RequestRecord]:
    """Every request the phase sent: the sizing probes too."""
    return [*prefill.probe_records, *prefill_records(prefill)] if prefill else []


def save_or_rescue(result: MeasureResult, path: Path) -> Path:
    """Write the result; if that fails after all (disk full, the folder gone), keep it in the
    state dir and say where, so a finished measurement is never lost."""
    try:
        save_result(result, path)
        return path
    except OSError as exc:
        reason = describe_write_error(exc)

    rescue = state_dir() / "unsaved" / f"{path.stem}-{utc_now().replace(':', '')}.json"
    try:
        save_result(result, rescue)
    except OSError as again:
        raise UserError(
            f"could not write {path} ({reason}) nor a copy in {rescue.parent} "
            f"({describe_write_error(again)}): the measurement is lost"
        ) from None
    raise UserError(f"could not write {path} ({reason}); the result was kept at {rescue}")


async def _fidelity(
    endpoint: Endpoint,
    settings: MeasureSettings,
    question_set: QuestionSet,
    reference: FidelityRecord | None,
    wire: WireOptions,
) -> tuple[FidelityRecord | None, list[str]]:
    """This run's own record (the first N questions) or one forced along `reference`, its calls
    sent again as every other request of the measurement is (`wire.retry`)."""
    if endpoint.http_root is None:
        return None, [f"fidelity: not measured, a {endpoint.backend} target shows no logprobs"]
    prompts = [question.prompt for question in question_set.questions][: settings.fidelity_prompts]
    try:
        record = await collect_fidelity(
            endpoint.http_root,
            [] if reference is not None else prompts,
            top_k=settings.fidelity_top_k,
            max_tokens=settings.fidelity_max_tokens,
            reference=reference,
            system_prompt=settings.system_prompt,
            api_key=endpoint.api_key,
            timeout_s=settings.timeout_s,
            retry=wire.retry,
        )
    except (UserError, TransportError) as exc:
        # Everything else is measured by now: a server without logprobs must not lose it.
        return None, [f"fidelity: not measured: {exc}"]
    record.vocabulary = await asyncio.to_thread(endpoint.vocabulary)
    return record, []


LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def _server_here(endpoint: Endpoint) -> bool:
    """Whether the measured server runs on this host (started here, or at a loopback address):
    its CPU is then not another process's load."""
    if endpoint.backend in ("local", "vllm"):
        return True
    if endpoint.http_root is None:
        return False

    return parse_address(endpoint.http_root).host.strip("[]") in LOOPBACK


def _server_root(endpoint: Endpoint) -> str | None:
    """`http://host:port` of the server's own API, where it has one (not SageMaker)."""
    return server_root(endpoint.http_root) if endpoint.http_root else None


def _environment(endpoint: Endpoint, described: dict[str, Any], started: str) -> Environment:
    """Where the measurement ran: the backend's own facts first, then what the server said."""
    known = endpoint.environment
    return Environment(
        target=str(endpoint.target),
        backend=endpoint.backend,
        engine=known.get("engine") or described.get("engine"),
        engine_version=known.get("engine_version") or described.get("engine_version"),
        model=known.get("model") or described.get("model"),
        checkpoint_file=known.get("checkpoint_file"),
        checkpoint_sha256=known.get("checkpoint_sha256"),
        checkpoint_bits_per_weight=known.get("checkpoint_bits_per_weight"),
        checkpoint_facts=known.get("checkpoint_facts"),
        host_cpu=host_cpu(),
        host_cores=os.cpu_count(),
        platform=platform.platform(),
        python=platform.python_version(),
        sagemeter_version=__version__,
        started_utc=started,
        ended_utc=utc_now(),
        ray_cluster=os.environ.get("SAGEMETER_RAY") or None,
        server=described,
    )


def assemble_result(
    name: str,
    settings: MeasureSettings,
    environment: Environment,
    startup: StartupFacts | None,
    decode: DecodeDetail,
    load: LoadDetail,
    quality: QualityDetail,
    fidelity: FidelityRecord | None = None,
    fidelity_warnings: list[str] | None = None,
    *,
    server_metrics: ServerMetrics | None = None,
    prefill: PrefillDetail | None = None,
    server_identity: ServerIdentity | None = None,
    host: HostLoad | None = None,
    long_prompt_load: LongPromptLoad | None = None,
    endpoint_metrics: EndpointMetrics | None = None,
    cut: list[str] | None = None,
) -> MeasureResult:
    """The article's keys on top, the evidence in `detail`; no figure from invalid data.
    `cut`: figures a time limit kept from being measured at all (each is missing)."""
    records = [
        *decode.records,
        *prefill_sent(prefill),
        *(r for level in load.levels for r in level.records),
        *long_prompt_records(long_prompt_load),
    ]
    failed = sum(1 for r in records if not r.ok) + sum(1 for i in quality.items if i.error)
    retried = sum(1 for r in records if r.retries) + sum(1 for i in quality.items if i.retries)
    retries = sum(r.retries for r in records) + sum(i.retries for i in quality.items)
    retries += fidelity.retries if fidelity is not None else 0
    reopened = sum(1 for r in records if r.reopened) + sum(1 for i in quality.items if i.reopened)
    missing = missing_figures(settings, decode, load, quality, fidelity, fidelity_warnings or [])
    missing[1:1] = [*missing_prefill(settings, prefill), *(cut or [])]
    missing.extend(missing_long_prompts(long_prompt_load))
    if server_identity is not None and server_identity.changed:
        missing.insert(0, identity_reason(server_identity))
    warnings = [
        *decode.problems,
        *prefill_warnings(prefill),
        *(level.problem for level in load.levels if level.problem),
        *(f"decode: measured again: {why}" for why in decode.measured_again),
        *(f"{lv.concurrency} at once: {why}" for lv in load.levels for why in lv.measured_again),
        *long_prompt_warnings(long_prompt_load),
        *_client_bound_warnings(decode),
        *token_warnings(decode, load, prefill, long_prompt_load),
        *(fidelity_warnings or []),
        *(endpoint_metrics.warnings() if endpoint_metrics else []),
    ]
    errors = [r.error for r in records if not r.ok] + [i.error for i in quality.items if i.error]
    timed_out = sum(1 for error in errors if error and error.startswith(TIMEOUT_PREFIX))
    if failed:
        warnings.append(failure_summary(failed, timed_out))
    if retries:
        warnings.append(f"{retries} tries were sent again after a transient failure")
    detail = Detail(
        settings=settings.model_dump(),
        environment=environment,
        startup=startup,
        decode=decode,
        prefill=prefill,
        load=load,
        long_prompt_load=long_prompt_load,
        quality=quality,
        fidelity=fidelity,
        server_metrics=server_metrics,
        endpoint_metrics=endpoint_metrics,
        server_identity=server_identity,
        host=host,
        failed_requests=failed,
        timed_out_requests=timed_out,
        retried_requests=retried,
        retries=retries,
        reopened_requests=reopened,
        warnings=warnings,
    )
    # Every declared figure (sagemeter's own and plug-ins') from the records, at the top level.
    figures, figure_warnings = top_level_figures(detail)
    levels, level_warnings = top_level_levels(detail)  # plug-ins' level families
    detail.warnings.extend([*figure_problems(), *figure_warnings, *level_warnings])
    result = MeasureResult(
        name=name,
        complete=not missing,
        **{LOAD.name: {str(lv.concurrency): _round(lv.tokens_per_second) for lv in load.levels}},
        quality=f"{quality.correct}/{quality.answered_count}",
        **long_prompt_figures(long_prompt_load),
        **figures,
        **levels,
        incomplete_because=missing,
        intervals=speed_summaries(decode, load, settings.load_statistic, prefill, long_prompt_load),
        detail=detail,
    )
    return fill_derived(result)


def ttft_long_prompt_ms(prefill: PrefillDetail | None) -> float | None:
    """The long prompts' median TTFT as the result's top level holds it (its declaration's)."""
    return _round(long_prompt_ttft_ms(prefill))


def long_prompt_figures(long_load: LongPromptLoad | None) -> dict[str, dict[str, float | None]]:
    """The top-level figures by level: throughput and the first token's p50 and p90 wait
    (nothing when the phase was not run; null for a level without a figure)."""
    if long_load is None:
        return {}
    levels = long_load.levels
    return {
        LONG_PROMPT.name: {
            str(level.concurrency): _round(level.tokens_per_second) for level in levels
        },
        LONG_PROMPT_TTFT_P50.name: {
            str(level.concurrency): level_ttft_ms(level, "median") for level in levels
        },
        LONG_PROMPT_TTFT_P90.name: {
            str(level.concurrency): level_ttft_ms(level, "p90") for level in levels
        },
    }


def missing_long_prompts(long_load: LongPromptLoad | None) -> list[str]:
    """Each long-prompt level asked for that has no figure, with why."""
    if long_load is None:
        return []
    return [
        f"long prompts, {level.concurrency} at once: {level.problem or 'no figure'}"
        for level in long_load.levels
        if level.tokens_per_second is None
    ]


def long_prompt_warnings(long_load: LongPromptLoad | None) -> list[str]:
    """What the levels saw besides their figures: partial levels, batches run again."""
    if long_load is None:
        return []
    found = [
        f"long prompts, {level.concurrency} at once: {level.problem}"
        for level in long_load.levels
        if level.problem and level.tokens_per_second is not None
    ]
    found += [
        f"long prompts, {level.concurrency} at once: {why}"
        for level in long_load.levels
        for why in level.measured_again
    ]
    return [*long_load.notes, *found]


def missing_prefill(settings: MeasureSettings, prefill: PrefillDetail | None) -> list[str]:
    """The prefill rate, when the phase ran and could not give it, with why (a phase that was
    not run, e.g. by `--method article`, misses nothing)."""
    if not settings.prefill_tokens or prefill is None or prefill.valid:
        return []
    return [f"prefill rate: {prefill.problems[0] if prefill.problems else 'no figure'}"]


def prefill_warnings(prefill: PrefillDetail | None) -> list[str]:
    """What the phase saw besides its figure: clamps, failures, stalls, the cache pair."""
    if prefill is None:
        return []
    found = [p if p.startswith("prefill") else f"prefill: {p}" for p in prefill.problems]
    found += [f"prefill: measured again: {why}" for why in prefill.measured_again]
    cache = prefill.prefix_cache
    if cache is not None and cache.problem:
        found.append(f"prefill, the repeated prompt: {cache.problem}")
    return found


TIMEOUT_PREFIX = "timeout:"


def failure_summary(failed: int, timed_out: int) -> str:
    """Every failed request counted, and how: a timeout is a failure that is never sent again."""
    parts = []
    if timed_out:
        parts.append(f"{timed_out} timed out (a timeout is not sent again)")
    if failed > timed_out:
        parts.append(f"{failed - timed_out} failed otherwise, after any retries")
    return (
        f"{failed} requests failed: {', '.join(parts)}; their batches and replies are not in "
        "any figure (see detail records)"
    )


def missing_figures(
    settings: MeasureSettings,
    decode: DecodeDetail,
    load: LoadDetail,
    quality: QualityDetail,
    fidelity: FidelityRecord | None,
    fidelity_warnings: list[str],
) -> list[str]:
    """Each figure the settings asked for that the measurement could not give, with why."""
    missing = []
    if not decode.valid or decode.tokens_per_second is None:
        reason = decode.problems[0] if decode.problems else "no rate"
        missing.append(f"decode rate: {reason}")
    for level in load.levels:
        if level.tokens_per_second is None:
            missing.append(f"{level.concurrency} at once: {level.problem or 'no figure'}")
    unanswered = quality.total - quality.answered_count
    if unanswered:
        first = next((item.error for item in quality.items if item.error), None)
        missing.append(f"quality: {unanswered} of {quality.total} questions unanswered ({first})")
    if fidelity is None and (settings.fidelity_prompts > 0 or fidelity_warnings):
        missing.append(fidelity_warnings[0] if fidelity_warnings else "fidelity: not measured")
    return missing


def token_warnings(
    decode: DecodeDetail,
    load: LoadDetail,
    prefill: PrefillDetail | None = None,
    long_load: LongPromptLoad | None = None,
) -> list[str]:
    """Replies whose `usage` and counted token events disagree, per phase (load's own rule)."""
    phases = [("decode", decode.records)]
    if prefill is not None:
        phases.append(("prefill", prefill_records(prefill)))
    phases += [(f"{level.concurrency} at once", level.records) for level in load.levels]
    phases += [
        (f"long prompts, {level.concurrency} at once", level.records)
        for level in (long_load.levels if long_load else [])
    ]
    warnings = []
    for phase, records in phases:
        replies = answered(records)
        disagreeing = usage_disagreements(replies)
        if disagreeing:
            warnings.append(f"{phase}: {disagreement_note(disagreeing, len(replies))}")
    return warnings


CLIENT_SHARE_WARNING = 0.5  # half a core busy in the client: it may be part of what was timed


def _client_bound_warnings(decode: DecodeDetail) -> list[str]:
    """The event loop busy for over half the time it timed: its own overhead may be in it.

    A loop busier still (saturated) leaves no rate at all, and `decode.problems` says so (see
    measure/decode.py `client_bound`). Levels are judged batch by batch by the worker
    processes' own rules, see measure/load.py.
    """
    found = decode.client
    if found is None or client_bound(found):
        return []
    busy = found.loop_share if found.loop_share is not None else found.share
    if busy <= CLIENT_SHARE_WARNING:
        return []
    return [
        f"decode: the client's event loop was busy {busy:.0%} of the wall time it timed; its "
        "own overhead may be part of the figure"
    ]


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def fidelity_reference(path: Path) -> FidelityRecord:
    """A's record to force along: a result file's `detail.fidelity`, or a fidelity record file."""
    payload = probe_json(path)
    if isinstance(payload, dict) and payload.get("schema") == SCHEMA:
        return load_record(path)
    result = load_result(path)
    if result.detail is None or result.detail.fidelity is None:
        raise UserError(f"{path}: holds no fidelity record (measure it with --fidelity N first)")
    return result.detail.fidelity
