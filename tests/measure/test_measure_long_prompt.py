"""Long prompts under load against the known-truth server: every figure against truth.

Truth: requests at once are served independently; one whose prompt has P tokens (the server's
count) and asks T tokens gets its first token after ttft + P * prefill and its last after that
plus T * itl. So a batch of N long prompts takes that long, its throughput is N * T over it,
and its first tokens wait ttft + P * prefill. Prompts unique from their first token leave the
prefix cache nothing to serve: a repeated prompt would get its blocks free and miss by far.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.compare.combine import combine
from sagemeter.errors import UserError
from sagemeter.experiment.plan import MeasureOptions
from sagemeter.measure.long_prompt import measure_long_prompt_load
from sagemeter.measure.prefill import measure_prefill
from sagemeter.measure.workflow import measure_target, selected_questions, total_requests
from sagemeter.options.measure import MEASURE
from sagemeter.report.writer import write_compare_report, write_report
from sagemeter.results import LongPromptLoad, MeasureResult, PrefillDetail, load_result
from sagemeter.settings import MeasureSettings, measure_settings
from sagemeter.targets import parse_target
from sagemeter.transport.openai import OpenAIChat
from tests import cli_run
from tests.report_parse import md_sections, md_tables, png_ink, png_size

SHORT, LONG = 64, 512
REPLY = 16


def _truth(prefill_s: float) -> TruthTiming:
    return TruthTiming(ttft_s=0.02, itl_s=0.002, prefill_s=prefill_s, prefix_cache=True)


def _cached_tokens(url: str) -> int:
    return int(httpx.get(url + "/stats").json()["cached_prompt_tokens"])


async def _prefill_then_load(url: str, levels: list[int]) -> tuple[PrefillDetail, LongPromptLoad]:
    async with OpenAIChat(url) as client:
        prefill = await measure_prefill(client, short_tokens=SHORT, long_tokens=LONG, repeats=2)
        load = await measure_long_prompt_load(
            client, prefill, levels=levels, max_tokens=REPLY, batches=2, reruns=2
        )
        return prefill, load


def test_each_level_is_the_truth_and_no_prompt_is_served_from_the_cache() -> None:
    truth = _truth(200e-6)
    with running_truth_server(truth) as url:
        prefill, _ = asyncio.run(_prefill_then_load(url, []))  # the cache pair's hits alone
        before = _cached_tokens(url)
        _, load = asyncio.run(_prefill_then_load(url, [1, 4]))
        cached = _cached_tokens(url) - before - (prefill.prefix_cache.cached_tokens_reported or 0)
    assert cached == 0  # every long prompt unique from its first token: no block served
    assert load.problem is None and load.prompt_tokens == LONG
    counted = load.prompt_tokens_counted
    assert counted is not None and counted.min == counted.max == LONG  # the server's own count
    first = truth.first_token_seconds(LONG)
    for level in load.levels:
        assert level.tokens_per_second is not None, level.problem
        expected = level.concurrency * REPLY / truth.request_seconds(REPLY, LONG)
        assert level.tokens_per_second == pytest.approx(expected, rel=0.1)
        assert level.ttft_s is not None and level.ttft_s.n == 2 * level.concurrency, level.problem
        assert first <= level.ttft_s.median < first + 0.015
        assert len(level.counted_ttft_s) == 2 * level.concurrency, level.problem
        assert all(r.prompt_tokens == LONG for r in level.records)


def test_prompts_are_cut_so_that_prompt_and_reply_fit_the_servers_context() -> None:
    truth = _truth(20e-6)  # the server refuses a prompt whose reply would not fit its context

    async def run(url: str) -> tuple[PrefillDetail, LongPromptLoad]:
        async with OpenAIChat(url) as client:
            described = await client.describe()
            prefill = await measure_prefill(
                client,
                short_tokens=SHORT,
                long_tokens=4096,
                repeats=2,
                context_tokens=described.get("max_model_len"),
            )
            load = await measure_long_prompt_load(
                client, prefill, levels=[2], max_tokens=128, batches=1, reruns=0
            )
            return prefill, load

    with running_truth_server(truth, max_model_len=1024) as url:
        prefill, load = asyncio.run(run(url))
    room = 1024 - 128 - 20  # the reply, and the margin for the sizing's error (2% of 1024)
    assert prefill.long_tokens > room  # the prefill phase's long prompt would not fit
    assert load.prompt_tokens == room and any("cut from" in note for note in load.notes)
    [level] = load.levels
    assert level.tokens_per_second is not None, level.problem  # no request was refused
    counted = load.prompt_tokens_counted
    assert counted is not None and room - 8 <= counted.min <= counted.max <= room + 8


def test_without_a_sized_prompt_no_level_is_sent_and_each_says_why() -> None:
    prefill = PrefillDetail(
        short_tokens=SHORT,
        long_tokens=LONG,
        repeats=2,
        valid=False,
        problems=["no prefill rate: the server reports no usage.prompt_tokens"],
    )

    async def run() -> LongPromptLoad:
        async with OpenAIChat("http://127.0.0.1:9") as client:  # nothing is sent to it
            return await measure_long_prompt_load(
                client, prefill, levels=[1, 4], max_tokens=REPLY, batches=2, reruns=0
            )

    load = asyncio.run(run())
    assert [level.concurrency for level in load.levels] == [1, 4]
    assert all(level.tokens_per_second is None and not level.records for level in load.levels)
    assert load.problem is not None and "reports no usage.prompt_tokens" in load.problem


def test_the_options_need_the_prefill_phase_and_whole_levels() -> None:
    asked = measure_settings(False, {"long_prompt_levels": [1, 4, 16]})
    assert asked.long_prompt_levels == [1, 4, 16] and asked.max_concurrency == 16
    assert MeasureSettings().long_prompt_levels == []  # not run unless asked
    cli = MEASURE.label("cli")
    with pytest.raises(UserError, match="give --prefill-tokens too"):
        measure_settings(True, {"long_prompt_levels": [1, 4]}, label=cli)
    with pytest.raises(UserError, match="--long-prompt-levels: 2 given twice"):
        measure_settings(False, {"long_prompt_levels": [2, 2]}, label=cli)
    plan = MeasureOptions.model_validate({"long_prompt_levels": "1,4", "prefill_tokens": "64,512"})
    assert plan.settings().long_prompt_levels == [1, 4]
    with pytest.raises(UserError, match=r"measure\.long_prompt_levels sends"):
        MeasureOptions.model_validate({"long_prompt_levels": [1], "quick": True}).settings()
    with pytest.raises(UserError, match="long_prompt_levels: 0: give 1–1024 requests at once"):
        measure_settings(False, {"long_prompt_levels": [0, 4]}, label=str)


def _settings(**changes: object) -> MeasureSettings:
    base = MeasureSettings(
        short_tokens=2,
        long_tokens=8,
        decode_repeats=2,
        prefill_tokens=[SHORT, LONG],
        long_prompt_levels=[1, 4],
        load_levels=[1],
        load_max_tokens=REPLY,
        load_batches=2,
        questions_per_family=1,
        quality_max_tokens=2,
        timeout_s=5.0,
        stall_s=1.0,
    )
    return base.model_copy(update=changes)


def _measure(truth: TruthTiming, out: Path, name: str) -> tuple[MeasureResult, int]:
    done: list[int] = []
    with running_truth_server(truth) as url:
        result, _ = asyncio.run(
            measure_target(
                parse_target(url),
                name=name,
                settings=_settings(),
                out_dir=out,
                progress=done.append,
            )
        )
    return result, sum(done)


@pytest.mark.alone
@pytest.mark.slow  # two whole measurements, about 10 s
def test_combine_compares_each_level_with_ratios_and_intervals(tmp_path: Path) -> None:
    slow, fast = _truth(200e-6), _truth(50e-6)
    a, progressed = _measure(slow, tmp_path, "a")
    b, _ = _measure(fast, tmp_path, "b")
    settings = _settings()
    assert progressed == total_requests(settings, len(selected_questions(settings).questions))
    for result in (a, b):
        assert result.complete is True, result.incomplete_because
        assert set(result.long_prompt_tokens_per_second) == {"1", "4"}
        assert result.intervals["long_prompt_c4_tokens_per_second"].ci95 is not None
    # The prefix-cache pair asked the server's own counters; this server has no /metrics.
    cache = a.detail.prefill.prefix_cache if a.detail and a.detail.prefill else None
    assert cache is not None and cache.server_reports_caching is None
    assert "GET /metrics answered HTTP 404" in (cache.server_counters_note or "")
    # The MCP measure tool's answer text names the levels too.
    from sagemeter.mcp.measure_tools import measure_text
    from sagemeter.report.terminal import format_value

    text = measure_text(a, tmp_path / "measure-a.json")
    assert f"long prompts c1 {format_value('load', a.long_prompt_tokens_per_second['1'])}" in text
    p90 = a.long_prompt_ttft_p90_ms["4"]
    assert p90 is not None and p90 >= (a.long_prompt_ttft_p50_ms["4"] or 0)
    comparison = combine([tmp_path / "measure-a.json", tmp_path / "measure-b.json"])
    rows = {row.key: row for row in comparison.rows}
    speed = rows["long_prompt_c4_tokens_per_second"]
    truth_ratio = slow.request_seconds(REPLY, LONG) / fast.request_seconds(REPLY, LONG)
    assert speed.ratios[0] == pytest.approx(truth_ratio, rel=0.1)
    assert speed.intervals[0] is not None and speed.ratio_intervals[0] is not None
    ttft = rows["long_prompt_c4_ttft_p50_ms"]
    truth_ttft = fast.first_token_seconds(LONG) / slow.first_token_seconds(LONG)
    assert ttft.ratios[0] == pytest.approx(truth_ttft, rel=0.15)
    assert ttft.ratio_intervals[0] is not None
    assert "long_prompt_c1_ttft_p90_ms" in rows
    again = load_result(tmp_path / "measure-a.json")
    assert again.detail is not None and again.detail.long_prompt_load is not None
    assert again.long_prompt_tokens_per_second == a.long_prompt_tokens_per_second
    # The report's prefill section: a row per level and figure, the files' values, the ratio.
    write_report(tmp_path, "md,png")
    body = md_sections((tmp_path / "report.md").read_text())["Prefill (prompt processing)"]
    # TTFT against prompt length, per arm, every counted prompt: drawn, linked in the section.
    plot = tmp_path / "plots" / "prefill.png"
    assert "(plots/prefill.png)" in body
    assert png_size(plot.read_bytes()) == (1200, 675) and png_ink(plot)[0] > 0.01
    assert "Long prompts under load" in body
    table = md_tables(body)[-1]
    row = next(r for r in table if r[0].value == "4 at once, long prompts (tokens/s)")
    assert float(row[1].value) == pytest.approx(a.long_prompt_tokens_per_second["4"], rel=0.01)
    assert float(row[3].value.rstrip("×")) == pytest.approx(speed.ratios[0], rel=0.01)
    assert "95%" in row[3].note
    scope = md_sections((tmp_path / "report.md").read_text())["Scope"]
    assert "Long prompts under load: 1, 4 at once, each its own 512-token prompt" in scope
    assert "Long prompts under load (many long prompts at once) were not measured" not in scope
    # Two run folders side by side (here the folder with itself): the prompt figures are rows.
    write_compare_report(tmp_path, tmp_path, "md", out_dir=tmp_path / "cmp")
    side = md_sections((tmp_path / "cmp" / "report.md").read_text())["Side by side"]
    rows_by_title = {r[0].value: r for r in md_tables(side)[0]}
    prefill_row = rows_by_title["Prefill (prompt tokens/s)"]
    assert float(prefill_row[1].value) == pytest.approx(a.prefill_tokens_per_second or 0, rel=0.01)
    level_row = rows_by_title["4 at once, long prompts (tokens/s)"]
    assert float(level_row[3].value.rstrip("×")) == pytest.approx(speed.ratios[0], rel=0.01)
    assert "4 at once, long prompts: TTFT p50 (ms)" in rows_by_title


def _cli(
    args: list[str], tmp_path: Path, *, real_process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`sagemeter measure ARGS` in this process, or as its own process (a whole timed run)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["SAGEMETER_HOME"] = str(tmp_path / "home")
    return (cli_run.run if real_process else cli_run.invoke)(["measure", *args], env)


@pytest.mark.slow  # the real command, a whole measurement
def test_the_command_measures_long_prompts_at_each_level(tmp_path: Path) -> None:
    truth = _truth(100e-6)
    args = ["--quick", "--levels", "1", "--load-tokens", str(REPLY), "--timeout", "5s"]
    args += ["--prefill-tokens", f"{SHORT},{LONG}", "--long-prompt-levels", "1,4"]
    with running_truth_server(truth) as url:
        done = _cli([str(tmp_path / "o"), url, "--name", "lp", *args], tmp_path, real_process=True)
    assert done.returncode == 0, done.stderr
    assert "4 at once, 512-token prompts tok/s" in done.stdout
    written = json.loads((tmp_path / "o" / "measure-lp.json").read_text())
    expected = 4 * REPLY / truth.request_seconds(REPLY, LONG)
    assert written["long_prompt_tokens_per_second"]["4"] == pytest.approx(expected, rel=0.1)
    p50 = written["long_prompt_ttft_p50_ms"]["4"]
    assert (
        truth.first_token_seconds(LONG) * 1000 <= p50 < truth.first_token_seconds(LONG) * 1000 + 15
    )
    assert written["detail"]["settings"]["long_prompt_levels"] == [1, 4]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--long-prompt-levels", "1,4"], "--long-prompt-levels sends the prefill phase's"),
        (["--long-prompt-levels", "1,x", "--prefill-tokens", "64,512"], "give whole numbers"),
    ],
)
def test_bad_long_prompt_levels_are_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path
) -> None:
    done = _cli([str(tmp_path / "o"), "http://127.0.0.1:9", "--quick", *args], tmp_path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


def test_a_plans_estimate_counts_long_prompt_levels_as_batches() -> None:
    from sagemeter.experiment.estimate import REQUEST_ALLOWANCE_S, measure_seconds

    without = measure_settings(False, {})
    with_levels = measure_settings(False, {"long_prompt_levels": [1, 4, 16]})
    batches = 3 * with_levels.load_batches  # each batch waits as one request does
    added = batches * (with_levels.load_max_tokens / 50.0 + REQUEST_ALLOWANCE_S)
    assert measure_seconds(with_levels, 50.0) - measure_seconds(without, 50.0) == pytest.approx(
        added
    )
