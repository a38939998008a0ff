"""The article's own result files (bf16, QAT, bf16 again) read wherever a result is read: `combine`,
the report, the MCP `compare_results`, reproduce the article's figures and add what it could not
compute (paired verdict, intervals over its batches, the A-A' drift)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from sagemeter.compare import Comparison, combine
from sagemeter.errors import UserError
from sagemeter.mcp import ServerConfig, build_server
from sagemeter.report.writer import write_report
from sagemeter.results import MeasureResult, load_result, save_result
from tests.conftest import reference_file
from tests.mcp_helpers import ok, text_of
from tests.report_parse import md_sections, md_tables, rows_by_label

PRICE = 1.1267
BF16 = "run/measure-gemma-4-e2b.json"
QAT = "run/measure-gemma-4-e2b-qat.json"
AGAIN = "run/measure-gemma-4-e2b-again.json"
SPEED_KEYS = (
    "decode_tokens_per_second",
    "load_c1_tokens_per_second",
    "load_c4_tokens_per_second",
    "load_c16_tokens_per_second",
)


def _sagemeter(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real command in a subprocess; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def _paths() -> list[Path]:
    return [reference_file(name) for name in (BF16, QAT, AGAIN)]


@pytest.fixture(scope="module")
def aba() -> Comparison:
    return combine(_paths(), price_per_hour=PRICE)


def _rows(comparison: Comparison) -> dict[str, list[float | None]]:
    return {row.key: row.values for row in comparison.rows}


def test_each_file_reads_as_a_result_with_its_facts_settings_and_answers() -> None:
    bf16 = load_result(reference_file(BF16))
    assert bf16.name == "gemma-4-e2b"
    assert bf16.decode_tokens_per_second == 51.3 and bf16.per_call_fixed_cost_seconds == 0.633
    assert bf16.load_tokens_per_second == {"1": 45.6, "4": 171.6, "16": 619.1}
    assert (bf16.weights_gib, bf16.kv_cache_tokens, bf16.load_seconds) == (9.75, 723484, 82.751806)
    assert bf16.quality == "37/40"
    detail = bf16.detail
    assert detail is not None and detail.source_format == "article"
    assert detail.startup is not None and detail.startup.max_concurrency == 88.32
    env = detail.environment
    assert env.target == "gemma-4-e2b@us-east-2" and env.backend == "sagemaker"
    assert (env.engine, env.engine_version) == ("vllm", "0.30.0")
    assert env.server["image"].endswith(
        "vllm@sha256:cc456bd79ed75d757d888015486da47520d297e63266faa450253dc3bcd54ef7"
    )
    assert env.server["instance_types"] == ["ml.g6.xlarge"]
    assert env.started_utc == "2026-09-25T18:36:03.746060+00:00"
    settings = detail.settings
    assert settings["method"] == "article" and settings["scoring"] == "article"
    assert settings["load_statistic"] == "median" and settings["quality_max_tokens"] == 64
    assert (settings["short_tokens"], settings["long_tokens"], settings["decode_repeats"]) == (
        16,
        512,
        5,
    )
    assert settings["load_levels"] == [1, 4, 16] and settings["load_batches"] == 2
    quality = detail.quality
    assert quality is not None and quality.question_set == "article-40"
    assert quality.scoring == "article" and quality.seed is None and quality.max_tokens == 64
    assert [item.id for item in quality.items][:2] == ["mul-0", "mul-1"]
    assert quality.items[0].prompt == "What is 54 * 28? Reply with the number only."
    assert quality.by_family == {
        "mul": {"correct": 15, "total": 15, "answered": 15},
        "add": {"correct": 12, "total": 15, "answered": 15},
        "cap": {"correct": 10, "total": 10, "answered": 10},
    }
    assert {item.id for item in quality.items if not item.correct} == {"add-4", "add-8", "add-14"}
    assert detail.load is not None
    c16 = detail.load.levels[2]
    assert [b.tokens_per_second for b in c16.batches] == [618.9, 619.3]
    assert [b.output_tokens for b in c16.batches] == [4096, 4096]
    assert bf16.intervals["load_c16_tokens_per_second"].min == 618.9
    assert bf16.intervals["decode_tokens_per_second"].ci95 is None  # the file keeps medians only


def test_the_again_file_keeps_its_note_on_the_start_up_facts() -> None:
    again = load_result(reference_file(AGAIN))
    assert again.name == "gemma-4-e2b-again" and again.load_seconds == 82.087801
    assert again.detail is not None
    assert any("re-read after the run" in warning for warning in again.detail.warnings)


def test_combine_reproduces_the_articles_ratio_column_and_costs(aba: Comparison) -> None:
    ratios = {row.key: row.ratios[0] for row in aba.rows}
    expected = {
        "weights_gib": 0.82,
        "kv_cache_tokens": 1.2,
        "decode_tokens_per_second": 2.05,
        "load_c1_tokens_per_second": 1.87,
        "load_c4_tokens_per_second": 1.92,
        "load_c16_tokens_per_second": 1.74,
    }
    assert {key: round(ratios[key] or 0.0, 2) for key in expected} == expected
    rows = _rows(aba)
    costs = {
        level: [round(v or 0.0, 2) for v in rows[f"usd_per_million_tokens_c{level}"][:2]]
        for level in ("1", "4", "16")
    }
    assert costs == {"1": [6.86, 3.67], "4": [1.82, 0.95], "16": [0.51, 0.29]}
    assert aba.names == ["gemma-4-e2b", "gemma-4-e2b-qat", "gemma-4-e2b-again"]
    assert aba.methods == ["article", "article", "article"]


def test_combine_pairs_the_answers_and_says_inconclusive(aba: Comparison) -> None:
    assert aba.identical_answers == "35/40"
    (check,) = aba.quality_checks
    assert check.verdict == "INCONCLUSIVE" and check.across_methods is None
    paired = check.paired
    assert paired is not None and paired.n == 40
    assert (paired.accuracy_a.correct, paired.accuracy_b.correct) == (37, 37)
    assert paired.flips.losses == ["add-7", "add-9"] and paired.flips.gains == ["add-4", "add-8"]
    assert paired.agreement.identical_replies == 35
    assert paired.noise is not None and paired.noise.agreement.identical_replies == 40


def test_the_a_a_prime_drift_is_within_1_21_percent_on_every_speed_figure(
    aba: Comparison,
) -> None:
    drift = aba.drift
    assert drift is not None and drift.identical_answers == "40/40"
    assert set(drift.relative_change) == set(SPEED_KEYS)
    changes = [abs(change) for change in drift.relative_change.values() if change is not None]
    assert len(changes) == len(SPEED_KEYS) and max(changes) <= 0.0121
    assert drift.max_abs_relative_change == pytest.approx(0.55 / 45.6)  # 1 at once: 1.21%


def test_intervals_come_from_the_batches_the_articles_way(aba: Comparison) -> None:
    """A level's figure is the median of its batch rates: the interval is theirs, not a pool's."""
    c16 = next(row for row in aba.rows if row.key == "load_c16_tokens_per_second")
    qat = c16.intervals[1]
    assert qat is not None and (qat.low, qat.high) == (1051.6, 1102.9)
    ratio = c16.ratio_intervals[0]
    assert ratio is not None and ratio.low is not None and ratio.high is not None
    assert ratio.low > 1.6 and ratio.high < 1.8
    assert c16.ratio_flags[0] is None  # far outside the 0.98% drift of this figure


@pytest.mark.slow
def test_combine_on_the_command_line(sagemeter_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    paths = [str(path) for path in _paths()]
    done = _sagemeter(["combine", str(out), *paths, "--price-per-hour", str(PRICE)], sagemeter_env)
    assert "method: article (every file)" in done.stdout
    assert "identical answers (gemma-4-e2b vs gemma-4-e2b-qat): 35/40" in done.stdout
    assert "largest speed drift 1.21%" in done.stdout
    assert "quality verdict, gemma-4-e2b-qat against gemma-4-e2b: INCONCLUSIVE" in done.stdout
    assert json.loads(out.read_text())["identical_answers"] == "35/40"


async def test_mcp_compare_results_reads_the_articles_files(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    for path in _paths():  # the server reads result files only by name from its folder
        shutil.copy(path, results / path.name)
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        found = await client.call_tool(
            "compare_results",
            {"results": [path.name for path in _paths()], "price_per_hour": PRICE},
        )
    answer = ok(found)
    assert answer["identical_answers"] == "35/40" and answer["methods"] == ["article"] * 3
    assert answer["quality_checks"][0]["verdict"] == "INCONCLUSIVE"
    assert answer["drift"]["identical_answers"] == "40/40"
    assert "decode_tokens_per_second" in text_of(found)


def test_the_report_names_the_method_and_the_articles_misses(tmp_path: Path) -> None:
    run = tmp_path / "article-run"
    run.mkdir()
    for path in _paths():
        shutil.copy(path, run / path.name)
    write_report(run, "md", price_per_hour=PRICE)
    sections = md_sections((run / "report.md").read_text(encoding="utf-8"))
    compared = sections["What was compared"]
    assert "gemma-4-e2b → gemma-4-e2b-qat → gemma-4-e2b-again" in compared
    method = rows_by_label(md_tables(compared)[0])["Method"]
    assert {c.text for c in method} == {"article (the article's own result file)"}
    assert "median of its batches' rates" in sections["Parallel requests"]
    quality = sections["Answer quality"]
    assert "scored by the article's rule" in quality and "INCONCLUSIVE" in quality
    assert "35/40 answers are identical" in quality
    assert "within 1.21% on every speed figure" in sections["Re-measured in A-B-A order"]
    assert "replies capped at 64 tokens" in sections["Scope"]


def _as_ours(result: MeasureResult, path: Path) -> Path:
    """The same figures and answers, labelled as measured by our method, in our own file shape."""
    assert result.detail is not None and result.detail.quality is not None
    settings = {**result.detail.settings, "method": "sagemeter", "scoring": "strict"}
    quality = result.detail.quality.model_copy(update={"scoring": "strict", "seed": 0})
    detail = result.detail.model_copy(
        update={"settings": settings, "quality": quality, "source_format": "sagemeter"}
    )
    save_result(result.model_copy(update={"detail": detail}), path)
    return path


def test_across_methods_every_difference_says_so(tmp_path: Path) -> None:
    ours = _as_ours(load_result(reference_file(BF16)), tmp_path / "measure-ours.json")
    comparison = combine([ours, reference_file(QAT)])
    assert comparison.methods == ["sagemeter", "article"]
    assert any("different methods" in warning for warning in comparison.warnings)
    assert any("quality scoring differs" in warning for warning in comparison.warnings)
    flags = {row.key: row.ratio_flags[0] for row in comparison.rows if row.ratio_flags}
    for key in SPEED_KEYS:
        assert flags[key] == "measured by different methods (sagemeter vs article)", key
    (check,) = comparison.quality_checks
    assert check.across_methods == "sagemeter vs article"


@pytest.mark.slow
def test_across_methods_on_the_command_line_and_in_the_report(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    run = tmp_path / "mixed"
    run.mkdir()
    ours = _as_ours(load_result(reference_file(BF16)), run / "measure-gemma-4-e2b.json")
    shutil.copy(reference_file(QAT), run / "measure-gemma-4-e2b-qat.json")
    qat = run / "measure-gemma-4-e2b-qat.json"
    done = _sagemeter(["combine", str(tmp_path / "c.json"), str(ours), str(qat)], sagemeter_env)
    assert "methods: [1] sagemeter, [2] article" in done.stdout
    assert "across methods (sagemeter vs article): INCONCLUSIVE compares answers" in done.stdout
    write_report(run, "md")
    sections = md_sections((run / "report.md").read_text(encoding="utf-8"))
    method = rows_by_label(md_tables(sections["What was compared"])[0])["Method"]
    assert [c.text for c in method] == ["sagemeter", "article (the article's own result file)"]
    decode = rows_by_label(md_tables(sections["Decode speed"])[0])["Decode (tokens/s)"]
    assert "measured by different methods" in decode[2].note
    assert "Across methods (sagemeter vs article)" in sections["Answer quality"]


def test_an_article_file_of_the_wrong_shape_is_one_error(tmp_path: Path) -> None:
    payload = json.loads(reference_file(QAT).read_text())
    del payload["settings"]
    bad = tmp_path / "measure-bad.json"
    bad.write_text(json.dumps(payload))
    with pytest.raises(UserError, match=r"measure-bad.json: settings: .*article's shape"):
        load_result(bad)


def test_answers_to_other_questions_fall_back_to_counts(tmp_path: Path) -> None:
    payload = json.loads(reference_file(QAT).read_text())
    payload["quality"]["answers"] = {"q1": "4", **payload["quality"]["answers"]}
    odd = tmp_path / "measure-odd.json"
    odd.write_text(json.dumps(payload))
    result = load_result(odd)
    assert result.detail is not None and result.detail.quality is None
    assert result.quality == "37/40"
    assert any("not article-40's (q1" in warning for warning in result.detail.warnings)


def test_the_flattened_reference_files_still_load_as_before() -> None:
    result = load_result(reference_file("measure-gemma-4-e2b-qat.json"))
    assert result.detail is None and result.decode_tokens_per_second == 105.1
