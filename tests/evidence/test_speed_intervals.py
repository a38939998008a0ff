"""Bootstrap intervals on speed figures and ratios; drift flags in A-B-A comparisons."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sagemeter.compare import combine
from sagemeter.evidence.bootstrap import interval, ratio_interval, samples_of
from sagemeter.evidence.distribution import spread
from sagemeter.measure.decode import fit_decode
from sagemeter.measure.figure_samples import decode_samples, level_samples, speed_summaries
from sagemeter.request_record import RequestRecord
from sagemeter.results import (
    Detail,
    Environment,
    LoadBatch,
    LoadDetail,
    LoadLevel,
    MeasureResult,
    save_result,
)
from tests.records import timed_record


def _record(tokens: int, seconds: float) -> RequestRecord:
    return timed_record(tokens, seconds)


def _decode(rate: float, rng: np.random.Generator, repeats: int = 5, noise: float = 0.01):  # type: ignore[no-untyped-def]
    """Records of a server that decodes at `rate` after a 0.3 s fixed cost, with timing noise."""
    short = [_record(16, 0.3 + 16 / rate + rng.normal(0, noise)) for _ in range(repeats)]
    long = [_record(512, 0.3 + 512 / rate + rng.normal(0, noise)) for _ in range(repeats)]
    return fit_decode(short, long, short_tokens=16, long_tokens=512)


def test_a_constant_sample_has_a_point_interval() -> None:
    found = interval(samples_of([2.5, 2.5, 2.5, 2.5]))
    assert found is not None and found.low == found.high == 2.5


def test_no_interval_from_a_single_repeat() -> None:
    assert interval(samples_of([3.0])) is None
    assert spread([3.0]) is not None and spread([3.0]).median_ci95 is None  # type: ignore[union-attr]


def test_the_same_data_gives_the_same_interval_every_time() -> None:
    values = [1.0, 2.0, 3.5, 4.0, 7.0]
    assert interval(samples_of(values)) == interval(samples_of(values))


def test_median_interval_covers_the_true_median_about_95_percent_of_the_time() -> None:
    """Coverage by simulation: 20 normal repeats, 300 experiments."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(300):
        found = interval(samples_of(list(rng.normal(10.0, 1.0, size=20))), resamples=1000)
        assert found is not None and found.low is not None and found.high is not None
        covered += found.low <= 10.0 <= found.high
    assert 0.88 <= covered / 300 <= 0.99


def test_decode_rate_interval_holds_the_true_rate_and_the_repeats_spread() -> None:
    detail = _decode(50.0, np.random.default_rng(1))
    assert detail.tokens_per_second is not None
    bounds = detail.tokens_per_second_ci95
    assert bounds is not None and bounds.low is not None and bounds.high is not None
    assert bounds.low < detail.tokens_per_second < bounds.high
    assert bounds.low < 50.0 < bounds.high
    repeats = detail.tokens_per_second_repeats
    assert repeats is not None and repeats.n == 5
    assert repeats.min <= repeats.median <= repeats.max


def test_an_unbounded_rate_has_no_upper_bound() -> None:
    """When resampling can make long replies no slower than short ones, the rate is unbounded."""
    short = [_record(16, t) for t in (1.0, 1.2, 1.4)]
    long = [_record(512, t) for t in (1.1, 1.3, 1.5)]
    detail = fit_decode(short, long, short_tokens=16, long_tokens=512)
    bounds = interval(decode_samples(detail))
    assert bounds is not None and bounds.high is None and bounds.low is not None


def test_ratio_interval_of_a_twice_as_fast_checkpoint_excludes_one() -> None:
    rng = np.random.default_rng(3)
    slow, fast = _decode(50.0, rng), _decode(100.0, rng)
    bounds = ratio_interval(decode_samples(slow), decode_samples(fast))
    assert bounds is not None and bounds.low is not None and bounds.high is not None
    true_ratio = 100.0 / 50.0
    assert bounds.low <= true_ratio <= bounds.high  # the interval holds the planted ratio
    assert bounds.low > 1.0  # and tells it from no change


def test_ratio_interval_of_the_same_checkpoint_includes_one() -> None:
    rng = np.random.default_rng(4)
    first, again = _decode(50.0, rng, noise=0.05), _decode(50.0, rng, noise=0.05)
    bounds = ratio_interval(decode_samples(first), decode_samples(again))
    assert bounds is not None and bounds.low is not None and bounds.high is not None
    assert bounds.low < 1.0 < bounds.high


def _level(concurrency: int, batch_rates: list[float]) -> LoadLevel:
    batches = [
        LoadBatch(
            concurrency=concurrency,
            wall_s=1000 / rate,
            output_tokens=1000,
            failed=0,
            tokens_per_second=rate,
        )
        for rate in batch_rates
    ]
    pooled = 1000 * len(batches) / sum(batch.wall_s for batch in batches)
    return LoadLevel(concurrency=concurrency, tokens_per_second=pooled, batches=batches)


