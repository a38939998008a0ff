"""One load run spread over a Ray cluster: the same schedule, workers and rules as one machine.

The streams (or the Poisson arrivals) are split over every worker of every node exactly as over
one machine's workers (`loadrun.worker_plans`), so a node with more CPUs carries more of the
load. The merged figures come from the same `build_result`; on top of one machine's rules, a
run is invalid when a node was lost (its requests are missing), when a node's own figures are
invalid on their own (as a shard's are), or when a node's clock is not aligned well enough for
the span the figures are divided by. The result's `cluster` says which node saw what.
"""

from __future__ import annotations

import time
from functools import partial

from sagemeter.errors import UserError
from sagemeter.loadgen.build import build_result
from sagemeter.loadgen.loadrun import RunWatch, run_label, shard_share, worker_plans
from sagemeter.loadgen.metrics import steady_window
from sagemeter.loadgen.result import ClockOffset, ClusterInfo, LoadResult, NodeFigures
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.transport.address import parse_address
from sagemeter.transport.node_clocks import remaining_error_s
from sagemeter.transport.pool import WorkerFailure
from sagemeter.transport.ray_pool import ClusterRun, NodeRun, RayPool
from sagemeter.transport.request import discover_model, request_body, request_bytes


def run_on_ray(
    settings: LoadSettings,
    started: float,
    address: str,
    api_key: str | None = None,
    watch: RunWatch | None = None,
) -> LoadResult:
    """One run of `settings` over the cluster at `address`; `--workers` counts per node. A
    `watch` shows the run while it goes: its time and ETA (the nodes' finished requests are
    counted only when they report back, so no count)."""
    settings = settings.checked()
    if settings.sharded or settings.start_at is not None:
        raise UserError("--ray spreads one run over the cluster; leave out --shard and --start-at")
    endpoint = parse_address(settings.target)
    share = shard_share(settings)
    units = len(share.streams) or len(share.arrivals)
    try:
        with RayPool(address, settings.workers) as pool:
            model = settings.model or discover_model(endpoint, api_key)
            settings = settings.model_copy(update={"model": model})
            body = request_body(settings.api, model, settings.prompt, settings.max_tokens)
            payload = request_bytes(endpoint, settings.api, body, api_key)
            plans = worker_plans(settings, endpoint, payload, share, min(pool.capacity, units))
            watching = None
            if watch is not None:
                label, duration_s = f"{run_label(settings)} on Ray", settings.duration_s
                watching = partial(watch.watching, label, duration_s, None)
            cluster = pool.run_cluster(plans, watching=watching)
            info = (pool.address, pool.ray_version)
    except WorkerFailure as exc:
        raise UserError(str(exc)) from None
    wall_s = time.perf_counter() - started
    nodes = [node_figures(settings, node) for node in cluster.nodes]
    invalid = cluster.lost_reasons()
    invalid += [
        f"{node.slot.label}: {reason}"
        for node, figures in zip(cluster.nodes, nodes, strict=True)
        for reason in figures.invalid_because
    ]
    clock_invalid, clock_notes = clock_checks(settings, cluster)
    result = build_result(
        settings,
        cluster.run,
        asked_concurrency=share.asked_concurrency,
        wall_s=wall_s,
        include_raw=settings.raw,
        extra_invalid=invalid + clock_invalid,
    )
    return result.model_copy(
        update={
            "problems": result.problems + clock_notes,
            "cluster": ClusterInfo(
                address=info[0],
                ray_version=info[1],
                nodes=nodes,
                workers_per_node=[len(node.plans) for node in cluster.nodes],
                lost_nodes=sum(node.lost is not None for node in cluster.nodes),
            ),
        }
    )


def clock_checks(settings: LoadSettings, cluster: ClusterRun) -> tuple[list[str], list[str]]:
    """Each surviving node's clock against the merged steady window (and, open loop, the
    schedule)."""
    start_us, end_us, _, _ = steady_window(cluster.run.records, settings.mode)
    return cluster.clock_checks(
        (end_us - start_us) * 1e-6, "steady window", open_loop=settings.mode != "closed"
    )


def node_figures(settings: LoadSettings, node: NodeRun) -> NodeFigures:
    """One node's share and what it saw, its own figures judged on their own."""
    streams = [stream for plan in node.plans for stream in plan.streams]
    arrivals = sum(len(plan.arrivals) for plan in node.plans)
    clock = ClockOffset(
        offset_s=node.clock_before.offset_s,
        uncertainty_s=node.clock_before.uncertainty_s,
        offset_after_s=node.clock_after.offset_s if node.clock_after is not None else None,
        remaining_error_s=remaining_error_s(node.clock_before, node.clock_after),
    )
    common = {
        "node": node.slot.index,
        "node_id": node.slot.node_id,
        "address": node.slot.address,
        "hostname": node.slot.facts.hostname,
        "cores": node.slot.cores,
        "workers": [plan.worker for plan in node.plans],
        "streams": streams,
        "arrivals": arrivals,
        "clock": clock,
        "lost": node.lost,
    }
    if node.run is None:
        return NodeFigures(
            **common,
            requests_completed=0,
            requests_failed=0,
            output_tokens=0,
            output_tokens_per_second=None,
            ttft_median_s=None,
            tpot_median_s=None,
            loop_lag_p99_s=None,
            valid=None,
            invalid_because=[],
        )
    alone = build_result(
        settings,
        node.run,
        asked_concurrency=len(streams) if settings.mode == "closed" else None,
        wall_s=0.0,
    )
    return NodeFigures(
        **common,
        requests_completed=alone.requests_completed,
        requests_failed=alone.requests_failed,
        output_tokens=alone.output_tokens,
        output_tokens_per_second=alone.output_tokens_per_second,
        ttft_median_s=alone.ttft_s.median,
        tpot_median_s=alone.tpot_s.median,
        loop_lag_p99_s=alone.self_awareness.loop_lag_s.p99,
        valid=alone.valid,
        invalid_because=alone.invalid_because,
    )
