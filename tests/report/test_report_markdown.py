"""report.md of fixed result files: every section in the article's order, every table's cells.

The fixed run (tests/data/report-run) is a real `sagemeter demo --quick` A-B-A run; the article's
own minimal files (examples/article-gemma-4-e2b-l4) check the n/a paths and the price arithmetic.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from sagemeter.compare import combine, save_comparison
from sagemeter.report.answers import which_one_section
from sagemeter.report.document import Cell, Table
from sagemeter.report.figures import num
from sagemeter.report.runs import Run, load_run
from sagemeter.report.writer import write_report
from sagemeter.results import MeasureResult, load_result
from tests.conftest import reference_file
from tests.report_parse import (
    FIXED_RUN,
    SECTION_TITLES,
    copy_run,
    mark_incomplete,
    md_callouts,
    md_images,
    md_sections,
    md_tables,
    md_title,
    rows_by_label,
)

NAMES = ["smollm2-f32", "smollm2-q4_1", "smollm2-f32-again"]
NUMBER = r"-?[\d.,]+"
SPREAD = re.compile(
    rf"min {NUMBER} · median {NUMBER} · (p90 {NUMBER} · p99 {NUMBER} · )?max {NUMBER} \(n=\d+\)"
    r"|n=1: no spread"
)


@pytest.fixture(scope="module")
def fixed_results() -> dict[str, MeasureResult]:
    return {name: load_result(FIXED_RUN / f"measure-{name}.json") for name in NAMES}


@pytest.fixture(scope="module")
def fixed_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], str]:
    run = copy_run(FIXED_RUN, tmp_path_factory.mktemp("md") / "run")
    written = write_report(run)
    return run, written, (run / "report.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def article_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The article's two files, combined in its order (bf16 first) at its price, then reported."""
    run = tmp_path_factory.mktemp("article") / "run"
    run.mkdir()
    names = ["measure-gemma-4-e2b.json", "measure-gemma-4-e2b-qat.json"]
    for name in names:
        shutil.copy(reference_file(name), run / name)
    save_comparison(
        combine([run / name for name in names], price_per_hour=1.1267), run / "compare.json"
    )
    write_report(run, "md")
    return (run / "report.md").read_text(encoding="utf-8")


def test_sections_come_in_the_articles_order(fixed_report: tuple[Path, list[Path], str]) -> None:
    _, _, text = fixed_report
    assert md_title(text) == "sagemeter report: smollm2-f32 vs smollm2-q4_1"
    assert list(md_sections(text)) == SECTION_TITLES


def test_every_format_was_written_and_every_plot_is_linked(
    fixed_report: tuple[Path, list[Path], str],
) -> None:
    run, written, text = fixed_report
    names = sorted(path.relative_to(run).as_posix() for path in written)
    assert names == [
        "plots/decode_fit.png",
        "plots/latency.png",
        "plots/quality.png",
        "plots/throughput.png",
        "report.html",
        "report.md",
    ]
    assert sorted(md_images(text)) == [n for n in names if n.endswith(".png")]
    assert not list(run.rglob("*.part"))  # atomic writes leave no temp files behind


def test_what_was_compared_names_engine_hardware_dates_and_order(
    fixed_report: tuple[Path, list[Path], str], fixed_results: dict[str, MeasureResult]
) -> None:
    body = md_sections(fixed_report[2])["What was compared"]
    assert "smollm2-f32 → smollm2-q4_1 → smollm2-f32-again" in body
    (table,) = md_tables(body)
    assert [c.text for c in table[0][1:]] == [f"{i}. {n}" for i, n in enumerate(NAMES, 1)]
    rows = rows_by_label(table)
    for index, name in enumerate(NAMES):
        env = fixed_results[name].detail.environment  # type: ignore[union-attr]
        assert rows["Engine"][index].text == env.engine
        assert rows["Engine version"][index].text == env.engine_version
        assert rows["Started (UTC)"][index].text == env.started_utc
        assert rows["Checkpoint SHA-256"][index].text == env.checkpoint_sha256[:12]  # type: ignore[index]
        assert rows["Region"][index].text == "this machine (local)"
        assert rows["Measured from (CPU, cores)"][index].text.endswith(f"{env.host_cores} cores")


