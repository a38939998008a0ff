"""N requests at the same instant, sent by the load generator's worker processes.

One Python event loop can time about 25,000 streamed tokens a second before its own delays enter
the figures; a level of 64 or 128 requests at once against a fast server needs more than that.
So a batch is split over worker processes (one per `STREAMS_PER_WORKER` requests, at most one per
core), each with its connections opened before the common start instant, and judged afterwards
by the same client rules as a load run (`health.client_limits`).

With `SAGEMETER_RAY` set (`measure --ray ADDRESS`), the workers run on the nodes of that Ray
cluster instead (`ray_pool.RayPool`); a batch that lost a node or whose nodes' clocks cannot be
trusted over its span fails and does not count.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

from sagemeter.errors import UserError
from sagemeter.evidence.distribution import percentile
from sagemeter.request_record import RequestRecord
from sagemeter.transport.address import ServerAddress
from sagemeter.transport.chat import BatchRun
from sagemeter.transport.health import client_limits
from sagemeter.transport.pool import (
    RunOutput,
    WorkerFailure,
    WorkerPool,
    available_cores,
    split_count,
)
from sagemeter.transport.ray_pool import RayPool, connect
from sagemeter.transport.retry import RetryPolicy
from sagemeter.transport.worker import WorkerPlan

STREAMS_PER_WORKER = 32
# The Ray cluster a measurement's batches run on (`measure --ray` sets it); unset: this machine.
RAY_ENV = "SAGEMETER_RAY"
# Each stream sends one request; the deadline only has to lie beyond every retry.
BATCH_DEADLINE_S = 7 * 24 * 3600.0


@contextlib.contextmanager
def batches_on_ray(address: str | None) -> Iterator[None]:
    """Within it, batches run on the Ray cluster at `address` (None: on this machine).

    The cluster is joined first, so a bad address fails before any request; the environment is
    put back after, so a long-lived process (the MCP server) does not keep sending to it.
    """
    if address is None:
        yield
        return

    connect(address)
    previous = os.environ.get(RAY_ENV)
    os.environ[RAY_ENV] = address
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(RAY_ENV, None)
        else:
            os.environ[RAY_ENV] = previous


def workers_for(requests: int) -> int:
    """Worker processes for a batch of `requests`: one per STREAMS_PER_WORKER, one per core."""
    return max(1, min(available_cores(), math.ceil(requests / STREAMS_PER_WORKER)))


@dataclass(frozen=True)
class BatchWire:
    """How every request of a batch is sent."""

    address: ServerAddress
    timeout_s: float
    stall_s: float
    retry: RetryPolicy
    max_tokens: int | None
    expected_model: str | None = None


def batch_plans(wire: BatchWire, payloads: list[bytes], workers: int) -> list[WorkerPlan]:
    """Split the batch's requests (stream i sends payloads[i] once) over `workers`."""
    plans = []
    for worker in range(workers):
        streams = tuple(split_count(len(payloads), workers, worker))
        plans.append(
            WorkerPlan(
                worker=worker,
                host=wire.address.host,
                port=wire.address.port,
                tls=wire.address.tls,
                server_name=wire.address.host,
                payload=b"",
                duration_s=BATCH_DEADLINE_S,
                timeout_s=wire.timeout_s,
                streams=streams,
                stream_payloads=tuple(payloads[i] for i in streams),
                requests_per_stream=1,
                max_tokens=wire.max_tokens,
                stall_s=wire.stall_s,
                retry=wire.retry,
                expected_model=wire.expected_model,
            )
        )
    return plans


def judge(run: RunOutput, records: list[RequestRecord]) -> BatchRun:
    """The batch's records with the client's own figures and the rules they break."""
    lags = sorted(lag * 1e-6 for lag in run.loop_lag_us)
    lag_p99 = percentile(lags, 99) if lags else None
    run_s = max((w.run_s for w in run.workers), default=0.0)
    shares = [w.cpu_run_s / w.run_s if w.run_s > 0 else 0.0 for w in run.workers]
    cores_share = run.client_cpu_s / (run_s * run.cores) if run_s > 0 else 0.0
    return BatchRun(
        records=records,
        workers=len(run.workers),
        client_cpu_s=run.client_cpu_s,
        loop_lag_p99_s=lag_p99,
        limits=client_limits(lag_p99, shares, cores_share),
    )


class BatchSender:
    """Worker pools kept for a measurement's life, one per size, so batches reuse them."""

    def __init__(self) -> None:
        self._pools: dict[int, WorkerPool] = {}
        self._ray_address = os.environ.get(RAY_ENV) or None
        self._ray: RayPool | None = None

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        if self._ray is not None:
            self._ray.close()
            self._ray = None

    async def send(self, wire: BatchWire, payloads: list[bytes], origin_wall: float) -> BatchRun:
        """Send every payload at one instant; records come back on the `origin_wall` timeline."""
        if self._ray_address is not None:
            return await self._send_on_ray(self._ray_address, wire, payloads, origin_wall)
        workers = workers_for(len(payloads))
        pool = self._pools.get(workers)
        if pool is None:
            pool = self._pools[workers] = WorkerPool(workers)
        plans = batch_plans(wire, payloads, workers)
        try:
            run = await asyncio.to_thread(pool.run, plans, available_cores())
        except WorkerFailure as exc:
            self._pools.pop(workers, None)
            pool.close()
            return BatchRun(records=[], workers=workers, client_cpu_s=0.0, failure=str(exc))
        return judge(run, _on_timeline(run, origin_wall))

    async def _send_on_ray(
        self, address: str, wire: BatchWire, payloads: list[bytes], origin_wall: float
    ) -> BatchRun:
        """The same batch, its workers spread over the cluster's nodes."""
        try:
            if self._ray is None:
                self._ray = await asyncio.to_thread(RayPool, address)
            pool = self._ray
            workers = max(1, min(pool.capacity, math.ceil(len(payloads) / STREAMS_PER_WORKER)))
            run = await asyncio.to_thread(
                pool.run, batch_plans(wire, payloads, workers), pool.cores
            )
        except (WorkerFailure, UserError) as exc:  # UserError: the cluster cannot be joined
            if self._ray is not None:
                self._ray.close()  # the next batch places its agents on the nodes alive then
                self._ray = None
            return BatchRun(records=[], workers=0, client_cpu_s=0.0, failure=str(exc))
        return judge(run, _on_timeline(run, origin_wall))


def _on_timeline(run: RunOutput, origin_wall: float) -> list[RequestRecord]:
    """The run's records moved onto the `origin_wall` timeline, in stream order."""
    offset_us = round((run.wall_start - origin_wall) * 1e6)
    return sorted((r.shifted(offset_us) for r in run.records), key=lambda r: r.stream)