def test_a_level_interval_resamples_whole_batches() -> None:
    level = _level(4, [90.0, 100.0, 110.0])
    bounds = interval(level_samples(level))
    assert bounds is not None and bounds.low is not None and bounds.high is not None
    # Each resample pools some of the three batches: never outside the slowest and fastest.
    assert 90.0 <= bounds.low < level.tokens_per_second < bounds.high <= 110.0  # type: ignore[operator]


def test_summaries_carry_min_median_max_and_interval() -> None:
    decode = _decode(50.0, np.random.default_rng(5))
    load = LoadDetail(max_tokens=256, batches_per_level=2, levels=[_level(16, [600.0, 640.0])])
    summaries = speed_summaries(decode, load)
    level = summaries["load_c16_tokens_per_second"]
    assert (level.repeats, level.min, level.median, level.max) == (2, 600.0, 620.0, 640.0)
    assert level.ci95 is not None
    assert summaries["decode_tokens_per_second"].repeats == 5


def _result(name: str, rate: float, level_rates: list[float], seed: int) -> MeasureResult:
    decode = _decode(rate, np.random.default_rng(seed))
    load = LoadDetail(max_tokens=256, batches_per_level=2, levels=[_level(16, level_rates)])
    environment = Environment(
        target=f"local:{name}",
        backend="local",
        checkpoint_sha256=name.removesuffix("-again"),
        sagemeter_version="test",
        started_utc="2026-12-02T00:00:00Z",
    )
    return MeasureResult(
        name=name,
        decode_tokens_per_second=decode.tokens_per_second,
        load_tokens_per_second={"16": load.levels[0].tokens_per_second or 0.0},
        intervals=speed_summaries(decode, load),
        detail=Detail(settings={}, environment=environment, decode=decode, load=load),
    )


@pytest.fixture
def aba_files(tmp_path: Path) -> list[Path]:
    """A decodes at 50, B at 100; at 16 at once B is about 2% faster but A drifts 6% between runs."""
    results = [
        _result("a", 50.0, [600.0, 610.0], 10),
        _result("b", 100.0, [596.0, 636.0], 11),
        _result("a-again", 50.5, [636.0, 646.0], 12),
    ]
    paths = []
    for result in results:
        path = tmp_path / f"measure-{result.name}.json"
        save_result(result, path)
        paths.append(path)
    return paths


@pytest.mark.slow
def test_combine_gives_every_ratio_an_interval_and_flags_the_ones_within_drift(
    aba_files: list[Path],
) -> None:
    comparison = combine(aba_files)
    rows = {row.key: row for row in comparison.rows}
    decode = rows["decode_tokens_per_second"]
    assert decode.ratio_intervals[0] is not None and decode.ratio_intervals[0].low is not None
    assert decode.ratio_intervals[0].low > 1.5
    assert decode.ratio_flags[0] is None  # twice as fast, far outside a 1% drift
    level = rows["load_c16_tokens_per_second"]
    assert level.ratio_flags[0] is not None and "drift" in level.ratio_flags[0]
    # A' against A is the drift itself, not a claim to flag.
    assert decode.ratio_flags[1] is None and level.ratio_flags[1] is None
    assert all(value is not None for value in decode.intervals)


@pytest.mark.slow
def test_drift_is_reported_for_every_figure(aba_files: list[Path]) -> None:
    comparison = combine(aba_files)
    assert comparison.drift is not None
    drifted = {figure.key: figure.change for figure in comparison.drift.figures}
    assert set(drifted) == {row.key for row in comparison.rows}
    pooled_a = 2 / (1 / 600 + 1 / 610)  # all tokens / all wall time of the two batches
    pooled_a_again = 2 / (1 / 636 + 1 / 646)
    assert drifted["load_c16_tokens_per_second"] == pytest.approx(pooled_a_again / pooled_a - 1)


def test_without_a_re_measure_a_ratio_is_flagged_only_when_its_interval_reaches_one(
    aba_files: list[Path],
) -> None:
    comparison = combine(aba_files[:2])
    rows = {row.key: row for row in comparison.rows}
    assert comparison.drift is None
    assert rows["decode_tokens_per_second"].ratio_flags == [None]
    flag = rows["load_c16_tokens_per_second"].ratio_flags[0]
    assert flag is not None and "includes 1" in flag


@pytest.mark.slow
def test_cost_intervals_are_the_throughput_intervals_inverted(aba_files: list[Path]) -> None:
    rows = {row.key: row for row in combine(aba_files, price_per_hour=1.0).rows}
    throughput, cost = rows["load_c16_tokens_per_second"], rows["usd_per_million_tokens_c16"]
    speed_ratio, cost_ratio = throughput.ratio_intervals[0], cost.ratio_intervals[0]
    assert speed_ratio is not None and cost_ratio is not None
    assert speed_ratio.low is not None and speed_ratio.high is not None
    assert cost_ratio.low == pytest.approx(1 / speed_ratio.high)
    assert cost_ratio.high == pytest.approx(1 / speed_ratio.low)
    first = cost.intervals[0]
    assert first is not None and first.low is not None and first.high is not None
    assert first.low < (cost.values[0] or 0) < first.high
