"""`combine`'s terminal table reads at 80 and 120 columns when piped: no file name split across
lines, no cell cut with an ellipsis, no line wider than the terminal.

Rich takes a piped console's width from COLUMNS, as `sagemeter combine | less` does; the table
is printed from two committed three-file runs (A, B, A again), the issue's worst case.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from sagemeter.compare import combine
from sagemeter.report.terminal import figure_label, print_comparison
from tests.conftest import REFERENCE_DIR
from tests.report_parse import FIXED_RUN

NAMES = ["smollm2-f32", "smollm2-q4_1", "smollm2-f32-again"]
ARTICLE_RUN = REFERENCE_DIR / "run"
ARTICLE_NAMES = ["gemma-4-e2b", "gemma-4-e2b-qat", "gemma-4-e2b-again"]


def _printed(
    columns: int, monkeypatch: pytest.MonkeyPatch, run: Path = FIXED_RUN, names: list[str] = NAMES
) -> tuple[str, list[str]]:
    monkeypatch.setenv("COLUMNS", str(columns))
    comparison = combine([run / f"measure-{name}.json" for name in names], price_per_hour=1.0)
    buffer = io.StringIO()
    console = Console(file=buffer, color_system=None)
    assert console.width == columns and not console.is_terminal
    print_comparison(console, comparison)
    keys = [row.key for row in comparison.rows]
    return buffer.getvalue(), keys


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize(("run", "names"), [(FIXED_RUN, NAMES), (ARTICLE_RUN, ARTICLE_NAMES)])
def test_the_table_reads_at_80_and_120_columns(
    columns: int, run: Path, names: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    printed, keys = _printed(columns, monkeypatch, run, names)
    lines = printed.splitlines()
    table = lines[: next(i for i, line in enumerate(lines) if line.startswith("method:"))]
    for number, name in enumerate(names, start=1):
        assert f"[{number}] {name}" in table  # a name whole, on its own line
    assert "…" not in "\n".join(table)
    assert max(len(line) for line in table) <= columns
    header = next(line for line in table if line.lstrip().startswith("figure"))
    assert header.split() == ["figure", "[1]", "[2]", "[3]", "[2]/[1]", "[3]/[1]"]
    narrow = columns == 80
    for key in keys:  # every figure on a row of its own, whole
        label = figure_label(key, narrow)
        assert any(line.lstrip().startswith(label + " ") for line in table), label


def test_each_interval_is_on_the_line_under_its_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    table = _printed(80, monkeypatch)[0].splitlines()
    decode = next(i for i, line in enumerate(table) if line.lstrip().startswith("decode tok/s"))
    assert table[decode].split()[-3:] == ["4.75", "*", "12.58"]
    assert table[decode + 1].split() == ["[2.71–7.30]", "[7.23–18.02]"]


def test_full_keys_where_they_fit_short_words_where_they_do_not() -> None:
    assert figure_label("decode_tokens_per_second", narrow=False) == "decode_tokens_per_second"
    assert figure_label("decode_tokens_per_second", narrow=True) == "decode tok/s"
    assert figure_label("usd_per_million_tokens_c16", narrow=True) == "USD/Mtok c16"
    assert figure_label("load_c4_tokens_per_second", narrow=True) == "c4 tok/s"


def test_a_label_no_short_word_shortens_wraps_and_never_cuts_a_value() -> None:
    """A figure a plug-in or a newer file adds may have a long key: at 80 columns its label
    wraps onto a second line, and every value and ratio still shows whole."""
    comparison = combine([FIXED_RUN / f"measure-{name}.json" for name in NAMES], price_per_hour=1.0)
    long_key = "a_figure_whose_long_name_no_short_word_shortens_at_all"
    comparison.rows.append(comparison.rows[0].model_copy(update={"key": long_key}))
    buffer = io.StringIO()
    print_comparison(Console(file=buffer, color_system=None, width=80), comparison)
    lines = buffer.getvalue().splitlines()
    table = lines[: next(i for i, line in enumerate(lines) if line.startswith("method:"))]
    assert "…" not in "\n".join(table) and max(len(line) for line in table) <= 80
    first = next(i for i, line in enumerate(table) if line.lstrip().startswith("a figure whose"))
    values = [value for value in table[first].split() if value[0].isdigit()]
    assert len(values) >= 3  # the row's values on the label's first line, whole
    words = " ".join(line.split("  ")[0].strip() for line in table[first : first + 3])
    assert "shortens" in words


def test_a_runs_time_order_decides_the_drift_when_start_times_cannot() -> None:
    """A run's journal knows the order it measured in; start times have whole seconds, so two
    files begun in one second look simultaneous. Given the order, A and A' measured after B give
    no drift, with the order in the note; measured first and last, they give it."""
    paths = [FIXED_RUN / f"measure-{name}.json" for name in NAMES]
    back_to_back = combine(paths, time_order=["smollm2-q4_1", "smollm2-f32", "smollm2-f32-again"])
    assert back_to_back.drift is None
    assert back_to_back.drift_note == (
        "no A-A' drift: smollm2-f32 and smollm2-f32-again were not measured first and last (in "
        "time: smollm2-q4_1, smollm2-f32, smollm2-f32-again), so their difference is not the "
        "drift across the run"
    )
    bracketing = combine(paths, time_order=NAMES)
    assert bracketing.drift is not None and bracketing.drift_note is None
