"""A client that could not keep up leaves no figure: decode and a parallel batch alike.

The records and the client's own share are given (not timed), so the rule is exercised exactly
at and past its threshold.
"""

from __future__ import annotations

import pytest

from sagemeter.measure.decode import fit_decode
from sagemeter.measure.load import summarise_batch
from sagemeter.measure.workflow import assemble_result
from sagemeter.results import (
    ClientShare,
    DecodeDetail,
    Environment,
    LoadDetail,
    MeasureResult,
    QualityDetail,
)
from sagemeter.settings import MeasureSettings
from sagemeter.transport.chat import BatchRun
from sagemeter.transport.health import WORKER_CPU_SHARE_MAX, client_limits
from tests.records import timed_record

PACE = "the client may have set the pace"


def _decode(loop_share: float) -> DecodeDetail:
    """Five good pairs at exactly 100 tokens/s, timed by a loop busy `loop_share` of the time."""
    short = [timed_record(16, 0.5 + 0.16) for _ in range(5)]
    long = [timed_record(512, 0.5 + 5.12) for _ in range(5)]
    wall = sum(r.total_s for r in (*short, *long))
    client = ClientShare(
        calls=10,
        client_cpu_s=loop_share * wall,
        loop_cpu_s=loop_share * wall,
        timed_wall_s=wall,
        cpu_per_call_ms=loop_share * wall / 10 * 1000.0,
        share=loop_share,
        loop_share=loop_share,
    )
    return fit_decode(short, long, short_tokens=16, long_tokens=512, repeats=5, client=client)


def _result(loop_share: float) -> MeasureResult:
    settings = MeasureSettings(load_levels=[1], fidelity_prompts=0)
    environment = Environment(
        target="http://127.0.0.1:1", backend="http", sagemeter_version="0", started_utc="now"
    )
    quality = QualityDetail.from_items(
        [],
        question_set="none",
        question_set_sha256="0",
        max_tokens=16,
        temperature=0.0,
        seed=0,
        scoring="strict",
    )
    load = LoadDetail(max_tokens=16, batches_per_level=1, levels=[])
    return assemble_result("x", settings, environment, None, _decode(loop_share), load, quality)


def test_a_saturated_client_leaves_no_decode_rate_and_the_result_says_why() -> None:
    decode = _decode(0.95)
    assert not decode.valid
    assert decode.tokens_per_second is None and decode.per_call_fixed_cost_s is None
    assert decode.tokens_per_second_ci95 is None and decode.least_squares_tokens_per_second is None
    assert decode.problems[0] == (
        f"no decode rate: {PACE}: its event loop was busy 95% of the wall time it timed "
        "(> 90%, WORKER_CPU_SHARE_MAX)"
    )
    assert decode.client is not None and decode.client.loop_share == 0.95
    result = _result(0.95)
    assert result.decode_tokens_per_second is None
    assert result.complete is False
    assert result.incomplete_because == [f"decode rate: {decode.problems[0]}"]
    assert "decode_tokens_per_second" not in result.intervals


@pytest.mark.parametrize("loop_share", [0.6, WORKER_CPU_SHARE_MAX])
def test_a_busy_client_that_kept_up_keeps_its_rate_with_a_warning(loop_share: float) -> None:
    result = _result(loop_share)
    assert result.decode_tokens_per_second == pytest.approx(100.0)
    assert result.complete is True
    assert result.detail is not None
    assert [w for w in result.detail.warnings if "event loop" in w] == [
        f"decode: the client's event loop was busy {loop_share:.0%} of the wall time it timed; "
        "its own overhead may be part of the figure"
    ]


def test_a_parallel_batch_whose_client_fell_behind_does_not_count() -> None:
    records = [timed_record(64, 1.0) for _ in range(4)]
    limits = client_limits(0.050, [0.95], 0.40)  # loop 50 ms late at p99, a worker saturated
    batch = summarise_batch(
        4, BatchRun(records=records, workers=1, client_cpu_s=0.95, limits=limits)
    )
    assert not batch.complete
    assert batch.reason == f"{PACE}: {limits[0]}"
    assert batch.reason.startswith(f"{PACE}: client event-loop lag p99 50.0 ms > 10 ms")
    assert batch.output_tokens == 256  # the batch is kept, only its figure does not count
    kept_up = summarise_batch(4, BatchRun(records=records, workers=1, client_cpu_s=0.2))
    assert kept_up.complete and kept_up.reason is None
