"""One load run from settings to result: plan the workers, run them, judge the figures.

The worker processes are started first, so they boot while the parent asks the server for its
model and builds the request bytes; start-up is that boot plus connecting every stream.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from sagemeter.errors import UserError
from sagemeter.loadgen.build import build_result
from sagemeter.loadgen.result import LoadResult
from sagemeter.loadgen.schedule import shard_arrivals, split_count
from sagemeter.loadgen.settings import LoadSettings, available_cores, check_start_at
from sagemeter.loadgen.workload import Prepared, measured, prepare, schedule, uses_deck
from sagemeter.transport.address import ServerAddress, parse_address
from sagemeter.transport.deck import Deck
from sagemeter.transport.done_count import DoneCount
from sagemeter.transport.pool import WorkerFailure, WorkerPool
from sagemeter.transport.request import discover_model, request_body, request_bytes
from sagemeter.transport.slo_stop import SloStop
from sagemeter.transport.worker import WorkerPlan

# Open loop: connections opened before the start, enough for this many seconds of arrivals, so
# connecting does not land in the first requests' send lag.
PREOPEN_SECONDS = 2.0
PREOPEN_MAX = 256


class RunWatch(Protocol):
    """Who shows a run while it goes (the CLI's progress line): `done` counts the requests
    finished so far (None when they cannot be counted, e.g. on a Ray cluster)."""

    def watching(
        self, label: str, duration_s: float, done: Callable[[], int] | None
    ) -> AbstractContextManager[None]: ...


def run_label(settings: LoadSettings) -> str:
    """What a progress line calls one run: its level, its arrival rate or its trace."""
    if settings.trace is not None:
        return f"trace ×{settings.trace_speed:g}"
    if settings.rate is not None:
        return f"{settings.rate:g} requests/s"
    return f"{settings.concurrency} at once"


@dataclass(frozen=True)
class Share:
    """This shard's part of the load: closed-loop stream ids or open-loop arrivals."""

    streams: range
    arrivals: list[tuple[int, float]]
    scheduled: int = 0  # open loop: arrivals of the whole schedule, every shard's

    @property
    def asked_concurrency(self) -> int | None:
        return len(self.streams) if self.streams else None


def shard_share(settings: LoadSettings) -> Share:
    """The streams (closed loop) or arrivals (--rate, or a trace) of this shard of the run."""
    if settings.mode == "closed":
        streams = split_count(settings.concurrency, settings.shard_count, settings.shard_index)
        return Share(streams=streams, arrivals=[])
    instants = schedule(settings)
    arrivals = shard_arrivals(instants, settings.shard_count, settings.shard_index)
    if not arrivals:
        source = "the trace" if settings.trace is not None else f"--rate {settings.rate:g}"
        raise UserError(
            f"no arrival falls in this shard's {settings.duration_s:g} s of {source}: raise "
            "--duration (or --rate)"
        )
    return Share(streams=range(0), arrivals=arrivals, scheduled=len(instants))


def worker_plans(
    settings: LoadSettings,
    endpoint: ServerAddress,
    payload: bytes,
    share: Share,
    workers: int,
    done_fd: int = -1,
    slo_stop: SloStop | None = None,
    deck: Deck | None = None,
) -> list[WorkerPlan]:
    """Split the share across `workers`: stream slices, or every workers-th arrival (a deck,
    when the workload has one, goes whole to each worker: arrivals index it)."""
    plans = []
    for worker in range(workers):
        if share.streams:
            part = split_count(len(share.streams), workers, worker)
            streams = tuple(share.streams[i] for i in part)
            arrivals: tuple[tuple[int, float], ...] = ()
            preopen = 0
        else:
            streams = ()
            arrivals = tuple(share.arrivals[worker::workers])
            rate = len(arrivals) / settings.duration_s
            preopen = min(len(arrivals), PREOPEN_MAX, math.ceil(rate * PREOPEN_SECONDS))
        plans.append(
            WorkerPlan(
                worker=worker,
                host=endpoint.host,
                port=endpoint.port,
                tls=endpoint.tls,
                server_name=endpoint.host,
                payload=payload,
                duration_s=settings.duration_s,
                timeout_s=settings.timeout_s,
                streams=streams,
                arrivals=arrivals,
                preopen=preopen,
                prefer_uvloop=settings.prefer_uvloop,
                done_fd=done_fd,
                slo_stop=slo_stop,
                deck=deck,
                deck_workers=workers,
            )
        )
    return plans


def run_once(
    settings: LoadSettings,
    started: float,
    api_key: str | None = None,
    watch: RunWatch | None = None,
    slo_stop: SloStop | None = None,
) -> LoadResult:
    """One run of `settings` (one level, one shard); `started` is the command's perf_counter.
    A `watch` is shown the run while it goes, with the requests finished so far; `slo_stop`
    ends the sending once that many requests missed the SLO (an operating-point probe)."""
    settings = settings.checked()
    endpoint = parse_address(settings.target)
    if settings.start_at is not None:
        check_start_at(settings.start_at, time.time())
    share = shard_share(settings)
    units = len(share.streams) or len(share.arrivals)
    workers = max(1, min(settings.worker_count(), units))
    done = DoneCount(workers) if watch is not None or slo_stop is not None else None
    done_fd = done.fd if done is not None else -1  # every worker inherits it and maps it
    with WorkerPool(workers, done_fd) as pool, contextlib.ExitStack() as cleanup:
        if done is not None:
            cleanup.callback(done.close)
        model = settings.model or discover_model(endpoint, api_key)
        settings = settings.model_copy(update={"model": model})
        body = request_body(settings.api, model, settings.prompt, settings.max_tokens)
        payload = request_bytes(endpoint, settings.api, body, api_key)
        prepared: Prepared | None = None
        if uses_deck(settings):
            prepared = prepare(settings, endpoint, model, api_key, share.scheduled)
        plans = worker_plans(
            settings,
            endpoint,
            payload,
            share,
            workers,
            done_fd,
            slo_stop,
            prepared.deck if prepared is not None else None,
        )
        try:
            pool.prepare(plans)  # every worker connected: the clock starts with the sending
            if watch is not None:
                counted = done.total if done is not None else None
                label, duration_s = run_label(settings), settings.duration_s
                cleanup.enter_context(watch.watching(label, duration_s, counted))
            run = pool.start(available_cores(), settings.start_at)
        except WorkerFailure as exc:
            raise UserError(str(exc)) from None
    if run.stopped_early and not any(record.ok for record in run.records):
        raise UserError(f"{settings.target}: {run.stopped_early[0]}")
    result = build_result(
        settings,
        run,
        asked_concurrency=share.asked_concurrency,
        wall_s=time.perf_counter() - started,
        include_raw=settings.raw or settings.sharded,
    )
    if prepared is None:
        return result
    lateness = result.self_awareness.send_lag_s
    workload = measured(prepared, run.records, settings.mode != "closed", lateness)
    return result.model_copy(update={"workload": workload, "wall_s": time.perf_counter() - started})
