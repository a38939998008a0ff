"""What a load report draws, computed from a `sagemeter load` result: pure functions, no plotting.

Latency samples come from the raw records (`--raw`) by the same definitions and the same steady
window the result's own figures use (so a CDF's median is the result's median); a result without
raw records has only its percentiles, and the report says which it drew.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from sagemeter.evidence.distribution import Distribution
from sagemeter.loadgen.build import record_from_raw
from sagemeter.loadgen.result import LoadResult
from sagemeter.request_record import RequestRecord

US = 1e-6
METRICS = ("ttft", "tpot", "itl", "e2e")
METRIC_NAMES = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2e": "end-to-end",
}


@dataclass(frozen=True)
class LoadRun:
    """One run as the report shows it: a file's result, or one level of its sweep."""

    label: str
    result: LoadResult
    path: Path


@dataclass(frozen=True)
class ThroughputPoint:
    """One load tried (a run, a sweep level or a search probe) and what it served there."""

    source: str
    load_kind: str  # "concurrency" or "rate"
    load: float
    output_tokens_per_second: float
    ttft: float | None
    tpot: float | None
    ttft_label: str
    goodput_share: float | None
    valid: bool
    passed: bool | None = None  # a search probe: did every SLO hold
    note: str = ""


@dataclass
class Latencies:
    """Latency samples (seconds) of one run, or None per metric when they cannot be had."""

    from_raw: bool
    samples: dict[str, list[float]] = field(default_factory=dict)


def latency_runs(runs: list[LoadRun]) -> list[LoadRun]:
    """The runs whose latencies are shown: a sweep's every level when it kept their records
    (`--sweep --raw`), each labelled with its level, else the file's run itself."""
    shown: list[LoadRun] = []
    for run in runs:
        levels = run.result.levels or []
        if levels and all(level.raw is not None for level in levels):
            prefix = f"{run.label} " if len(runs) > 1 else ""
            shown += [
                LoadRun(f"{prefix}c={level.asked_concurrency}", level, run.path) for level in levels
            ]
        else:
            shown.append(run)
    return shown


def records(result: LoadResult) -> list[RequestRecord]:
    """The run's requests on its own timeline (µs since start); empty without `--raw`."""
    if result.raw is None:
        return []
    return [record_from_raw(raw) for raw in result.raw.records]


def counted(result: LoadResult) -> list[RequestRecord]:
    """The successful requests sent inside the steady window: those the figures are over."""
    start_us = round(result.window.start_s / US)
    end_us = round(result.window.end_s / US)
    return [r for r in records(result) if r.ok and start_us <= r.send_us <= end_us]


def latencies(result: LoadResult) -> Latencies:
    """TTFT, TPOT, ITL and end-to-end samples from the raw records (the window's requests)."""
    if result.raw is None:
        return Latencies(from_raw=False)
    chosen = counted(result)
    samples: dict[str, list[float]] = {name: [] for name in METRICS}
    for record in chosen:
        arrivals = record.arrivals_us
        samples["ttft"].append((arrivals[0] - record.send_us) * US)
        if record.tokens >= 2:
            samples["tpot"].append((arrivals[-1] - arrivals[0]) * US / (record.tokens - 1))
        samples["itl"].extend((b - a) * US for a, b in itertools.pairwise(arrivals))
        samples["e2e"].append((record.end_us - record.send_us) * US)
    return Latencies(from_raw=True, samples={k: sorted(v) for k, v in samples.items()})


def carried(result: LoadResult, metric: str) -> Distribution | None:
    """The distribution the result file carries for `metric` (none for end-to-end)."""
    return {"ttft": result.ttft_s, "tpot": result.tpot_s, "itl": result.itl_s}.get(metric)


def _load_of(result: LoadResult) -> tuple[str, float]:
    if result.asked_rate is not None:
        return "rate", result.asked_rate
    return "concurrency", float(result.asked_concurrency or result.settings.concurrency)


def throughput_points(run: LoadRun) -> list[ThroughputPoint]:
    """Every load a file tried: its sweep's levels, its search's probes, or the one run."""
    result = run.result
    search = result.slo_search
    if search is not None:
        pct = f"p{search.percentile:g}"
        return [
            ThroughputPoint(
                source=run.label,
                load_kind=search.search,
                load=float((probe.rate if search.search == "rate" else probe.concurrency) or 0),
                output_tokens_per_second=probe.output_tokens_per_second,
                ttft=probe.ttft_s,
                tpot=probe.tpot_s,
                ttft_label=pct,
                goodput_share=probe.goodput_share,
                valid=probe.valid,
                passed=probe.passed,
                note=probe.why,
            )
            for probe in search.probes
        ]
    levels = result.levels or [result]
    points = []
    for level in levels:
        kind, load = _load_of(level)
        chosen = result.knee is not None and level.asked_concurrency == result.knee.concurrency
        points.append(
            ThroughputPoint(
                source=run.label,
                load_kind=kind,
                load=load,
                output_tokens_per_second=level.output_tokens_per_second,
                ttft=level.ttft_s.median,
                tpot=level.tpot_s.median,
                ttft_label="median",
                goodput_share=level.goodput.share if level.goodput else None,
                valid=level.valid,
                note="the knee" if chosen else "",
            )
        )
    return points


@dataclass(frozen=True)
class Timeline:
    """Requests in flight over the run (a step function) and completions per time bin."""

    times_s: list[float]
    in_flight: list[int]
    bin_s: float
    bin_starts_s: list[float]
    completions: list[int]
    failures: list[int]
    window: tuple[float, float]

    @property
    def peak_in_flight(self) -> int:
        return max(self.in_flight, default=0)


def timeline(result: LoadResult, bins: int = 40) -> Timeline | None:
    """From the raw records: in flight at every send and end, ends counted per bin."""
    every = records(result)
    if not every:
        return None
    events = sorted(
        [(r.send_us, 1) for r in every] + [(r.end_us, -1) for r in every],
        key=lambda event: (event[0], event[1]),  # an end before a send at the same µs
    )
    times, flying, now = [0.0], [0], 0
    for at_us, step in events:
        now += step
        times.append(at_us * US)
        flying.append(now)
    last_s = max(r.end_us for r in every) * US
    bin_s = max(last_s / bins, 1e-3)
    count = int(last_s / bin_s) + 1
    completions, failures = [0] * count, [0] * count
    for record in every:
        slot = min(int(record.end_us * US / bin_s), count - 1)
        (completions if record.ok else failures)[slot] += 1
    return Timeline(
        times_s=times,
        in_flight=flying,
        bin_s=bin_s,
        bin_starts_s=[i * bin_s for i in range(count)],
        completions=completions,
        failures=failures,
        window=(result.window.start_s, result.window.end_s),
    )
