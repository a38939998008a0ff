"""`sagemeter measure` against the known-truth server, beside `sagemeter load` at each level.

The truth server answers every request with its first token at 50 ms and one token every 4 ms,
so a batch of N 256-token replies makes N × 256 / 1.074 s tokens/s, TTFT is 50 ms and every
inter-token gap 4 ms. For each of 1, 16, 64 and 128 at once, one `measure` run (decode 16/256
tokens × 5, two batches at that level) and then `load` (a closed loop at the same concurrency).
Target: every figure of `measure` within 2% of the truth at every level. The server's /stats
tell how late it wrote the run's first tokens, which splits a TTFT error into its share and
the client's.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.loadgen.loadrun import run_once
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.measure.workflow import measure_target
from sagemeter.settings import MeasureSettings
from sagemeter.targets import parse_target

TRUTH = TruthTiming(ttft_s=0.05, itl_s=0.004)
LEVELS = (1, 16, 64, 128)
TOKENS = 256
LOAD_SECONDS = 10.0


def _error(measured: float | None, truth: float) -> float | None:
    return None if measured is None else measured / truth - 1.0


def _server_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        stats: dict[str, Any] = json.loads(answer.read())
    return stats


def _first_token_late_ms(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """How late, on average, the server wrote the first tokens between two /stats reads."""
    count = after["first_tokens"] - before["first_tokens"]
    late = after["first_token_lateness_sum_s"] - before["first_token_lateness_sum_s"]
    return late / count * 1000 if count else None


def _measure(url: str, level: int) -> dict[str, Any]:
    """One `measure` run with the one level, and the server's own first-token lateness in it."""
    settings = MeasureSettings(
        short_tokens=16,
        long_tokens=256,
        decode_repeats=5,
        load_levels=[level],
        load_max_tokens=TOKENS,
        load_batches=2,
        questions_per_family=2,
    )
    before = _server_stats(url)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        result, _ = asyncio.run(
            measure_target(parse_target(url), name="truth", settings=settings, out_dir=Path(folder))
        )
        wall = time.perf_counter() - started
    after = _server_stats(url)
    server_late_ms = _first_token_late_ms(before, after)
    assert result.detail is not None and result.detail.load is not None
    (row,) = result.detail.load.levels
    truth = TRUTH.tokens_per_second(level, TOKENS)
    ttft = row.ttft_s.median if row.ttft_s else None
    itl = row.inter_token_latency_s.median if row.inter_token_latency_s else None
    # What the server actually did: its first tokens left this much after 50 ms.
    actual_ttft = TRUTH.ttft_s + (server_late_ms or 0.0) / 1000
    fixed = result.per_call_fixed_cost_seconds
    return {
        "wall_s": wall,
        "server_first_token_late_ms": server_late_ms,
        "arrival_clock": after.get("arrival_clock"),
        "complete": result.complete,
        "decode_tokens_per_second": result.decode_tokens_per_second,
        "decode_error": _error(result.decode_tokens_per_second, 1 / TRUTH.itl_s),
        "per_call_fixed_cost_s": fixed,
        "per_call_fixed_cost_error": _error(fixed, TRUTH.ttft_s),
        "ttft_median_ms": result.ttft_median_ms,
        "ttft_overall_error": _error(result.ttft_median_ms, TRUTH.ttft_s * 1000),
        "itl_median_ms": result.inter_token_latency_median_ms,
        "itl_overall_error": _error(result.inter_token_latency_median_ms, TRUTH.itl_s * 1000),
        "tokens_per_second": row.tokens_per_second,
        "truth_tokens_per_second": truth,
        "tokens_per_second_error": _error(row.tokens_per_second, truth),
        "ttft_median_s": ttft,
        "ttft_error": _error(ttft, TRUTH.ttft_s),
        "client_ttft_error": _error(ttft, actual_ttft),
        "itl_median_s": itl,
        "itl_error": _error(itl, TRUTH.itl_s),
        "workers": row.client.workers if row.client else None,
        "client_cpu_s": row.client.client_cpu_s if row.client else None,
        "loop_lag_p99_s": row.client.loop_lag_p99_s if row.client else None,
        "complete_batches": len(row.complete_batches),
        "problem": row.problem,
    }