def test_startup_facts_with_ratio(
    fixed_report: tuple[Path, list[Path], str], fixed_results: dict[str, MeasureResult]
) -> None:
    body = md_sections(fixed_report[2])["Start-up facts"]
    table = md_tables(body)[0]
    assert [c.text for c in table[0][1:]] == [*NAMES, "smollm2-q4_1 / smollm2-f32"]
    weights = rows_by_label(table)["Weights (GiB)"]
    a, b = fixed_results["smollm2-f32"].weights_gib, fixed_results["smollm2-q4_1"].weights_gib
    assert [c.text for c in weights[:3]] == [num(fixed_results[n].weights_gib) for n in NAMES]
    assert weights[3].text == f"{b / a:.2f}"  # type: ignore[operator]
    assert "model buffer size" in body  # the engine's own log lines are quoted


def test_decode_table_gives_every_figure_with_its_spread(
    fixed_report: tuple[Path, list[Path], str], fixed_results: dict[str, MeasureResult]
) -> None:
    body = md_sections(fixed_report[2])["Decode speed"]
    table = md_tables(body)[0]
    rows = rows_by_label(table)
    decode = fixed_results["smollm2-f32"].detail.decode  # type: ignore[union-attr]
    assert decode is not None
    long_row = f"{decode.long_tokens}-token reply"
    assert rows[f"{long_row}, fastest (s)"][0].value == num(min(decode.long_times_s))
    assert rows[f"{long_row}, slowest (s)"][0].value == num(max(decode.long_times_s))
    assert rows["Decode (tokens/s)"][0].value == num(decode.tokens_per_second)
    assert "least squares" in rows["Decode (tokens/s)"][0].note
    for title in ("Time to first token, median (ms)", "Inter-token latency, median (ms)"):
        for cell in rows[title][:2]:
            assert SPREAD.fullmatch(cell.note), cell.note
    assert re.search(r"decodes [\d.]+× faster", body)


def test_parallel_table_per_level_with_batches(
    fixed_report: tuple[Path, list[Path], str], fixed_results: dict[str, MeasureResult]
) -> None:
    body = md_sections(fixed_report[2])["Parallel requests"]
    throughput, latency = md_tables(body)
    rows = rows_by_label(throughput)
    levels = list(fixed_results["smollm2-f32"].load_tokens_per_second)
    assert list(rows) == levels
    for level in levels:
        values = [fixed_results[n].load_tokens_per_second[level] for n in NAMES[:2]]
        assert [c.value for c in rows[level][:2]] == [num(v) for v in values]
        assert all(SPREAD.fullmatch(c.note.removeprefix("batches: ")) for c in rows[level][:2])
        assert rows[level][2].text == f"{values[1] / values[0]:.2f}"
    assert [c.text for c in latency[0]][1] == "smollm2-f32 TTFT ms"
    assert list(rows_by_label(latency)) == levels


def test_quality_per_family_with_intervals_and_misses_side_by_side(
    fixed_report: tuple[Path, list[Path], str], fixed_results: dict[str, MeasureResult]
) -> None:
    body = md_sections(fixed_report[2])["Answer quality"]
    families, paired, by_family, misses = md_tables(body)
    # The verdict at the declared margin, its paired figures and its per-family table.
    assert re.search(r"Verdict for smollm2-q4_1 against smollm2-f32 at a 2-point margin", body)
    assert {"Questions to decide", "Flips", "Identical replies"} <= set(rows_by_label(paired))
    assert [c.text for c in by_family[0]] == [
        "Family",
        "Questions",
        "smollm2-f32",
        "smollm2-q4_1",
        "Lost",
        "Gained",
    ]
    quality = fixed_results["smollm2-f32"].detail.quality  # type: ignore[union-attr]
    assert quality is not None
    rows = rows_by_label(families)
    for family, counts in quality.by_family.items():
        cell = rows[f"{family} ({counts['total']})"][0]
        assert cell.text == f"{counts['correct']} / {counts['total']}"
        assert re.fullmatch(r"95% CI \d+%–\d+%", cell.note)
    assert rows[f"Total ({quality.total})"][0].text == f"{quality.correct} / {quality.total}"
    assert [c.text for c in misses[0]] == ["Question", "Expected", "smollm2-f32", "smollm2-q4_1"]
    by_prompt = {item.prompt: item for item in quality.items}
    missed = [item for item in quality.items if not item.correct]
    assert len(misses) - 1 >= len(missed)
    for row in misses[1:]:
        item = by_prompt[row[0].text]
        assert row[1].text == item.expected
        assert row[2].text.startswith("✅" if item.correct else "❌")
        assert row[3].text[0] in "✅❌"
    assert "identical character for character" in body


