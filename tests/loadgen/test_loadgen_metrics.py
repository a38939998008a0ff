"""Figures and rules from constructed records: each definition, and each self-awareness rule."""

from __future__ import annotations

import dataclasses

import pytest

from sagemeter.evidence.distribution import Distribution, distribution, percentile
from sagemeter.loadgen.health import (
    CLOSED_GAP_SHARE_MAX,
    CONCURRENCY_SHARE_MIN,
    SEND_LAG_P99_LIMIT_S,
    Evidence,
    assess,
)
from sagemeter.loadgen.metrics import steady_window, summarize
from sagemeter.loadgen.result import LevelSummary, Window
from sagemeter.loadgen.sweep import knee_after, sweep_levels
from sagemeter.request_record import RequestRecord
from sagemeter.transport.health import LOOP_LAG_P99_LIMIT_S, WORKER_CPU_SHARE_MAX

TTFT_US, ITL_US, TOKENS = 50_000, 4_000, 10
# One request: first event at TTFT, event k at TTFT + (k-1)·ITL, end at TTFT + TOKENS·ITL.
REQUEST_US = TTFT_US + TOKENS * ITL_US


def request(
    stream: int,
    index: int,
    send_us: int,
    *,
    events: int = TOKENS,
    usage: int | None = TOKENS,
    **extra: object,
) -> RequestRecord:
    arrivals = [send_us + TTFT_US + k * ITL_US for k in range(events)]
    record = RequestRecord(
        stream=stream,
        index=index,
        scheduled_us=None,
        send_us=send_us,
        end_us=send_us + REQUEST_US,
        arrivals_us=arrivals,
        usage_tokens=usage,
        engine_tokens=None,
        finish_reason="length",
        done=True,
        error=None,
    )
    return dataclasses.replace(record, **extra)  # type: ignore[arg-type]


def closed_loop(
    streams: int, per_stream: int, gap_us: int = 100, stagger_us: int = 0
) -> list[RequestRecord]:
    records = []
    for stream in range(streams):
        send = stream * stagger_us
        for index in range(per_stream):
            records.append(request(stream, index, send))
            send += REQUEST_US + gap_us
    return records


def test_percentiles_interpolate_like_numpy() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([0.0, 10.0], 90) == 9.0
    spread = distribution([3.0, 1.0, 2.0])
    assert (spread.n, spread.median, spread.min, spread.max, spread.mean) == (3, 2.0, 1.0, 3.0, 2.0)
    assert distribution([]).n == 0 and distribution([]).median is None


def test_ttft_tpot_itl_decode_and_tokens_by_definition() -> None:
    figures = summarize(closed_loop(streams=2, per_stream=4), "closed", max_tokens=TOKENS)
    assert figures.ttft_s.median == pytest.approx(0.050)  # send → first event, no ITL in it
    assert figures.tpot_s.median == pytest.approx(0.004)  # first token excluded: /(tokens−1)
    assert figures.itl_s.median == pytest.approx(0.004)
    assert figures.itl_s.n == figures.window.requests_counted * (TOKENS - 1)
    assert figures.decode_tokens_per_second.median == pytest.approx(250.0)
    assert figures.output_tokens == 8 * TOKENS
    assert figures.requests_completed == 8 and figures.notes == []
    assert figures.send_lag_s.median == pytest.approx(100e-6)


def test_closed_loop_window_runs_from_last_first_end_to_first_last_end() -> None:
    records = closed_loop(streams=3, per_stream=5, gap_us=0, stagger_us=1_000)
    start, end, _, steady = steady_window(records, "closed")
    assert steady
    assert start == 2_000 + REQUEST_US  # stream 2's first request ended last
    assert end == 5 * REQUEST_US  # stream 0's last request ended first
    figures = summarize(records, "closed", max_tokens=TOKENS)
    # In step with no gap, each stream has TOKENS tokens per REQUEST_US: exact over whole cycles.
    assert figures.output_tokens_per_second == pytest.approx(
        3 * TOKENS / (REQUEST_US * 1e-6), rel=0.02
    )
    assert figures.achieved_concurrency == pytest.approx(3.0)


def test_achieved_concurrency_counts_time_in_flight() -> None:
    records = closed_loop(streams=4, per_stream=6, gap_us=REQUEST_US)  # idle half the time
    assert summarize(records, "closed", TOKENS).achieved_concurrency == pytest.approx(2.0, rel=0.05)


def test_no_steady_window_with_one_request_per_stream() -> None:
    figures = summarize(closed_loop(streams=2, per_stream=1, stagger_us=5_000), "closed", TOKENS)
    assert not figures.window.steady


def test_usage_against_events_against_engine_is_cross_checked() -> None:
    records = closed_loop(streams=1, per_stream=4)
    records[1] = dataclasses.replace(records[1], usage_tokens=TOKENS + 2)  # two tokens unseen
    records[2] = dataclasses.replace(records[2], engine_tokens=TOKENS - 1)
    records[3] = dataclasses.replace(records[3], usage_tokens=None)
    figures = summarize(records, "closed", TOKENS)
    assert figures.tokens.usage_vs_events_mismatch == 1
    assert figures.tokens.engine_vs_usage_mismatch == 1
    assert figures.tokens.usage_missing == 1
    assert figures.output_tokens == 4 * TOKENS + 2  # usage wins; events count where it is absent
    text = " | ".join(figures.notes)
    assert "1 of 4 replies: usage and content events disagree by +2 tokens" in text
    assert "timings.predicted_n" in text
    assert "no usage" in text