def _load(url: str, concurrency: int) -> dict[str, Any]:
    settings = LoadSettings(
        target=url, max_tokens=TOKENS, concurrency=concurrency, duration_s=LOAD_SECONDS
    )
    result = run_once(settings, started=time.perf_counter())
    truth = TRUTH.tokens_per_second(concurrency, TOKENS)
    return {
        "tokens_per_second": result.output_tokens_per_second,
        "tokens_per_second_error": _error(result.output_tokens_per_second, truth),
        "ttft_error": _error(result.ttft_s.median, TRUTH.ttft_s),
        "itl_error": _error(result.itl_s.median, TRUTH.itl_s),
        "valid": result.valid,
    }


def run() -> dict[str, Any]:
    measured: dict[str, Any] = {}
    loads: dict[str, Any] = {}
    with running_truth_server(TRUTH) as url:
        for level in LEVELS:
            measured[str(level)] = _measure(url, level)
            loads[str(level)] = _load(url, level)
    return {"target_error": 0.02, "truth": {"ttft_s": 0.05, "itl_s": 0.004}, "measure": measured,
            "load": loads}  # fmt: skip


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.2f}%"


def to_markdown(result: dict[str, Any]) -> str:
    measured = result["measure"]
    first = measured[str(LEVELS[0])]
    walls = [run["wall_s"] for run in measured.values()]
    late = [run["server_first_token_late_ms"] or 0.0 for run in measured.values()]
    lines = [
        "# `measure` against the known-truth server, beside `load`",
        "",
        "Truth: first token at 50 ms after the request arrived, then one every 4 ms; 256-token "
        "replies. One `measure` run per level: decode (16/256 tokens × 5) and two batches of N "
        "at once, through the load generator's worker processes; then `load`, a "
        f"{LOAD_SECONDS:g} s closed loop at the same concurrency. Target: within "
        f"{result['target_error']:.0%} of the truth.",
        "",
        f"Decode rate (first run) {first['decode_tokens_per_second']} tok/s "
        f"({_pct(first['decode_error'])}); per-call fixed cost "
        f"{first['per_call_fixed_cost_s']} s ({_pct(first['per_call_fixed_cost_error'])}); "
        f"TTFT median {first['ttft_median_ms']} ms ({_pct(first['ttft_overall_error'])}); "
        f"inter-token median {first['itl_median_ms']} ms ({_pct(first['itl_overall_error'])}); "
        f"each `measure` run took {min(walls):.1f}–{max(walls):.1f} s.",
        "",
        "The server counts its deadlines from the kernel's receive stamp "
        f"(arrival clock: {first['arrival_clock']}) and reports how late it wrote every first "
        f"token: {min(late):.3f}–{max(late):.3f} ms on average per run here. A batch's first "
        "tokens all fall due together and one core writes them one after another, so part of a "
        'TTFT error is the server\'s. "TTFT error" is against the nominal 50 ms; "client\'s '
        "TTFT error\" against 50 ms plus that run's server lateness, the client's own share.",
        "",
        "| at once | truth tok/s | measure tok/s | error | TTFT error | server late ms "
        "| client's TTFT error | ITL error | workers | loop lag p99 ms | load tok/s | load error "
        "| load TTFT error | load ITL error |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: |",
    ]
    for level, row in measured.items():
        load = result["load"][level]
        lag = row["loop_lag_p99_s"]
        figure = row["tokens_per_second"]
        server_late = row["server_first_token_late_ms"]
        lines.append(
            f"| {level} | {row['truth_tokens_per_second']:,.1f} | "
            f"{'-' if figure is None else f'{figure:,.1f}'} | "
            f"{_pct(row['tokens_per_second_error'])} | {_pct(row['ttft_error'])} | "
            f"{'-' if server_late is None else f'{server_late:.3f}'} | "
            f"{_pct(row['client_ttft_error'])} | {_pct(row['itl_error'])} | {row['workers']} | "
            f"{'-' if lag is None else f'{lag * 1000:.2f}'} | "
            f"{load['tokens_per_second']:,.1f} | {_pct(load['tokens_per_second_error'])} | "
            f"{_pct(load['ttft_error'])} | {_pct(load['itl_error'])} |"
        )
    return "\n".join(lines) + "\n"
