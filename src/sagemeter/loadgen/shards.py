"""Sharding past one machine: each host runs its share of one schedule; a merge recombines them.

Closed loop: shard i of n runs its slice of the C streams (the remainder to the first shards).
Poisson: every shard computes the same seeded schedule and keeps the arrivals whose index is i
mod n. Each shard file records its shard, the seed, its wall-clock start and every request's
timing; `merge_shards` puts all records on one timeline (shifted by the wall-clock starts) and
recomputes every figure with the same code as a single run. Clock skew between hosts goes
straight into that timeline, and each shard must validate on its own: a merge of shards is
invalid when any shard is.
"""

from __future__ import annotations

from collections.abc import Sequence

from sagemeter.errors import UserError
from sagemeter.loadgen.build import build_result, run_from_raw, shard_info
from sagemeter.loadgen.result import LoadResult
from sagemeter.transport.pool import RunOutput

# Settings that may differ between the shards of one run.
_PER_SHARD = {"shard_index", "start_at", "workers", "raw", "model"}


def _check_shards(results: Sequence[LoadResult]) -> None:
    if not results:
        raise UserError("give the shard files to merge")
    for number, result in enumerate(results):
        if result.shard is None or result.raw is None:
            raise UserError(
                f"file {number + 1} is not a shard (no shard or raw records): run it with --shard"
            )
        if result.sweep is not None:
            raise UserError(f"file {number + 1} is a sweep; only single runs can be merged")
    count = results[0].settings.shard_count
    indices = sorted(r.settings.shard_index for r in results)
    if indices != list(range(count)):
        raise UserError(
            f"shards {indices} given, but the run has {count}: give each of 0..{count - 1} once"
        )
    first = results[0].settings.model_dump(exclude=_PER_SHARD)
    for result in results[1:]:
        other = result.settings.model_dump(exclude=_PER_SHARD)
        if other != first:
            differing = sorted(key for key in first if first[key] != other.get(key))
            raise UserError(f"the shards were run with different settings: {', '.join(differing)}")


def merge_runs(runs: Sequence[RunOutput]) -> RunOutput:
    """Runs already on one timeline → one run (records, lag samples, workers, CPU, cores)."""
    records = sorted((r for run in runs for r in run.records), key=lambda r: r.send_us)
    return RunOutput(
        wall_start=min(run.wall_start for run in runs),
        startup_s=max(run.startup_s for run in runs),
        records=records,
        loop_lag_us=[lag for run in runs for lag in run.loop_lag_us],
        workers=[worker for run in runs for worker in run.workers],
        parent_cpu_s=sum(run.parent_cpu_s for run in runs),
        cores=sum(run.cores for run in runs),
    )


def merge_shards(results: Sequence[LoadResult]) -> LoadResult:
    """The combined figures of every shard of one run, recomputed from their records."""
    _check_shards(results)
    ordered = sorted(results, key=lambda r: r.settings.shard_index)
    base = min(r.raw.wall_start for r in ordered if r.raw is not None)
    runs: list[RunOutput] = []
    workers_before = 0
    for result in ordered:
        assert result.raw is not None
        offset_us = round((result.raw.wall_start - base) * 1e6)
        runs.append(run_from_raw(result.raw, offset_us, workers_before))
        workers_before += len(result.raw.workers)
    merged_run = merge_runs(runs)
    merged_run.wall_start = base
    settings = ordered[0].settings.model_copy(update={"shard_index": 0, "start_at": None})
    shard_invalid = [
        f"shard {r.settings.shard_index}: {reason}" for r in ordered for reason in r.invalid_because
    ]
    asked = settings.concurrency if settings.mode == "closed" else None
    result = build_result(
        settings,
        merged_run,
        asked_concurrency=asked,
        wall_s=max(r.wall_s for r in ordered),
        extra_invalid=shard_invalid,
    )
    return result.model_copy(update={"shard": shard_info(settings, base, merged=True)})
