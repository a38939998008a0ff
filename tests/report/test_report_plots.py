"""The PNG plots (sizes and non-blank content, never pixels) and the Wilson interval behind them."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sagemeter.evidence import wilson_interval
from sagemeter.report.plots import OKABE_ITO, PLOT_KEYS, render_plots
from sagemeter.report.runs import load_run
from sagemeter.report.writer import run_series, write_report
from tests.conftest import reference_file
from tests.report_parse import FIXED_RUN, copy_run, png_ink, png_size


@pytest.fixture(scope="module")
def fixed_plots() -> dict[str, bytes]:
    run = load_run(FIXED_RUN, price_per_hour=0.5)
    return render_plots(run_series(run))


@pytest.mark.slow
def test_every_plot_is_drawn_at_its_size_and_not_blank(fixed_plots: dict[str, bytes]) -> None:
    assert set(fixed_plots) == set(PLOT_KEYS) - {"prefill"}  # its files ran no prefill phase
    for key, png in fixed_plots.items():
        assert png_size(png) == (1200, 675), key  # 8 × 4.5 in at 150 dpi: sharp at 800 px
        inked, colours = png_ink(png)
        assert 0.01 < inked < 0.9, (key, inked)
        assert colours > 20, (key, colours)


def test_plots_use_the_okabe_ito_palette(fixed_plots: dict[str, bytes]) -> None:
    blue = np.array([int(OKABE_ITO[0][i : i + 2], 16) for i in (1, 3, 5)])
    orange = np.array([int(OKABE_ITO[1][i : i + 2], 16) for i in (1, 3, 5)])
    for key, png in fixed_plots.items():
        pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
        for colour in (blue, orange):  # the first two checkpoints' colours
            near = (np.abs(pixels.astype(int) - colour).max(axis=1) <= 12).sum()
            assert near > 50, (key, colour)


def test_cost_plot_needs_a_price_and_minimal_files_skip_what_they_lack(tmp_path: Path) -> None:
    without_price = render_plots(run_series(load_run(FIXED_RUN)), ["cost", "throughput"])
    assert "cost" not in without_price and "throughput" in without_price
    run = tmp_path / "article"
    run.mkdir()
    for name in ("measure-gemma-4-e2b.json", "measure-gemma-4-e2b-qat.json"):
        (run / name).write_bytes(reference_file(name).read_bytes())
    drawn = render_plots(run_series(load_run(run, price_per_hour=1.1267)))
    # No raw timings in the article's files: no reply-time fit, no latency distributions.
    assert set(drawn) == {"throughput", "cost", "quality"}


@pytest.mark.slow
def test_png_format_writes_the_plot_files(tmp_path: Path) -> None:
    run = copy_run(FIXED_RUN, tmp_path / "run")
    written = write_report(run, "png", price_per_hour=1.0)
    drawn = [k for k in PLOT_KEYS if k != "prefill"]  # the fixed run's files ran no prefill
    assert sorted(p.name for p in written) == sorted(f"{k}.png" for k in drawn)
    for path in written:
        assert path.parent == run / "plots"
        assert png_size(path.read_bytes()) == (1200, 675)
        assert png_ink(path)[0] > 0.01
    assert not (run / "report.md").exists() and not (run / "report.html").exists()


@pytest.mark.parametrize(
    ("successes", "total", "low", "high"),
    [
        (0, 10, 0.0, 0.2775),  # textbook values of the Wilson score interval
        (10, 10, 0.7225, 1.0),
        (37, 40, 0.8014, 0.9742),  # the article's 37 of 40
        (5, 10, 0.2366, 0.7634),
    ],
)
def test_wilson_interval_matches_known_values(
    successes: int, total: int, low: float, high: float
) -> None:
    got_low, got_high = wilson_interval(successes, total)
    assert math.isclose(got_low, low, abs_tol=5e-4)
    assert math.isclose(got_high, high, abs_tol=5e-4)


def test_wilson_interval_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(3, 7)
    mirror_low, mirror_high = wilson_interval(4, 7)
    assert math.isclose(low, 1 - mirror_high) and math.isclose(high, 1 - mirror_low)
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def test_a_level_without_a_figure_is_left_out_of_the_throughput_and_cost_plots(
    tmp_path: Path,
) -> None:
    run = copy_run(FIXED_RUN, tmp_path / "run")
    edited = run / "measure-smollm2-q4_1.json"
    payload = json.loads(edited.read_text())
    payload["load_tokens_per_second"] = dict.fromkeys(payload["load_tokens_per_second"])
    edited.write_text(json.dumps(payload))  # every level asked for, none with a figure
    drawn = render_plots(run_series(load_run(run, price_per_hour=0.5)), ["throughput", "cost"])
    assert set(drawn) == {"throughput", "cost"}  # the other files' levels are still drawn
    for png in drawn.values():
        assert png_ink(png)[0] > 0.01


def test_the_decode_plot_says_which_rate_is_reported_and_which_is_least_squares() -> None:
    from sagemeter.report.plots import decode_fit_lines

    series = run_series(load_run(FIXED_RUN))[0]
    assert series.result.detail is not None and series.result.detail.decode is not None
    # Five quick long replies and one slow one: the medians ignore it, least squares does not.
    decode = series.result.detail.decode.model_copy(
        update={
            "short_tokens": 16,
            "long_tokens": 96,
            "short_times_s": [1.0, 1.0, 1.0],
            "long_times_s": [5.0, 5.0, 9.0],
            "tokens_per_second": 20.0,  # (96 - 16) / (5 - 1)
            "per_call_fixed_cost_s": 0.2,  # 1 - 16 / 20
            "least_squares_tokens_per_second": None,
        }
    )
    reported, fitted = decode_fit_lines(series, decode)
    assert reported.label == f"{series.label}: 20 tokens/s, the rate reported"
    assert reported.intercept + reported.slope * 16 == pytest.approx(1.0)  # through the medians
    assert reported.intercept + reported.slope * 96 == pytest.approx(5.0)
    assert fitted.label == f"{series.label}: least squares 15 tokens/s" and fitted.linestyle == ":"


def test_the_prefill_plot_draws_every_counted_prompt_of_each_arm() -> None:
    from sagemeter.report.plots import Series, prefill_plot, prefill_points
    from sagemeter.results import MeasureResult, PrefillDetail

    def arm(name: str, rate: float | None) -> Series:
        prefill = PrefillDetail(
            short_tokens=64,
            long_tokens=512,
            repeats=2,
            short_prompt_tokens=[64, 64],
            long_prompt_tokens=[512, 511],
            short_ttft_s=[0.02 + 64 / 20_000] * 2,
            long_ttft_s=[0.02 + 512 / 20_000, 0.02 + 511 / 20_000],
            tokens_per_second=rate,
            per_call_fixed_cost_s=0.02 if rate else None,
        )
        result = MeasureResult.model_validate({"name": name, "detail": _detail_with(prefill)})
        return Series(label=name, result=result, color=OKABE_ITO[0 if rate else 1])

    with_rate, without = arm("a", 20_000.0), arm("b", None)
    points = prefill_points(with_rate.result.detail.prefill)  # type: ignore[union-attr]
    assert [tokens for tokens, _ in points] == [64, 64, 512, 511]  # every counted prompt
    assert [ttft for _, ttft in points] == pytest.approx([0.0232, 0.0232, 0.0456, 0.04555])
    png = prefill_plot([with_rate, without])
    assert png is not None and png_size(png) == (1200, 675)
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    for colour in OKABE_ITO[:2]:  # both arms drawn, each in its colour
        rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(pixels.astype(int) - rgb).max(axis=1) <= 12).sum() > 50
    assert prefill_plot([]) is None


def _detail_with(prefill: object) -> dict[str, object]:
    """The least a result's detail needs, holding `prefill`."""
    environment = {"target": "t", "backend": "http", "sagemeter_version": "0", "started_utc": "x"}
    return {"settings": {}, "environment": environment, "prefill": prefill}
