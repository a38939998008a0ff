"""From a run's records to its result: figures, the client's self-awareness, validity.

`build_result` is the one path from raw records to a `LoadResult`, used by a run, by every level
of a sweep, and by a shard merge; `raw_run` / `run_from_raw` turn a run into its JSON form and
back without losing a microsecond, so a merge recomputes exactly what one run would have.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from datetime import UTC, datetime

from sagemeter import __version__
from sagemeter.evidence.distribution import distribution
from sagemeter.loadgen.health import Evidence, assess
from sagemeter.loadgen.metrics import summarize
from sagemeter.loadgen.result import (
    LoadResult,
    RawRecord,
    RawRun,
    SelfAwareness,
    ShardInfo,
    WorkerFigures,
)
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.request_record import RequestRecord
from sagemeter.transport.pool import RunOutput


def utc_text(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds")


def shard_info(settings: LoadSettings, wall_start: float, merged: bool = False) -> ShardInfo:
    return ShardInfo(
        index=None if merged else settings.shard_index,
        count=settings.shard_count,
        seed=settings.seed,
        wall_start=wall_start,
        wall_start_utc=utc_text(wall_start),
    )


def build_result(
    settings: LoadSettings,
    run: RunOutput,
    asked_concurrency: int | None,
    wall_s: float,
    include_raw: bool = False,
    extra_invalid: list[str] | None = None,
) -> LoadResult:
    """Every figure of `run`, judged by the rules of `health.py`."""
    figures = summarize(
        run.records, settings.mode, settings.max_tokens, settings.slo_ttft_s, settings.slo_tpot_s
    )
    client_cpu_s = run.client_cpu_s
    run_s = max((w.run_s for w in run.workers), default=0.0)
    worker_shares = [w.cpu_run_s / w.run_s if w.run_s > 0 else 0.0 for w in run.workers]
    cores_share = client_cpu_s / (run_s * run.cores) if run_s > 0 else 0.0
    loop_lag = distribution(lag * 1e-6 for lag in run.loop_lag_us)
    invalid, problems = assess(
        Evidence(
            mode=settings.mode,
            asked_concurrency=asked_concurrency,
            achieved_concurrency=figures.achieved_concurrency,
            loop_lag_s=loop_lag,
            send_lag_s=figures.send_lag_s,
            mean_request_s=figures.mean_request_s,
            worker_cpu_shares=worker_shares,
            client_cpu_share_of_cores=cores_share,
            start_late_s=[w.start_late_s for w in run.workers],
            window=figures.window,
            requests_completed=figures.requests_completed,
            notes=figures.notes,
        )
    )
    if extra_invalid:
        invalid = [*invalid, *extra_invalid]
        problems = [*extra_invalid, *problems]
    awareness = SelfAwareness(
        cores=run.cores,
        workers=[
            WorkerFigures(
                worker=w.worker,
                loop=w.loop,
                requests=w.requests,
                run_s=w.run_s,
                cpu_run_s=w.cpu_run_s,
                cpu_share=share,
                start_late_s=w.start_late_s,
            )
            for w, share in zip(run.workers, worker_shares, strict=True)
        ],
        loop_lag_s=loop_lag,
        send_lag_kind=figures.send_lag_kind,
        send_lag_s=figures.send_lag_s,
        parent_cpu_s=run.parent_cpu_s,
        client_cpu_share_of_cores=cores_share,
        worker_cpu_share_max=max(worker_shares, default=0.0),
        startup_s=run.startup_s,
    )
    tokens = figures.output_tokens
    return LoadResult(
        output_tokens_per_second=figures.output_tokens_per_second,
        ttft_s=figures.ttft_s,
        tpot_s=figures.tpot_s,
        itl_s=figures.itl_s,
        requests_completed=figures.requests_completed,
        output_tokens=tokens,
        client_cpu_s=client_cpu_s,
        cpu_s_per_1000_tokens=client_cpu_s / tokens * 1000 if tokens else None,
        achieved_concurrency=figures.achieved_concurrency,
        valid=not invalid,
        problems=problems,
        wall_s=wall_s,
        target=settings.target,
        mode=settings.mode,
        asked_concurrency=asked_concurrency,
        asked_rate=settings.rate,
        requests_failed=figures.requests_failed,
        requests_reopened=figures.requests_reopened,
        reopen_lost_s=figures.reopen_lost_s,
        decode_tokens_per_second=figures.decode_tokens_per_second,
        invalid_because=invalid,
        window=figures.window,
        goodput=figures.goodput,
        tokens=figures.tokens,
        self_awareness=awareness,
        settings=settings,
        started_utc=utc_text(run.wall_start),
        sagemeter_version=__version__,
        shard=shard_info(settings, run.wall_start) if settings.sharded else None,
        raw=raw_run(run) if include_raw else None,
    )


def raw_record(record: RequestRecord) -> RawRecord:
    arrivals = record.arrivals_us
    return RawRecord(
        stream=record.stream,
        index=record.index,
        scheduled_us=record.scheduled_us,
        send_us=record.send_us,
        end_us=record.end_us,
        first_us=arrivals[0] if arrivals else None,
        gaps_us=[b - a for a, b in itertools.pairwise(arrivals)],
        usage_tokens=record.usage_tokens,
        engine_tokens=record.engine_tokens,
        finish_reason=record.finish_reason,
        done=record.done,
        error=record.error,
        reasoning_events=record.reasoning_events,
        reopened_from_us=record.reopened_from_us,
        connect_from_us=record.connect_from_us,
        max_tokens=record.max_tokens,
        prompt_tokens=record.prompt_tokens,
        cached_prompt_tokens=record.cached_prompt_tokens,
    )


def record_from_raw(raw: RawRecord, offset_us: int = 0) -> RequestRecord:
    arrivals: list[int] = []
    if raw.first_us is not None:
        at = raw.first_us + offset_us
        arrivals.append(at)
        for gap in raw.gaps_us:
            at += gap
            arrivals.append(at)
    return RequestRecord(
        stream=raw.stream,
        index=raw.index,
        scheduled_us=None if raw.scheduled_us is None else raw.scheduled_us + offset_us,
        send_us=raw.send_us + offset_us,
        end_us=raw.end_us + offset_us,
        arrivals_us=arrivals,
        usage_tokens=raw.usage_tokens,
        engine_tokens=raw.engine_tokens,
        finish_reason=raw.finish_reason,
        done=raw.done,
        error=raw.error,
        reasoning_events=raw.reasoning_events,
        reopened_from_us=(
            None if raw.reopened_from_us is None else raw.reopened_from_us + offset_us
        ),
        connect_from_us=None if raw.connect_from_us is None else raw.connect_from_us + offset_us,
        max_tokens=raw.max_tokens,
        prompt_tokens=raw.prompt_tokens,
        cached_prompt_tokens=raw.cached_prompt_tokens,
    )


def raw_run(run: RunOutput) -> RawRun:
    return RawRun(
        wall_start=run.wall_start,
        startup_s=run.startup_s,
        cores=run.cores,
        parent_cpu_s=run.parent_cpu_s,
        workers=[dataclasses.replace(worker) for worker in run.workers],
        loop_lag_us=run.loop_lag_us,
        records=[raw_record(record) for record in run.records],
    )


def run_from_raw(raw: RawRun, offset_us: int = 0, worker_offset: int = 0) -> RunOutput:
    """The run back from its JSON form, its timeline moved `offset_us` later."""
    return RunOutput(
        wall_start=raw.wall_start - offset_us * 1e-6,
        startup_s=raw.startup_s,
        records=[record_from_raw(record, offset_us) for record in raw.records],
        loop_lag_us=list(raw.loop_lag_us),
        workers=[
            dataclasses.replace(worker, worker=worker.worker + worker_offset)
            for worker in raw.workers
        ],
        parent_cpu_s=raw.parent_cpu_s,
        cores=raw.cores,
    )


def elapsed_since(started: float) -> float:
    """Seconds since `started` (a perf_counter reading taken when the command began)."""
    return time.perf_counter() - started
