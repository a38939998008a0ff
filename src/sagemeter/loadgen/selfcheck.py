"""How far can this machine's client be trusted? Measure a server of known timing and compare.

The known-truth server (`sagemeter.calibrate`) answers with 50 ms to the first token and 4 ms
between tokens; each level is a closed-loop run of 256-token replies, and every headline figure
is set beside what a perfect client would see, with the error in percent.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.loadgen.loadrun import RunWatch, run_once
from sagemeter.loadgen.ray_run import run_on_ray
from sagemeter.loadgen.result import LoadResult
from sagemeter.loadgen.settings import LoadSettings

TRUTH = TruthTiming(ttft_s=0.05, itl_s=0.004)
REPLY_TOKENS = 256
DEFAULT_LEVELS = (1, 16, 32, 64, 128)


class FigureCheck(BaseModel):
    name: str
    truth: float
    measured: float | None
    error_pct: float | None


class LevelCheck(BaseModel):
    """One level: truth against measured, and the client's own figures."""

    concurrency: int
    figures: list[FigureCheck]
    cpu_s_per_1000_tokens: float | None
    loop_lag_p99_s: float | None
    achieved_concurrency: float
    valid: bool
    invalid_because: list[str]
    problems: list[str]
    server_cpu_share: float | None
    server_write_lateness_s: float | None
    result: LoadResult


class SelfCheck(BaseModel):
    ttft_s: float
    itl_s: float
    reply_tokens: int
    seconds: float
    levels: list[LevelCheck]
    wall_s: float


def _error(truth: float, measured: float | None) -> float | None:
    return None if measured is None else (measured - truth) / truth * 100


def _server_stats(url: str) -> dict[str, float]:
    """The truth server's own counters (GET /stats); empty when it cannot be read."""
    try:
        with urllib.request.urlopen(f"{url}/stats", timeout=5) as answer:
            stats = json.loads(answer.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(stats, dict):
        return {}
    return {k: float(v) for k, v in stats.items() if isinstance(v, int | float)}


def _per(before: dict[str, float], after: dict[str, float], top: str, bottom: str) -> float | None:
    """Δtop / Δbottom between two /stats readings, when both keys are there."""
    if top not in before or top not in after or bottom not in before or bottom not in after:
        return None
    span = after[bottom] - before[bottom]
    return (after[top] - before[top]) / span if span > 0 else None


def check_level(
    level: int,
    result: LoadResult,
    server_cpu_share: float | None = None,
    server_write_lateness_s: float | None = None,
) -> LevelCheck:
    measured = {
        "output tok/s": (
            TRUTH.tokens_per_second(level, REPLY_TOKENS),
            result.output_tokens_per_second,
        ),
        "TTFT median s": (TRUTH.ttft_s, result.ttft_s.median),
        "TPOT median s": (TRUTH.tpot_s, result.tpot_s.median),
        "ITL median s": (TRUTH.itl_s, result.itl_s.median),
    }
    return LevelCheck(
        concurrency=level,
        figures=[
            FigureCheck(name=name, truth=truth, measured=value, error_pct=_error(truth, value))
            for name, (truth, value) in measured.items()
        ],
        cpu_s_per_1000_tokens=result.cpu_s_per_1000_tokens,
        loop_lag_p99_s=result.self_awareness.loop_lag_s.p99,
        achieved_concurrency=result.achieved_concurrency,
        valid=result.valid,
        invalid_because=result.invalid_because,
        problems=result.problems,
        server_cpu_share=server_cpu_share,
        server_write_lateness_s=server_write_lateness_s,
        result=result,
    )


def _run_level(settings: LoadSettings, ray: str | None, watch: RunWatch | None) -> LoadResult:
    if ray is None:
        return run_once(settings, time.perf_counter(), watch=watch)

    return run_on_ray(settings, time.perf_counter(), ray, watch=watch)


def run_selfcheck(
    levels: Sequence[int],
    seconds: float,
    workers: int | None,
    started: float,
    on_level: Callable[[LevelCheck], None] | None = None,
    ray: str | None = None,
    watch: RunWatch | None = None,
) -> SelfCheck:
    """Start the truth server, measure it at each level, return truth against measured.

    With `ray`, each level runs on the Ray cluster at that address (`loadgen.ray_run`); the
    truth server listens on 127.0.0.1, so only nodes on this machine can reach it. A `watch`
    is shown each level while it runs.
    """
    checks: list[LevelCheck] = []
    with running_truth_server(TRUTH) as url:
        for level in levels:
            settings = LoadSettings(
                target=url,
                concurrency=level,
                max_tokens=REPLY_TOKENS,
                duration_s=seconds,
                workers=workers,
            )
            before = _server_stats(url)
            result = _run_level(settings, ray, watch)
            after = _server_stats(url)
            # The server's own view: its CPU share, and (where it reports them) how late its
            # timed writes left on average, which bounds how exactly any client can see ITL.
            check = check_level(
                level,
                result,
                _per(before, after, "cpu_seconds", "uptime_s"),
                _per(before, after, "lateness_sum_s", "writes"),
            )
            checks.append(check)
            if on_level is not None:
                on_level(check)
    return SelfCheck(
        ttft_s=TRUTH.ttft_s,
        itl_s=TRUTH.itl_s,
        reply_tokens=REPLY_TOKENS,
        seconds=seconds,
        levels=checks,
        wall_s=time.perf_counter() - started,
    )
