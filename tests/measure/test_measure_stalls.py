"""A server that stalls: the stalled batch or reply is measured again, never the figure.

The truth server answers in 50 ms, then 10 ms per token; with 4-token parallel replies a batch
of N makes N × 4 / 0.09 s tokens/s, so 4 at once is 4 × the 1-at-once figure. One request that
pauses 1 s (the client waits up to 5 s before it cuts a silent stream) makes its batch about 10
times slower: kept as a figure it would read 4 at once below 1 at once.

Generation requests reach the server in a known order: two for the preflight, the decode warm-up,
then short and long replies in turn, then the levels' batches; `_first_four_at_once` counts them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.measure.load import measure_load
from sagemeter.measure.workflow import measure_target
from sagemeter.results import LoadDetail, MeasureResult
from sagemeter.settings import MeasureSettings
from sagemeter.targets import parse_target
from sagemeter.transport.openai import OpenAIChat
from tests.busy_host import batch_reasons, counted_batches

# Seconds of timing against the truth server each: the full suite, not the fast tier. Each
# holds a level of 4-token replies (90 ms a batch) to the truth within 10%, a few milliseconds:
# the CPU to itself (on the slow tier's two workers, a busy neighbour read 39 tokens/s for 44).
pytestmark = [pytest.mark.slow, pytest.mark.alone]

TRUTH = TruthTiming(ttft_s=0.05, itl_s=0.01)
LOAD_TOKENS = 4
STALL_S = 1.0
PREFLIGHT = 2


def _settings(batches: int) -> MeasureSettings:
    return MeasureSettings(
        short_tokens=4,
        long_tokens=24,
        decode_repeats=2,
        decode_warmup=1,
        prefill_tokens=[],  # the prefill phase has tests of its own (test_measure_prefill.py)
        load_levels=[1, 4],
        load_max_tokens=LOAD_TOKENS,
        load_batches=batches,
        questions_per_family=1,
        quality_max_tokens=4,
        timeout_s=5.0,
        stall_s=5.0,
        retries=1,
        batch_reruns=1,
    )


def _first_four_at_once(settings: MeasureSettings) -> int:
    """The number of the first request of the first 4-at-once batch, as the server counts."""
    return (
        PREFLIGHT + settings.decode_warmup + 2 * settings.decode_repeats + settings.load_batches + 1
    )


def _measure(url: str, out: Path, settings: MeasureSettings) -> MeasureResult:
    result, _path = asyncio.run(
        measure_target(parse_target(url), name="stall", settings=settings, out_dir=out)
    )
    return result


@pytest.mark.parametrize("batches", [1, 2])
def test_a_one_time_stall_in_a_batch_is_run_again_and_the_figure_is_the_truth(
    tmp_path: Path, batches: int
) -> None:
    """One batch (the quick setting): 4 at once reads far below 1 at once, so the level runs
    again. Two batches: the stalled one disagrees with its twin and is run again."""
    settings = _settings(batches)
    faults = Faults(stall_once=_first_four_at_once(settings) + 1, stall_s=STALL_S)
    with running_truth_server(TRUTH, faults=faults) as url:
        result = _measure(url, tmp_path, settings)
    one, four = (result.load_tokens_per_second[key] for key in ("1", "4"))
    assert one == pytest.approx(TRUTH.tokens_per_second(1, LOAD_TOKENS), rel=0.1)
    assert four == pytest.approx(TRUTH.tokens_per_second(4, LOAD_TOKENS), rel=0.1)
    assert result.complete is True, result.incomplete_because
    assert result.detail is not None and result.detail.load is not None
    level = result.detail.load.levels[1]
    aside = [batch for batch in level.batches if not batch.complete]
    assert len(aside) == 1 and aside[0].wall_s > STALL_S and aside[0].reason is not None
    if aside[0].reason.startswith("set aside: "):
        assert level.measured_again and "a stall?" in level.measured_again[0]
        warned = [w for w in result.detail.warnings if w.startswith("4 at once: ")]
        assert warned and "a stall?" in warned[0]
    else:  # on a loaded host the worker may judge the stalled batch itself: run again as well
        assert aside[0].reason.startswith("the client may have set the pace"), aside[0].reason
    assert not result.detail.load.levels[0].measured_again


def test_one_at_once_far_below_the_decode_rate_is_run_again(tmp_path: Path) -> None:
    """The only 1-at-once batch stalls: 3.7 tokens/s against the 44 the decode rate (100/s) and
    its 50 ms per call predict, so the level runs again and reads the truth."""
    settings = _settings(1)
    stalled = _first_four_at_once(settings) - 1  # the 1-at-once batch, just before
    with running_truth_server(TRUTH, faults=Faults(stall_once=stalled, stall_s=STALL_S)) as url:
        result = _measure(url, tmp_path, settings)
    assert result.load_tokens_per_second["1"] == pytest.approx(
        TRUTH.tokens_per_second(1, LOAD_TOKENS), rel=0.1
    )
    assert result.complete is True, result.incomplete_because
    assert result.detail is not None and result.detail.load is not None
    level = result.detail.load.levels[0]
    assert counted_batches(level) == [False, True], batch_reasons(level)
    assert level.measured_again and "the decode rate predicts" in level.measured_again[0]


def test_one_at_once_far_below_a_larger_levels_per_stream_rate_is_run_again() -> None:
    """With no decode rate to vouch for it (a decode phase that stalled, or none), 1 at once is
    judged by the levels above it: its one stalled batch (the server's first generation) made
    far less than 4 at once makes per stream, so it runs again after them and reads the truth;
    4 at once is left as measured."""

    async def levels(url: str) -> LoadDetail:
        async with OpenAIChat(url) as client:
            return await measure_load(
                client, levels=[1, 4], max_tokens=LOAD_TOKENS, batches=1, reruns=1
            )

    with running_truth_server(TRUTH, faults=Faults(stall_once=1, stall_s=STALL_S)) as url:
        detail = asyncio.run(levels(url))
    one, four = detail.levels
    assert one.tokens_per_second == pytest.approx(TRUTH.tokens_per_second(1, LOAD_TOKENS), rel=0.1)
    assert four.tokens_per_second == pytest.approx(TRUTH.tokens_per_second(4, LOAD_TOKENS), rel=0.1)
    assert counted_batches(one) == [False, True], batch_reasons(one)
    assert one.measured_again and "that 4 at once" in one.measured_again[0]
    assert "a stall?" in one.measured_again[0] and not four.measured_again


def test_a_one_time_stall_in_a_decode_reply_is_asked_again(tmp_path: Path) -> None:
    """The first long reply (request 5) pauses: it is set aside, one more is asked, and the rate
    is the truth's 100 tokens/s."""
    with running_truth_server(TRUTH, faults=Faults(stall_once=5, stall_s=STALL_S)) as url:
        result = _measure(url, tmp_path, _settings(1))
    assert result.decode_tokens_per_second == pytest.approx(1 / TRUTH.itl_s, rel=0.05)
    assert result.complete is True, result.incomplete_because
    decode = result.detail.decode if result.detail else None
    assert decode is not None and len(decode.long_times_s) == 2
    assert max(decode.long_times_s) < STALL_S
    assert decode.measured_again and decode.measured_again[0].startswith("1 long replies took")
    assert len([r for r in decode.records if r.max_tokens == 24]) == 3


def test_a_stall_in_every_batch_of_4_leaves_no_figure(tmp_path: Path) -> None:
    """Every 4th request stalls 0.6 s, so every batch of 4 holds one: with 2-token replies, 4 at
    once (about 12 tokens/s against 29 at 1 at once) stays far under 1 at once after its rerun.
    The figure is null with its reason and the result incomplete, which `sagemeter measure` turns
    into exit 3 (tests/measure/test_measure_truth.py). The decode phase's stalled short replies
    (requests 4 and 8) are asked again and its rate stands."""
    settings = _settings(1).model_copy(update={"load_max_tokens": 2, "batch_reruns": 0})
    with running_truth_server(TRUTH, faults=Faults(stall_every=4, stall_s=0.6)) as url:
        result = _measure(url, tmp_path, settings)
    assert result.complete is False
    assert result.load_tokens_per_second["4"] is None
    assert result.load_tokens_per_second["1"] == pytest.approx(
        TRUTH.tokens_per_second(1, 2), rel=0.1
    )
    reason = next(m for m in result.incomplete_because if m.startswith("4 at once"))
    assert "run again, it stayed" in reason and "under half of 1 at once" in reason
    assert result.decode_tokens_per_second == pytest.approx(1 / TRUTH.itl_s, rel=0.05)
    assert result.detail is not None and result.detail.decode is not None
    assert len(result.detail.decode.measured_again) == 2


def test_a_timed_out_request_fails_its_batch_and_is_counted(tmp_path: Path) -> None:
    """One request of the first 4-at-once batch pauses past the 0.5 s timeout: it is a failure
    of its batch (never a figure, not sent again), the batch runs again, the level's figure is
    the truth's, and the summary counts the failure as a timeout."""
    settings = _settings(1).model_copy(update={"timeout_s": 0.5})
    stalled = _first_four_at_once(settings) + 1
    with running_truth_server(TRUTH, faults=Faults(stall_once=stalled, stall_s=STALL_S)) as url:
        result = _measure(url, tmp_path, settings)
    assert result.detail is not None and result.detail.load is not None
    level = result.detail.load.levels[1]
    failed = [batch for batch in level.batches if batch.failed]
    assert len(failed) == 1 and failed[0].complete is False
    assert failed[0].reason is not None and "timeout: no complete response" in failed[0].reason
    assert result.load_tokens_per_second["4"] == pytest.approx(
        TRUTH.tokens_per_second(4, LOAD_TOKENS), rel=0.1
    )
    assert result.detail.failed_requests == result.detail.timed_out_requests == 1
    assert result.detail.retries == 0
    assert (
        "1 requests failed: 1 timed out (a timeout is not sent again)"
        in (result.detail.warnings)[-1]
    )
