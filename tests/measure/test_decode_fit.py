"""The article's decode fit on records of known timing."""

from __future__ import annotations

import pytest

from sagemeter.measure.decode import OUT_OF_ORDER, fit_decode
from sagemeter.request_record import RequestRecord
from tests.records import timed_record


def _record(
    tokens: int, seconds: float, *, asked: int | None = None, ok: bool = True
) -> RequestRecord:
    return timed_record(tokens, seconds, asked=asked, ok=ok)


def test_rate_and_fixed_cost_from_medians() -> None:
    # 0.5 s fixed cost per call, then exactly 100 tokens/s, with one slow reply per length (not
    # so slow that it disagrees with its twins, see test_replies_that_disagree_leave_no_rate).
    short = [_record(16, 0.5 + 0.16 + d) for d in (0.0, 0.01, -0.01, 0.0, 0.2)]
    long = [_record(512, 0.5 + 5.12 + d) for d in (0.0, 0.02, -0.02, 0.0, 2.0)]
    detail = fit_decode(short, long, short_tokens=16, long_tokens=512)
    assert detail.valid
    assert detail.tokens_per_second == pytest.approx(100.0, rel=1e-9)
    assert detail.per_call_fixed_cost_s == pytest.approx(0.5, abs=1e-9)
    assert detail.least_squares_tokens_per_second is not None
    assert detail.least_squares_tokens_per_second < 100.0  # the outliers pull the plain fit off
    assert detail.ttft_s is not None and detail.ttft_s.median == pytest.approx(0.05)


def test_article_figures_follow_from_the_formula() -> None:
    # The article: 5.392 s fastest QAT reply at 512; 105.1 tok/s and 0.562 s fixed cost.
    rate, fixed = 105.1, 0.562
    short = [_record(16, fixed + 16 / rate)] * 5
    long = [_record(512, fixed + 512 / rate)] * 5
    detail = fit_decode(short, long, short_tokens=16, long_tokens=512)
    assert detail.tokens_per_second == pytest.approx(rate)
    assert detail.per_call_fixed_cost_s == pytest.approx(fixed)


def test_a_fixed_cost_below_zero_is_no_figure_but_the_rate_stands() -> None:
    # Tokens slow with length: 10 ms each over the first 16, 12.5 ms each over the next 80.
    short = [_record(16, 0.16)] * 5
    long = [_record(96, 0.16 + 80 * 0.0125)] * 5
    detail = fit_decode(short, long, short_tokens=16, long_tokens=96)
    assert detail.valid
    assert detail.tokens_per_second == pytest.approx(80.0)
    assert detail.per_call_fixed_cost_s is None  # the line would cross zero at -40 ms
    assert any("no per-call fixed cost" in p and "-40.0 ms" in p for p in detail.problems)


def test_failures_and_early_stops_are_named_not_averaged_in() -> None:
    short = [_record(16, 0.66), _record(16, 0.66, ok=False)]
    long = [_record(512, 5.62), _record(300, 3.5, asked=512)]
    detail = fit_decode(short, long, short_tokens=16, long_tokens=512)
    assert not detail.valid
    assert detail.long_times_s == [5.62]
    assert any("1 short replies failed" in p for p in detail.problems)
    assert any("stopped early (300 of 512 tokens)" in p for p in detail.problems)


def test_no_rate_without_both_lengths() -> None:
    detail = fit_decode([], [_record(512, 5.0)], short_tokens=16, long_tokens=512)
    assert not detail.valid
    assert detail.tokens_per_second is None


def test_no_rate_when_long_is_not_slower() -> None:
    detail = fit_decode([_record(16, 2.0)], [_record(512, 1.0)], short_tokens=16, long_tokens=512)
    assert not detail.valid
    assert any("not slower" in p for p in detail.problems)
    # Not asked again for the order: not called a stall (a busy host's reason).
    assert not any("(a stall?)" in p for p in detail.problems)


def test_an_order_that_stayed_after_asking_again_is_called_a_stall() -> None:
    """The measuring loop set the short replies aside for the order (OUT_OF_ORDER) and asked
    again, and the order stayed: only then is the refusal a stall's."""
    again = [f"1 short replies took up to 2.00 s, {OUT_OF_ORDER} of 1.00 s (a stall?)"]
    detail = fit_decode(
        [_record(16, 2.0)],
        [_record(512, 1.0)],
        short_tokens=16,
        long_tokens=512,
        measured_again=again,
    )
    assert not detail.valid and detail.tokens_per_second is None
    refusal = [p for p in detail.problems if "not slower" in p]
    assert refusal == [
        "no decode rate: long replies were not slower than short ones, and stayed so when the "
        "short ones were asked again (a stall?)"
    ]


def test_replies_that_disagree_leave_no_rate() -> None:
    """A long reply 3 s slower than its twins (a stall that stayed after measuring again): the
    median would hide it, but the rate is refused with the reason, and the set-aside replies
    never enter the figures."""
    short = [_record(16, 0.66)] * 3
    long = [_record(512, 5.62), _record(512, 5.63), _record(512, 8.62)]
    detail = fit_decode(short, long, short_tokens=16, long_tokens=512)
    assert not detail.valid and detail.tokens_per_second is None
    assert detail.problems[0].startswith("no decode rate: replies of one length disagree: 1 long")
    stalled = _record(512, 8.62)
    aside = fit_decode(
        short,
        [_record(512, 5.62), _record(512, 5.62), stalled],
        short_tokens=16,
        long_tokens=512,
        repeats=2,
        aside=[stalled],
        measured_again=["1 long replies took up to 8.62 s against 5.62 s"],
    )
    assert aside.valid and aside.tokens_per_second == pytest.approx(100.0, rel=1e-6)
    assert aside.long_times_s == [5.62, 5.62] and len(aside.records) == 6
    assert aside.measured_again == ["1 long replies took up to 8.62 s against 5.62 s"]
