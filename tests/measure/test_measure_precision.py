"""Speed to a precision (`measure --speed-precision`, a plan's `[stop] speed`): decode pairs and
each level's batches repeat until the figure's 95% interval is narrow enough or the maximum is
reached, and the result says which, against the known-truth server."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.measure.precision import (
    CLOCK_TICK_S,
    counted_half_width,
    precision_stop,
    relative_half_width,
)
from sagemeter.results import Interval
from tests import cli_run


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=0.002)) as url:
        yield url


def _measure(
    tmp_path: Path, url: str, *options: str, batches: int = 1
) -> subprocess.CompletedProcess[str]:
    """`sagemeter measure` against the known-truth server, in this process."""
    command = [
        "measure", str(tmp_path / "out"), url,
        "--name", "t", "--short-tokens", "4", "--long-tokens", "24", "--repeats", "3",
        "--levels", "1", "--batches", str(batches), "--load-tokens", "4", "--prefill-tokens", "none",
        "--questions-per-family", "1", "--quality-max-tokens", "4", *options,
    ]  # fmt: skip
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    return cli_run.invoke(command, env)


def _detail(tmp_path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((tmp_path / "out" / "measure-t.json").read_text())
    assert result["detail"]["settings"]["speed_precision"] is not None
    detail: dict[str, Any] = result["detail"]
    return detail


def _decode(tmp_path: Path) -> dict[str, Any]:
    decode: dict[str, Any] = _detail(tmp_path)["decode"]
    return decode


def _level(tmp_path: Path) -> dict[str, Any]:
    level: dict[str, Any] = _detail(tmp_path)["load"]["levels"][0]
    return level


def test_a_loose_target_stops_at_the_minimum(tmp_path: Path, truth_url: str) -> None:
    done = _measure(
        tmp_path, truth_url, "--speed-precision", "0.5", "--max-repeats", "8", "--max-batches", "4"
    )
    assert done.returncode in (0, 3), done.stderr  # 3: a busy host may leave a figure out
    # One batch has no interval, so a precision target always asks a second; two batches of
    # the known-truth server agree far within 50%.
    level = _level(tmp_path)
    assert level["precision"]["min_repeats"] == 1 and level["precision"]["max_repeats"] == 4
    if level["tokens_per_second"] is not None:
        assert level["precision"]["reached"] and level["precision"]["repeats"] == 2
        assert sum(batch["complete"] for batch in level["batches"]) == 2
    decode = _decode(tmp_path)
    stop = decode["precision"]
    assert stop["repeats"] == stop["min_repeats"] == 3
    assert len(decode["short_times_s"]) == len(decode["long_times_s"]) == 3
    assert stop["stopping_reason"].startswith("stopped after 3 of at most 8 repeats because")
    if decode["tokens_per_second"] is None:  # a busy host: the client may have set the pace
        assert not stop["reached"] and stop["stopping_reason"].endswith("has no 95% interval")
        return
    half = relative_half_width(decode["tokens_per_second"], _interval(decode))
    assert stop["reached"] and stop["achieved"] == pytest.approx(half) and half <= 0.5


def test_an_unreachable_target_stops_at_the_maximum(tmp_path: Path, truth_url: str) -> None:
    # One part in a million: finer than one microsecond (the records' clock tick) over a batch
    # of tens of milliseconds, so even batches timed alike to the microsecond (which happened:
    # 221.30013831258643 tokens/s twice) cannot claim it, and the maximum ends it.
    done = _measure(
        tmp_path, truth_url, "--speed-precision", "0.000001", "--max-repeats", "6",
        "--max-batches", "3",
    )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr
    measured = _level(tmp_path)
    level = measured["precision"]
    refused = [batch.get("reason") for batch in measured["batches"] if batch.get("reason")]
    assert not level["reached"]
    assert level["repeats"] == level["max_repeats"] == 3, refused
    assert "the maximum of 3 repeats was reached" in level["stopping_reason"]
    decode = _decode(tmp_path)
    stop = decode["precision"]
    assert not stop["reached"] and stop["repeats"] == stop["max_repeats"] == 6
    assert len(decode["short_times_s"]) == len(decode["long_times_s"]) == 6
    assert "the maximum of 6 repeats was reached" in stop["stopping_reason"]


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (("--max-repeats", "2"), "--max-repeats 2 is below --repeats 3"),
        (("--max-batches", "1"), "--max-batches 1 is below --batches 2"),
    ],
)
def test_a_maximum_below_the_minimum_is_refused(
    tmp_path: Path, truth_url: str, options: tuple[str, ...], line: str
) -> None:
    done = _measure(tmp_path, truth_url, "--speed-precision", "0.03", *options, batches=2)
    assert done.returncode == 2
    assert line in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out" / "measure-t.json").exists()


def _interval(decode: dict[str, Any]) -> Any:
    return Interval.model_validate(decode["tokens_per_second_ci95"])


def test_max_minutes_cuts_the_phase_in_progress_and_names_it(tmp_path: Path) -> None:
    """0.6 s for the whole measurement; the known truth makes decode alone take at least 2 s
    (five 200-token replies at 2 ms a token), so decode is cut and nothing after it runs."""
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=0.002)) as url:
        done = _measure(
            tmp_path, url, "--long-tokens", "200", "--repeats", "5", "--max-minutes", "0.01"
        )
    assert done.returncode == 3, done.stderr  # written, and incomplete
    result = json.loads((tmp_path / "out" / "measure-t.json").read_text())
    assert result["complete"] is False
    why = result["incomplete_because"]
    assert why[0] == "decode rate: cut short: max_minutes 0.01 reached during decode"
    assert "1 at once: not measured: max_minutes 0.01 reached during parallel" in why
    assert any(
        line.startswith("quality: ") and "not asked: max_minutes 0.01 reached during" in line
        for line in why
    )
    decode = result["detail"]["decode"]
    assert decode["tokens_per_second"] is None and len(decode["long_times_s"]) < 5
    assert result["detail"]["quality"]["answered"] == 0


@pytest.mark.parametrize("span_s", [0.018075, 0.04])
def test_an_interval_narrower_than_the_clock_tick_is_not_a_precision(span_s: float) -> None:
    """Two batches alike to the microsecond give an interval of width 0: the half-width counted
    is one microsecond over the span, so a target finer than that is never reached, and a
    target coarser is."""
    rate = 4 / span_s
    flat = Interval(low=rate, high=rate)
    tick = CLOCK_TICK_S / span_s
    assert relative_half_width(rate, flat) == 0.0
    assert counted_half_width(rate, flat, span_s) == pytest.approx(tick)
    finer = precision_stop(rate, flat, tick / 2, 3, 2, 3, "1-at-once throughput", span_s)
    assert not finer.reached and finer.achieved == pytest.approx(tick)
    assert (
        "one clock tick" in finer.stopping_reason
        and "maximum of 3 repeats" in finer.stopping_reason
    )
    coarser = precision_stop(rate, flat, tick * 2, 2, 2, 3, "1-at-once throughput", span_s)
    assert coarser.reached
    wide = Interval(low=rate * 0.9, high=rate * 1.1)  # a real spread is counted as it is
    assert counted_half_width(rate, wide, span_s) == pytest.approx(0.1)
    assert counted_half_width(rate, flat, None) == 0.0  # no span known: no floor
