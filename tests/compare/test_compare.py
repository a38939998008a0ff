"""`combine`: the article's ratio column and costs from its own result files, and bad files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sagemeter.compare import combine
from sagemeter.errors import UserError
from tests.conftest import reference_file
from tests.report_parse import FIXED_RUN, copy_run, mark_incomplete

BF16 = "measure-gemma-4-e2b.json"
QAT = "measure-gemma-4-e2b-qat.json"


def _rows(comparison):  # type: ignore[no-untyped-def]
    return {row.key: row for row in comparison.rows}


def test_reference_files_reproduce_the_article_ratio_column() -> None:
    comparison = combine([reference_file(BF16), reference_file(QAT)], price_per_hour=1.1267)
    rows = _rows(comparison)
    expected = {
        "weights_gib": 0.82,
        "kv_cache_tokens": 1.2,
        "decode_tokens_per_second": 2.05,
        "load_c1_tokens_per_second": 1.87,
        "load_c4_tokens_per_second": 1.92,
        "load_c16_tokens_per_second": 1.74,
        "quality_correct": 1.0,
    }
    for key, ratio in expected.items():
        assert round(rows[key].ratios[0], 2) == ratio, key
    assert comparison.names == ["gemma-4-e2b", "gemma-4-e2b-qat"]


def test_reference_files_reproduce_the_article_costs() -> None:
    rows = _rows(combine([reference_file(BF16), reference_file(QAT)], price_per_hour=1.1267))
    costs = {
        level: [round(value, 2) for value in rows[f"usd_per_million_tokens_c{level}"].values]
        for level in ("1", "4", "16")
    }
    assert costs == {"1": [6.86, 3.67], "4": [1.82, 0.95], "16": [0.51, 0.29]}


def test_no_cost_rows_without_a_price() -> None:
    rows = _rows(combine([reference_file(BF16), reference_file(QAT)]))
    assert not any(key.startswith("usd_") for key in rows)


def test_minimal_files_have_no_identical_answer_count() -> None:
    comparison = combine([reference_file(BF16), reference_file(QAT)])
    assert comparison.identical_answers is None
    assert comparison.drift is None


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"quality": "3/4"}', "not a sagemeter result"),
        ('{"decode_tokens_per_second": "fast"}', "decode_tokens_per_second"),
        ('{"decode_tokens_per_second": 5, "quality": "five"}', "not of the form"),
        ('{"decode_tokens_per_second": 5, "quality": "9/4"}', "more correct answers"),
    ],
)
def test_bad_files_get_one_line_naming_the_file(tmp_path: Path, content: str, needle: str) -> None:
    bad = tmp_path / "measure-bad.json"
    bad.write_text(content)
    with pytest.raises(UserError) as caught:
        combine([reference_file(BF16), bad])
    message = str(caught.value)
    assert str(bad) in message
    assert needle in message
    assert "\n" not in message


def test_missing_file_and_too_few_files(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        combine([reference_file(BF16), tmp_path / "missing.json"])
    with pytest.raises(UserError, match="at least two"):
        combine([reference_file(BF16)])
    with pytest.raises(UserError, match="positive"):
        combine([reference_file(BF16), reference_file(QAT)], price_per_hour=0)


def test_different_question_counts_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "measure-other.json"
    payload = json.loads(reference_file(QAT).read_text())
    payload["quality"] = "20/50"
    other.write_text(json.dumps(payload))
    with pytest.raises(UserError, match="different number of questions"):
        combine([reference_file(BF16), other])


def test_an_incomplete_result_is_named_with_what_it_misses(tmp_path: Path) -> None:
    from rich.console import Console

    from sagemeter.report.terminal import print_comparison

    run = copy_run(FIXED_RUN, tmp_path / "run")
    missing = "16 at once: no figure: 0 of 2 batches complete after 4 tries; last reason: [x]"
    mark_incomplete(run / "measure-smollm2-q4_1.json", [missing, "quality: 2 of 40 unanswered"])
    names = ["smollm2-f32", "smollm2-q4_1", "smollm2-f32-again"]
    comparison = combine([run / f"measure-{name}.json" for name in names])
    note = (
        f"smollm2-q4_1 is incomplete, a figure it asked for is missing: {missing}; "
        "quality: 2 of 40 unanswered"
    )
    assert comparison.incomplete == [None, note, None]
    assert comparison.warnings[0] == note
    buffer = io.StringIO()
    print_comparison(Console(file=buffer, width=250, color_system=None), comparison)
    printed = buffer.getvalue()
    assert "[2] smollm2-q4_1 (incomplete)" in printed
    assert "[1] smollm2-f32 (incomplete)" not in printed
    assert f"warning: {note}" in printed  # markup-like text ([x]) is printed as it is


def test_a_level_without_a_figure_is_null_in_its_rows_and_a_schema_1_file_still_loads(
    tmp_path: Path,
) -> None:
    run = copy_run(FIXED_RUN, tmp_path / "run")
    edited = run / "measure-smollm2-q4_1.json"
    payload = json.loads(edited.read_text())
    assert payload["detail"]["schema_version"] == 1  # the fixed run is of schema 1
    payload["load_tokens_per_second"]["4"] = None  # asked for, no figure
    edited.write_text(json.dumps(payload))
    names = ["smollm2-f32", "smollm2-q4_1", "smollm2-f32-again"]
    comparison = combine([run / f"measure-{name}.json" for name in names], price_per_hour=1.0)
    rows = _rows(comparison)
    for key in ("load_c4_tokens_per_second", "usd_per_million_tokens_c4"):
        first, missing, again = rows[key].values
        assert first is not None and again is not None and missing is None, key
        assert rows[key].ratios[0] is None, key
    assert rows["load_c1_tokens_per_second"].values[1] == payload["load_tokens_per_second"]["1"]