def test_aba_section_prints_drift(
    fixed_report: tuple[Path, list[Path], str], fixed_results: dict[str, MeasureResult]
) -> None:
    body = md_sections(fixed_report[2])["Re-measured in A-B-A order"]
    runs, drift = md_tables(body)
    assert [row[0].text for row in runs[1:]] == NAMES
    comparison = json.loads((FIXED_RUN / "compare.json").read_text())
    changes = comparison["drift"]["relative_change"]
    rows = rows_by_label(drift)
    assert rows["Decode (tokens/s)"][2].text == f"{changes['decode_tokens_per_second']:+.2%}"
    assert "identical" in body


def test_price_section_says_how_to_get_a_price_when_none_is_known(
    fixed_report: tuple[Path, list[Path], str],
) -> None:
    body = md_sections(fixed_report[2])["Price/performance"]
    assert "No price known" in body and "--price-per-hour" in body
    assert not md_tables(body)


def test_which_one_marks_the_winner_of_each_row(
    fixed_report: tuple[Path, list[Path], str], fixed_results: dict[str, MeasureResult]
) -> None:
    body = md_sections(fixed_report[2])["So, which one?"]
    (table,) = md_tables(body)
    assert [c.text for c in table[0]] == ["", "smollm2-f32", "smollm2-q4_1", "why"]
    rows = rows_by_label(table)
    assert {"Decode speed", "Memory for weights", "Checked answers"} <= set(rows)
    memory = rows["Memory for weights"]
    assert not memory[0].best and memory[1].best  # 4-bit storage is smaller, whatever the drift
    assert memory[1].value == f"{num(fixed_results['smollm2-q4_1'].weights_gib)} GiB"
    for row in rows.values():
        marked = [c for c in row[:2] if c.best]
        assert len(marked) <= 1
        if not marked:
            assert row[2].text  # a row without a winner says why
    assert re.search(r"wins \d+ of \d+ rows", body)


