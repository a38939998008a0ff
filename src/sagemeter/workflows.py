"""The verbs both faces call: measure a target, run the demo. No printing here, only callbacks."""

from __future__ import annotations

import asyncio
import os
import platform
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sagemeter import __version__
from sagemeter.endpoints import Endpoint, check_target, open_endpoint
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.decode import decode_request_count, measure_decode
from sagemeter.measure.figure_samples import speed_summaries
from sagemeter.measure.load import load_request_count, measure_load
from sagemeter.measure.quality import measure_quality
from sagemeter.questions import QuestionSet, load_question_set
from sagemeter.results import (
    DecodeDetail,
    Detail,
    Environment,
    LoadDetail,
    MeasureResult,
    QualityDetail,
    StartupFacts,
    result_path,
    save_result,
)
from sagemeter.settings import MeasureSettings
from sagemeter.targets import Target

PhaseFn = Callable[[str], None]


def _no_phase(_: str) -> None:
    """Default phase callback."""


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
        + load_request_count(settings.load_levels, settings.load_batches)
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
) -> tuple[MeasureResult, Path]:
    """Measure `target` the article's way and write `OUT_DIR/measure-NAME.json` atomically."""
    check_target(target)
    question_set = selected_questions(settings)
    started = utc_now()
    on_phase("starting")
    log_path = out_dir / f"engine-{name}.log"
    out_dir.mkdir(parents=True, exist_ok=True)
    async with open_endpoint(
        target,
        concurrency=settings.max_concurrency,
        max_reply_tokens=settings.max_reply_tokens,
        log_path=log_path,
    ) as endpoint:
        described = await endpoint.client.describe()
        on_phase("decode")
        decode = await measure_decode(
            endpoint.client,
            short_tokens=settings.short_tokens,
            long_tokens=settings.long_tokens,
            repeats=settings.decode_repeats,
            warmup=settings.decode_warmup,
            progress=progress,
        )
        on_phase("parallel")
        load = await measure_load(
            endpoint.client,
            levels=settings.load_levels,
            max_tokens=settings.load_max_tokens,
            batches=settings.load_batches,
            progress=progress,
        )
        on_phase("quality")
        quality = await measure_quality(
            endpoint.client,
            question_set,
            max_tokens=settings.quality_max_tokens,
            system_prompt=settings.system_prompt,
            progress=progress,
        )
        quality.chat_template_sha256 = described.get("chat_template_sha256")
        startup = await asyncio.to_thread(endpoint.startup_facts)
        environment = _environment(endpoint, described, started)
    result = assemble_result(name, settings, environment, startup, decode, load, quality)
    path = result_path(out_dir, name)
    save_result(result, path)
    return result, path


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
        host_cpu=host_cpu(),
        host_cores=os.cpu_count(),
        platform=platform.platform(),
        python=platform.python_version(),
        sagemeter_version=__version__,
        started_utc=started,
        ended_utc=utc_now(),
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
) -> MeasureResult:
    """The article's keys on top, the evidence in `detail`; no figure from invalid data."""
    failed = (
        sum(1 for r in decode.records if not r.ok)
        + sum(1 for level in load.levels for r in level.records if not r.ok)
        + sum(1 for item in quality.items if item.error)
    )
    warnings = list(decode.problems) + _client_bound_warnings(decode, load)
    if failed:
        warnings.append(f"{failed} requests failed; see detail records for reasons")
    return MeasureResult(
        name=name,
        decode_tokens_per_second=_round(decode.tokens_per_second) if decode.valid else None,
        per_call_fixed_cost_seconds=_round(decode.per_call_fixed_cost_s) if decode.valid else None,
        load_tokens_per_second={
            str(level.concurrency): round(level.tokens_per_second, 3)
            for level in load.levels
            if level.tokens_per_second is not None
        },
        quality=f"{quality.correct}/{quality.total}",
        weights_gib=startup.weights_gib if startup else None,
        kv_cache_tokens=startup.kv_cache_tokens if startup else None,
        load_seconds=startup.load_seconds if startup else None,
        intervals=speed_summaries(decode, load),
        detail=Detail(
            settings=settings.model_dump(),
            environment=environment,
            startup=startup,
            decode=decode,
            load=load,
            quality=quality,
            failed_requests=failed,
            warnings=warnings,
        ),
    )


CLIENT_SHARE_WARNING = 0.5  # half a core busy in the client: it may be part of what was timed


def _client_bound_warnings(decode: DecodeDetail, load: LoadDetail) -> list[str]:
    phases = [("decode", decode.client)]
    phases += [(f"{level.concurrency} at once", level.client) for level in load.levels]
    return [
        f"{phase}: the client's own CPU was {share.share:.0%} of the wall time it timed; "
        "its overhead may be part of the figure"
        for phase, share in phases
        if share is not None and share.share > CLIENT_SHARE_WARNING
    ]


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
