"""Prefill figures through combine and the report; older result files without the phase still
load and combine.

Two real prefill phases are measured against the known-truth server (10,000 and 20,000 prompt
tokens per second) and put into copies of the committed report fixture's files, which predate
the phase: the B/A ratio of the prefill rate must then be 2 within the noise, with an interval,
and the long prompt's first token about half as late.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.compare import combine
from sagemeter.measure.figure_samples import speed_summaries
from sagemeter.measure.prefill import measure_prefill
from sagemeter.measure.workflow import ttft_long_prompt_ms
from sagemeter.report.markdown import render_markdown
from sagemeter.report.runs import load_run
from sagemeter.report.sections import build_document
from sagemeter.results import PrefillDetail, load_result, save_result
from sagemeter.transport.openai import OpenAIChat
from tests.report_parse import FIXED_RUN, md_sections

OLD_A, OLD_B = "measure-smollm2-f32.json", "measure-smollm2-q4_1.json"
PREFILL_S = {OLD_A: 100e-6, OLD_B: 50e-6}


async def _measured(url: str) -> PrefillDetail:
    async with OpenAIChat(url) as client:
        return await measure_prefill(client, short_tokens=128, long_tokens=1024, repeats=3)


@pytest.fixture(scope="module")
def with_prefill(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the two fixture files, each given a real prefill phase."""
    folder = tmp_path_factory.mktemp("prefill-run")
    for name, prefill_s in PREFILL_S.items():
        truth = TruthTiming(ttft_s=0.02, itl_s=0.001, prefill_s=prefill_s, prefix_cache=True)
        with running_truth_server(truth) as url:
            detail = asyncio.run(_measured(url))
        result = load_result(FIXED_RUN / name)
        assert result.detail is not None and detail.tokens_per_second is not None
        result.detail.prefill = detail
        result.prefill_tokens_per_second = round(detail.tokens_per_second, 3)
        result.ttft_long_prompt_ms = ttft_long_prompt_ms(detail)
        result.intervals.update(speed_summaries(None, None, prefill=detail))
        save_result(result, folder / name)
    return folder


def test_files_without_the_phase_load_and_combine_as_before() -> None:
    old = load_result(FIXED_RUN / OLD_A)
    assert old.prefill_tokens_per_second is None and old.ttft_long_prompt_ms is None
    assert old.detail is not None and old.detail.prefill is None
    keys = [row.key for row in combine([FIXED_RUN / OLD_A, FIXED_RUN / OLD_B]).rows]
    assert "prefill_tokens_per_second" not in keys and "ttft_long_prompt_ms" not in keys


@pytest.mark.alone
def test_combine_gives_the_prefill_rows_with_ratios_and_intervals(with_prefill: Path) -> None:
    rows = {row.key: row for row in combine([with_prefill / OLD_A, with_prefill / OLD_B]).rows}
    rate = rows["prefill_tokens_per_second"]
    assert rate.kind == "speed"
    assert rate.values[0] == pytest.approx(10_000, rel=0.03)
    assert rate.values[1] == pytest.approx(20_000, rel=0.03)
    assert rate.ratios[0] == pytest.approx(2.0, rel=0.05)
    assert all(bounds is not None for bounds in rate.intervals)
    [ratio_bounds] = rate.ratio_intervals
    assert ratio_bounds is not None and ratio_bounds.low is not None and ratio_bounds.low > 1.5
    assert rate.ratio_flags == [None]  # far from 1: a real difference
    ttft = rows["ttft_long_prompt_ms"]
    # 20 ms + 1024 tokens of prefill: 122 ms against 71 ms
    assert ttft.values[0] == pytest.approx(122.4, abs=6)
    assert ttft.ratios[0] is not None and 0.5 < ttft.ratios[0] < 0.65


def test_an_old_file_beside_a_new_one_has_empty_prefill_cells(with_prefill: Path) -> None:
    rows = {row.key: row for row in combine([FIXED_RUN / OLD_A, with_prefill / OLD_B]).rows}
    rate = rows["prefill_tokens_per_second"]
    assert rate.values[0] is None and rate.values[1] is not None
    assert rate.ratios == [None] and rate.ratio_flags == [None]


def test_the_report_has_a_prefill_section(with_prefill: Path) -> None:
    run = load_run(with_prefill)
    text = render_markdown(build_document(run), {})
    sections = md_sections(text)
    titles = list(sections)
    assert titles.index("Prefill (prompt processing)") == titles.index("Decode speed") + 1
    body = sections["Prefill (prompt processing)"]
    assert "Prefill (prompt tokens/s)" in body and "Same long prompt again" in body
    assert "(long − short prompt tokens)" in body
    assert "long-prompt behaviour (prefill) was not measured" not in sections["Scope"]