def test_which_one_crowns_no_row_whose_ratio_the_comparison_calls_no_change(
    tmp_path: Path,
) -> None:
    """The terminal table marks a ratio `*` when its interval reaches 1 or the A-A' band; the
    report never crowns that row, and gives the comparison's reason. Two files, no A′ (so the
    drift rule alone would crown decode), the comparison's decode ratio flagged."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    names = ["smollm2-f32", "smollm2-q4_1"]
    for name in names:
        shutil.copy(FIXED_RUN / f"measure-{name}.json", run_dir)
    run = load_run(run_dir)
    crowned = _which_rows(run)["Decode speed"]
    assert crowned[1].best  # no flag: the faster one wins
    comparison = combine([run_dir / f"measure-{name}.json" for name in names])
    decode = next(row for row in comparison.rows if row.key == "decode_tokens_per_second")
    decode.ratio_flags = ["its interval reaches 1 (0.91–1.40)"]
    run.comparison = comparison
    flagged = _which_rows(run)["Decode speed"]
    assert not any(c.best for c in flagged[:2])
    assert flagged[2].text == "no win: its interval reaches 1 (0.91–1.40)"


def _which_rows(run: Run) -> dict[str, list[Cell]]:
    section = which_one_section(run)
    table = next(block for block in section.blocks if isinstance(block, Table))
    return {row[0].text: row[1:] for row in table.rows}


def test_scope_gives_repeat_counts_and_what_was_not_measured(
    fixed_report: tuple[Path, list[Path], str], fixed_results: dict[str, MeasureResult]
) -> None:
    body = md_sections(fixed_report[2])["Scope"]
    settings = fixed_results["smollm2-f32"].detail.settings  # type: ignore[union-attr]
    assert f"Decode: {settings['decode_repeats']} replies of each length" in body
    assert f"{settings['load_batches']} batch(es) per level" in body
    assert "long-prompt behaviour" in body
    assert "What was not:" in body


def test_the_articles_minimal_files_say_na_and_reproduce_its_price_table(
    article_report: str,
) -> None:
    sections = md_sections(article_report)
    assert list(sections) == SECTION_TITLES
    compared = sections["What was compared"]
    assert "gemma-4-e2b → gemma-4-e2b-qat" in compared
    assert "minimal keys only" in compared
    engine = rows_by_label(md_tables(compared)[0])["Engine"]
    assert [c.text for c in engine] == ["n/a", "n/a"]
    decode = rows_by_label(md_tables(sections["Decode speed"])[0])
    assert decode["Decode (tokens/s)"][1].best and decode["Decode (tokens/s)"][1].value == "105.1"
    assert decode["Decode (tokens/s)"][2].text == "2.05"
    assert decode["Long reply, fastest (s)"][0].text == "n/a"
    parallel = rows_by_label(md_tables(sections["Parallel requests"])[0])
    assert [parallel[lv][2].text for lv in ("1", "4", "16")] == ["1.87", "1.92", "1.74"]
    assert "n/a (these files hold totals" in sections["Answer quality"]
    assert "Not measured" in sections["Re-measured in A-B-A order"]
    price = rows_by_label(md_tables(sections["Price/performance"])[0])
    assert [[c.value for c in price[lv][:2]] for lv in ("1", "4", "16")] == [
        ["6.86", "3.67"],
        ["1.82", "0.95"],
        ["0.51", "0.29"],
    ]
    assert "$1.1267 an hour" in sections["Price/performance"]
    which = rows_by_label(md_tables(sections["So, which one?"])[0])
    assert which["Decode speed"][1].best and which["Decode speed"][1].value == "105.1 tokens/s"
    assert which["16 requests at once"][1].value == "1077.25 tokens/s"
    assert which["Memory for weights"][1].best
    assert not any(c.best for c in which["Checked answers"][:2])
    assert which["Checked answers"][2].text == "same count"
    assert which["Cost per million tokens at 16"][1].value == "$0.29"
    assert "Repeat counts: n/a" in sections["Scope"]


def test_without_a_re_measure_speed_rows_have_winners_and_the_order_comes_from_start_times(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("smollm2-q4_1", "smollm2-f32"):  # no compare.json, no A′
        shutil.copy(FIXED_RUN / f"measure-{name}.json", run)
    write_report(run, "md")
    sections = md_sections((run / "report.md").read_text())
    assert "(by start time): smollm2-f32 → smollm2-q4_1." in sections["What was compared"]
    which = rows_by_label(md_tables(sections["So, which one?"])[0])
    assert which["Decode speed"][1].best and not which["Decode speed"][0].best
    assert "Drift between runs (A-B-A order) was not measured." in sections["Scope"]


@pytest.mark.parametrize(
    ("values", "higher", "noise", "marks", "why"),
    [
        ([10.0, 20.0], True, None, [False, True], ""),
        ([10.0, 20.0], False, None, [True, False], ""),
        ([10.0, 10.5], True, 0.06, [False, False], "within the A–A′ drift (6.0%)"),
        ([10.0, 10.7], True, 0.06, [False, True], ""),
        ([10.0, 10.0], True, None, [False, False], "tie"),
        ([None, 10.0], True, None, [False, False], ""),
    ],
)
def test_a_win_smaller_than_the_drift_is_no_win(
    values: list[float | None], higher: bool, noise: float | None, marks: list[bool], why: str
) -> None:
    from sagemeter.report.figures import pick_best

    assert pick_best(values, higher=higher, noise=noise) == (marks, why)


def test_a_figure_from_an_incomplete_file_is_never_crowned(tmp_path: Path) -> None:
    """smollm2-q4_1 wins every speed row of the committed run; marked incomplete (a level stayed
    stalled), none of its figures gets the medal, and the row says why. The complete file's
    figures are still crowned where they win."""
    from sagemeter.report.figures import pick_best

    why = "the best figure's file is incomplete"
    assert pick_best([10.0, 20.0], higher=True, incomplete=[False, True]) == ([False, False], why)
    assert pick_best([10.0, 20.0], higher=False, incomplete=[False, True]) == ([True, False], "")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("smollm2-q4_1", "smollm2-f32"):
        shutil.copy(FIXED_RUN / f"measure-{name}.json", run)
    mark_incomplete(run / "measure-smollm2-q4_1.json", [MISSING])
    write_report(run, "md")
    text = (run / "report.md").read_text(encoding="utf-8")
    sections = md_sections(text)
    which = rows_by_label(md_tables(sections["So, which one?"])[0])
    assert not which["Decode speed"][1].best and not which["Decode speed"][0].best
    assert why in " ".join(cell.text for cell in which["Decode speed"])
    for title in ("Decode speed", "Parallel requests"):
        for table in md_tables(sections[title]):
            for cells in table[1:]:
                assert len(cells) < 3 or not cells[2].best, (title, cells[0].text)  # q4_1
    assert not any(cell.best for cells in which.values() for cell in cells[1:2])


def test_a_decode_note_beside_a_valid_rate_is_a_note_not_a_lost_rate(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("smollm2-f32", "smollm2-q4_1"):
        result = load_result(FIXED_RUN / f"measure-{name}.json")
        assert result.detail is not None and result.detail.decode is not None
        decode = result.detail.decode
        if name == "smollm2-q4_1":
            decode.problems = ["no per-call fixed cost: the two lengths put it at -3.6 ms"]
        else:
            decode.valid = False
            decode.problems = ["no decode rate: 2 short and 5 long replies were complete"]
        (run / f"measure-{name}.json").write_text(result.model_dump_json(), encoding="utf-8")
    write_report(run, "md")
    speed = md_sections((run / "report.md").read_text())["Decode speed"]
    assert "smollm2-q4_1, decode: no per-call fixed cost" in speed
    assert "smollm2-q4_1: decode gave no trustworthy rate" not in speed
    assert "smollm2-f32: decode gave no trustworthy rate (no decode rate: 2 short" in speed


MISSING = "4 at once: no figure: 0 of 2 batches complete after 4 tries; last reason: HTTP 503"


def test_an_incomplete_result_gets_a_warning_naming_it_and_what_is_missing(
    tmp_path: Path,
) -> None:
    run = copy_run(FIXED_RUN, tmp_path / "run")
    mark_incomplete(run / "measure-smollm2-q4_1.json", [MISSING])
    write_report(run, "md")
    compared = md_sections((run / "report.md").read_text(encoding="utf-8"))["What was compared"]
    callouts = md_callouts(compared)
    assert callouts[0] == (
        f"smollm2-q4_1 is incomplete, a figure it asked for is missing: {MISSING}"
    )
    assert not any("smollm2-f32" in text and "incomplete" in text for text in callouts)


def test_a_lone_incomplete_result_without_a_reason_is_still_called_incomplete(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(FIXED_RUN / "measure-smollm2-f32.json", run)  # one file: no comparison
    mark_incomplete(run / "measure-smollm2-f32.json", [])
    write_report(run, "md")
    compared = md_sections((run / "report.md").read_text(encoding="utf-8"))["What was compared"]
    assert md_callouts(compared) == [
        "smollm2-f32 is incomplete, a figure it asked for is missing: the file does not say "
        "which figure"
    ]