def test_short_replies_and_failures_are_noted() -> None:
    records = closed_loop(streams=1, per_stream=3)
    records[0] = dataclasses.replace(records[0], usage_tokens=4, finish_reason="stop")
    records.append(dataclasses.replace(request(0, 3, records[-1].end_us), error="HTTP 500: boom"))
    figures = summarize(records, "closed", TOKENS)
    assert figures.requests_failed == 1 and figures.requests_completed == 3
    assert figures.notes[0].startswith("1 request failed; 1× HTTP 500: boom")
    assert any("ignore_eos" in note for note in figures.notes)


def test_poisson_send_lag_and_goodput() -> None:
    records = []
    for index in range(20):
        scheduled = index * 30_000
        late = 2_000 if index % 4 == 0 else 0
        ttft_extra = 100_000 if index % 5 == 0 else 0
        record = request(-1, index, scheduled + late, scheduled_us=scheduled)
        record.arrivals_us = [t + ttft_extra for t in record.arrivals_us]
        records.append(record)
    figures = summarize(records, "poisson", TOKENS, slo_ttft_s=0.1, slo_tpot_s=0.005)
    assert figures.send_lag_kind == "late against schedule"
    assert figures.send_lag_s.n == 20 and figures.send_lag_s.max == pytest.approx(0.002)
    good = figures.goodput
    assert good is not None
    counted = [
        r
        for r in records
        if figures.window.start_s * 1e6 <= r.send_us <= figures.window.end_s * 1e6
    ]
    slow = sum(1 for r in counted if r.index % 5 == 0)
    assert good.requests_counted == len(counted)
    assert good.requests_meeting == len(counted) - slow
    assert good.share == pytest.approx((len(counted) - slow) / len(counted))


def evidence(**changes: object) -> Evidence:
    base = Evidence(
        mode="closed",
        asked_concurrency=16,
        achieved_concurrency=15.9,
        loop_lag_s=Distribution(n=100, p99=0.001),
        send_lag_s=Distribution(n=100, mean=0.0001, p99=0.0002),
        mean_request_s=1.0,
        worker_cpu_shares=[0.3, 0.3],
        client_cpu_share_of_cores=0.3,
        start_late_s=[0.0, 0.001],
        window=Window(start_s=1, end_s=9, rule="r", steady=True, requests_counted=100),
        requests_completed=120,
        notes=["a note"],
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_healthy_run_is_valid_and_keeps_its_notes() -> None:
    invalid, problems = assess(evidence())
    assert invalid == [] and problems == ["a note"]


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"loop_lag_s": Distribution(n=9, p99=LOOP_LAG_P99_LIMIT_S * 1.5)}, "LOOP_LAG_P99_LIMIT_S"),
        ({"achieved_concurrency": 16 * CONCURRENCY_SHARE_MIN - 0.1}, "CONCURRENCY_SHARE_MIN"),
        ({"worker_cpu_shares": [0.2, WORKER_CPU_SHARE_MAX + 0.05]}, "worker 1 used"),
        ({"client_cpu_share_of_cores": 0.95}, "CLIENT_CPU_SHARE_MAX"),
        (
            {"send_lag_s": Distribution(n=9, mean=CLOSED_GAP_SHARE_MAX * 2, p99=0.03)},
            "CLOSED_GAP_SHARE_MAX",
        ),
        (
            {
                "mode": "poisson",
                "asked_concurrency": None,
                "send_lag_s": Distribution(n=9, p99=SEND_LAG_P99_LIMIT_S * 2),
            },
            "SEND_LAG_P99_LIMIT_S",
        ),
        (
            {"window": Window(start_s=0, end_s=1, rule="whole", steady=False, requests_counted=2)},
            "no steady window",
        ),
        ({"requests_completed": 0}, "no request completed"),
    ],
)
def test_each_rule_marks_the_run_invalid_with_its_reason(
    changes: dict[str, object], needle: str
) -> None:
    invalid, problems = assess(evidence(**changes))
    assert len(invalid) == 1 and needle in invalid[0]
    assert problems[0] == invalid[0] and problems[-1] == "a note"


def test_poisson_runs_are_not_judged_by_asked_concurrency() -> None:
    invalid, _ = assess(evidence(mode="poisson", asked_concurrency=None, achieved_concurrency=1.0))
    assert invalid == []


def test_a_late_worker_start_is_a_note_only() -> None:
    invalid, problems = assess(evidence(start_late_s=[0.2]))
    assert invalid == [] and "started 200 ms after" in problems[-1]


def level(
    concurrency: int, tps: float, rise: float | None, share: float | None = None, valid: bool = True
) -> LevelSummary:
    return LevelSummary(
        concurrency=concurrency,
        output_tokens_per_second=tps,
        rise_per_doubling=rise,
        ttft_median_s=0.05,
        tpot_median_s=0.004,
        goodput_share=share,
        valid=valid,
    )


def test_sweep_levels_and_knee_rules() -> None:
    assert sweep_levels(1) == [1]
    assert sweep_levels(16) == [1, 2, 4, 8, 16]
    assert sweep_levels(48) == [1, 2, 4, 8, 16, 32, 48]
    rising = [level(1, 100, None), level(2, 195, 0.95)]
    assert knee_after(rising) is None
    flat = knee_after([*rising, level(4, 205, 0.05)])
    assert flat is not None and flat.concurrency == 2 and "per doubling" in flat.reason
    slo = knee_after([*rising, level(4, 390, 1.0, share=0.5)])
    assert slo is not None and slo.concurrency == 2 and "SLO broke" in slo.reason
    client = knee_after([*rising, level(4, 300, 0.5, valid=False)], ["loop lag"])
    assert client is not None and client.concurrency is None and "loop lag" in client.reason
