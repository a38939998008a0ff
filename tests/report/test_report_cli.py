"""`sagemeter report` as a user runs it: files written, `--compare` with its warning, bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sagemeter.errors import UserError
from sagemeter.report.runs import left_out_note, load_run
from tests import cli_run
from tests.conftest import reference_file
from tests.report_parse import FIXED_RUN, copy_run, md_sections, md_tables, parse_html


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`sagemeter ARGS` in this process (what it prints, its exit code and files)."""
    return cli_run.invoke(args, {**env, "COLUMNS": "200"}, cwd)


def article_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("measure-gemma-4-e2b.json", "measure-gemma-4-e2b-qat.json"):
        (folder / name).write_bytes(reference_file(name).read_bytes())
    return folder


@pytest.mark.slow
def test_report_writes_markdown_html_and_plots(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    folder = copy_run(FIXED_RUN, tmp_path / "run")
    done = run(["report", str(folder), "--format", "md,html"], sagemeter_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"wrote {folder / 'report.md'}" in done.stdout
    assert f"wrote {folder / 'report.html'}" in done.stdout
    assert not (folder / "plots").exists()  # png not asked for: none written, none linked
    assert "![" not in (folder / "report.md").read_text()
    assert len(parse_html((folder / "report.html").read_text()).images) == 4


@pytest.mark.slow
def test_price_per_hour_adds_the_cost_rows(sagemeter_env: dict[str, str], tmp_path: Path) -> None:
    folder = copy_run(FIXED_RUN, tmp_path / "run")
    done = run(
        ["report", str(folder), "--format", "md,png", "--price-per-hour", "0.25"],
        sagemeter_env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    price = md_sections((folder / "report.md").read_text())["Price/performance"]
    assert "$0.25 an hour" in price
    (table,) = md_tables(price)
    assert [row[0].text for row in table[1:]] == ["1", "4"]
    assert (folder / "plots" / "cost.png").is_file()


@pytest.mark.slow
def test_compare_two_runs_warns_when_methods_differ(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    local = copy_run(FIXED_RUN, tmp_path / "local-run")
    article = article_run(tmp_path / "article-run")
    out = tmp_path / "side-by-side"
    done = run(
        ["report", "--compare", str(local), str(article), "--out", str(out)],
        sagemeter_env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    text = (out / "report.md").read_text()
    sections = md_sections(text)
    assert list(sections) == ["The two runs", "Side by side", "Ratios as a shape", "Scope"]
    runs = sections["The two runs"]
    assert "Read the rows as a shape" in runs
    assert "article-run: the files do not record their settings" in runs
    side = md_tables(sections["Side by side"])[0]
    assert [c.text for c in side[0]] == [
        "",
        "local-run: smollm2-f32",
        "local-run: smollm2-q4_1",
        "local-run: last / first",
        "article-run: gemma-4-e2b-qat",
        "article-run: gemma-4-e2b",
        "article-run: last / first",
    ]
    shape = {row[0].text: row for row in md_tables(sections["Ratios as a shape"])[0][1:]}
    assert shape["Decode (tokens/s)"][2].text == f"{51.3 / 105.1:.2f}"
    html = parse_html((out / "report.html").read_text())
    assert html.headings == list(sections)
    assert len(html.images) >= 2
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["quality.png", "throughput.png"]


@pytest.mark.slow
def test_compare_names_each_setting_that_differs(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    first = copy_run(FIXED_RUN, tmp_path / "first")
    second = copy_run(FIXED_RUN, tmp_path / "second")
    for path in second.glob("measure-*.json"):
        payload = json.loads(path.read_text())
        payload["detail"]["settings"]["long_tokens"] = 512
        path.write_text(json.dumps(payload))
    done = run(["report", "--compare", str(first), str(second)], sagemeter_env, tmp_path)
    assert done.returncode == 0, done.stderr
    text = (first / "compare-second" / "report.md").read_text()
    assert "settings differ: long_tokens 24 vs 512" in text
    assert "Read the rows as a shape" in text
    same = run(
        ["report", "--compare", str(first), str(first), "--format", "md"], sagemeter_env, tmp_path
    )
    assert same.returncode == 0, same.stderr
    assert (
        "No difference of method or settings" in (first / "compare-first" / "report.md").read_text()
    )


@pytest.mark.parametrize(
    ("make", "args", "needle"),
    [
        (None, ["report", "missing"], "missing: no such folder"),
        ("empty", ["report", "empty"], "no result files"),
        ("broken", ["report", "broken"], "not valid JSON"),
        ("broken-compare", ["report", "broken-compare"], "compare.json: not valid JSON"),
        ("article", ["report", "article", "--format", "pdf"], "--format"),
        ("article", ["report", "article", "--price-per-hour", "-1"], "--price-per-hour"),
        ("article", ["report", "--compare", "article"], "--compare takes two run folders"),
        ("article", ["report", "article", "article"], "give one run folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    make: str | None, args: list[str], needle: str, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    if make == "empty":
        (tmp_path / "empty").mkdir()
    elif make == "broken":
        (tmp_path / "broken").mkdir()
        (tmp_path / "broken" / "measure-x.json").write_text("{not json")
    elif make == "broken-compare":
        article_run(tmp_path / "broken-compare")
        (tmp_path / "broken-compare" / "compare.json").write_text("[")
    elif make == "article":
        article_run(tmp_path / "article")
    done = run(args, sagemeter_env, tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and needle in lines[0]
    assert not list(tmp_path.rglob("report.*"))


@pytest.mark.slow
def test_report_follows_compare_json_and_leaves_out_other_measure_files(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    """compare.json names the run's files: a stray measure-*.json in the folder is left out,
    and the command and the report say so in one line each."""
    folder = copy_run(FIXED_RUN, tmp_path / "run")
    stray = "measure-gemma-4-e2b.json"
    (folder / stray).write_bytes(reference_file(stray).read_bytes())
    done = run(["report", str(folder), "--format", "md"], sagemeter_env, tmp_path)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stdout.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and f"left out {stray}: compare.json names" in notes[0], done.stdout
    compared = md_sections((folder / "report.md").read_text())["What was compared"]
    assert "smollm2-f32 → smollm2-q4_1 → smollm2-f32-again." in compared
    assert f"Left out {stray}" in compared


def test_the_run_is_compare_json_s_files_in_its_order(tmp_path: Path) -> None:
    """What `report`, `demo` and `run_experiment` read: compare.json's files and only those,
    in its order; one it names that is gone is one line. (One named file: no comparison to
    compute, so the test stays fast.)"""
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("measure-smollm2-f32.json", "measure-smollm2-q4_1.json"):
        (folder / name).write_bytes((FIXED_RUN / name).read_bytes())
    (folder / "compare.json").write_text(json.dumps({"files": ["measure-smollm2-q4_1.json"]}))
    named = load_run(folder)
    assert [path.name for path in named.paths] == ["measure-smollm2-q4_1.json"]
    assert named.order_source == "compare.json" and named.comparison is None
    assert named.left_out == ["measure-smollm2-f32.json"]
    note = left_out_note(named) or ""
    assert note.startswith("left out measure-smollm2-f32.json: compare.json names"), note

    (folder / "measure-smollm2-q4_1.json").unlink()
    with pytest.raises(UserError, match=r"compare\.json: names measure-smollm2-q4_1\.json, which"):
        load_run(folder)
