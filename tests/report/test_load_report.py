"""`sagemeter report` of `sagemeter load` results and `load --csv`, through the real CLI against
the known-truth server: the report's tables and the CSV's rows are read back and checked against
the result files' own figures and raw records, and against the server's known timing."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from tests import cli_run
from tests.report_parse import md_images, md_sections, md_tables, parse_html, png_size

# Its runs are real `sagemeter load` runs that must be valid: a client starved by other tests'
# workers is (rightly) refused, so these run with the CPU to themselves. Slow: the runs take
# about 11 s, and the browser test (slow) shares the raw run, made once in the slow tier.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

TIMING = TruthTiming(ttft_s=0.05, itl_s=0.005)
TOKENS = 16
STREAMS = 4
SLOT_TIMING = TruthTiming(ttft_s=0.02, itl_s=0.005)
LAYOUT = """JSON.stringify({
  viewport: window.innerWidth,
  pageWidth: document.documentElement.scrollWidth,
  tables: [...document.querySelectorAll('table')].map(t => ({
    scrolls: getComputedStyle(t.parentElement).overflowX})),
  images: [...document.images].map(i => ({complete: i.complete, natural: i.naturalWidth,
    naturalH: i.naturalHeight, w: i.getBoundingClientRect().width})),
  sections: [...document.querySelectorAll('section')].map(s => s.id),
})"""


def sagemeter(
    args: list[str], env: dict[str, str], cwd: Path, *, real_process: bool = False
) -> tuple[int, str, str]:
    """`sagemeter ARGS` in this process, or as its own process (the load runs that must be valid:
    their client must not lag)."""
    run_cli = cli_run.run if real_process else cli_run.invoke
    done = run_cli(args, {**env, "COLUMNS": "200", "SAGEMETER_PROGRESS": "0"}, cwd)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def raw_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A real closed-loop load result with --raw (raw.json): all the browser test needs, so the
    slow tier, which runs that test alone from this file, makes no other run."""
    folder = tmp_path_factory.mktemp("load-runs")
    env = {**os.environ, "SAGEMETER_HOME": str(folder / "home")}
    with running_truth_server(TIMING) as url:
        code, _, err = sagemeter(
            [
                "load",
                url,
                f"--concurrency={STREAMS}",
                f"--max-tokens={TOKENS}",
                "--duration=1s",
                "--workers=1",
                "--raw",
                "--out=raw.json",
                "--csv=raw.csv",
            ],
            env,
            folder,
            real_process=True,
        )
        assert code == 0, err
    return folder, env


@pytest.fixture(scope="module")
def runs(raw_run: tuple[Path, dict[str, str]]) -> Iterator[tuple[Path, dict[str, str]]]:
    """Three real load results: the raw closed-loop run, a sweep with --raw, and an
    operating-point search against a server of two slots (its result carries percentiles only)."""
    folder, env = raw_run
    with running_truth_server(TIMING) as url:
        code, _, err = sagemeter(
            [
                "load",
                url,
                f"--concurrency={STREAMS}",
                f"--max-tokens={TOKENS}",
                "--duration=0.6s",
                "--workers=1",
                "--sweep",
                "--raw",
                "--out=sweep.json",
                "--csv=sweep.csv",
            ],
            env,
            folder,
            real_process=True,
        )
        assert code == 0, err
    with running_truth_server(SLOT_TIMING, slots=2) as url:
        code, _, err = sagemeter(
            [
                "load",
                url,
                "--search=concurrency",
                "--slo-ttft=35ms",
                "--slo-percentile=90",
                "--max-tokens=8",
                "--concurrency=8",
                "--duration=0.3s",
                "--workers=1",
                "--price-per-hour=3.6",
                "--out=point.json",
                "--csv=point.csv",
            ],
            env,
            folder,
            real_process=True,
        )
        assert code == 0, err
    yield folder, env


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def test_a_raw_run_reports_its_figures_its_cdfs_and_its_timeline(
    runs: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    source, env = runs
    shutil.copy(source / "raw.json", tmp_path / "raw.json")
    code, out, err = sagemeter(["report", "raw.json"], env, tmp_path)
    assert code == 0, err
    assert "wrote raw-report.md" in out
    result = json.loads((tmp_path / "raw.json").read_text())
    text = (tmp_path / "raw-report.md").read_text()
    sections = md_sections(text)
    assert list(sections) == ["The runs", "Throughput against load", "Latency", "Timeline"]

    (throughput,) = md_tables(sections["Throughput against load"])
    assert [c.text for c in throughput[0][:4]] == ["run", "load", "output tokens/s", "TTFT (ms)"]
    (row,) = throughput[1:]
    assert row[1].value == f"{STREAMS} at once"
    assert row[2].value == f"{result['output_tokens_per_second']:.1f}"
    assert row[3].value == ms(result["ttft_s"]["median"])
    assert row[4].value == ms(result["tpot_s"]["median"])
    # The truth server's own pace: 4 streams of 16 tokens, each 50 ms + 15 × 5 ms.
    truth = TIMING.tokens_per_second(STREAMS, TOKENS)
    assert float(row[2].value) == pytest.approx(truth, rel=0.1)

    # The CDFs come from the raw records, over the same requests as the result's figures.
    (latency,) = md_tables(sections["Latency"])
    by_metric = {r[1].value: r for r in latency[1:]}
    assert set(by_metric) == {"TTFT", "TPOT", "ITL", "end-to-end"}
    assert all(r[7].value == "raw records" for r in latency[1:])
    for metric, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("ITL", "itl_s")):
        cells = by_metric[metric]
        assert int(cells[2].value) == result[key]["n"]
        assert cells[3].value == ms(result[key]["median"])
        assert cells[5].value == ms(result[key]["p99"])
    assert float(by_metric["TTFT"][3].value) == pytest.approx(50.0, abs=10)
    e2e_truth_ms = (TIMING.ttft_s + (TOKENS - 1) * TIMING.itl_s) * 1000
    assert float(by_metric["end-to-end"][3].value) == pytest.approx(e2e_truth_ms, abs=25)

    timeline = sections["Timeline"]
    assert f"at most {STREAMS} requests in flight" in timeline
    assert f"{result['requests_completed']} ended well and 0 failed" in timeline
    images = md_images(text)
    assert images == [
        "raw-plots/load_throughput.png",
        "raw-plots/load_latency_cdf.png",
        "raw-plots/load_timeline_0.png",
    ]
    for image in images:
        assert png_size((tmp_path / image).read_bytes()) == (1200, 675)

    page = parse_html((tmp_path / "raw-report.html").read_text())
    assert page.sections == ["runs", "throughput", "latency", "timeline"]
    assert all(
        url.startswith("data:image/png;base64,")
        for url in page.urls
        if "://" in url or url.startswith("data:")
    )
    assert len(page.images) == 3
    html_row = next(t for t in page.tables if t.section == "throughput").rows[1]
    assert html_row[2] == row[2].value


def test_a_sweep_reports_every_level_and_writes_every_levels_requests(
    runs: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    source, env = runs
    shutil.copy(source / "sweep.json", tmp_path / "sweep.json")
    code, _, err = sagemeter(["report", "sweep.json", "--format=md"], env, tmp_path)
    assert code == 0, err
    result = json.loads((tmp_path / "sweep.json").read_text())
    levels = result["levels"]
    asked = [level["asked_concurrency"] for level in levels]
    # 1, 2, 4 at once; a busy host can make the sweep find its knee (or a level the client could
    # not measure) a level early, which the result says: the report must show what was run.
    assert asked == [1, 2, 4][: len(asked)] and len(asked) >= 2, asked
    assert len(asked) == 3 or result["knee"]["reason"], result["knee"]
    sections = md_sections((tmp_path / "sweep-report.md").read_text())
    (throughput,) = md_tables(sections["Throughput against load"])
    assert len(throughput) - 1 == len(levels)
    for row, level in zip(throughput[1:], levels, strict=True):
        assert row[1].value == f"{level['asked_concurrency']} at once"
        assert row[2].value == f"{level['output_tokens_per_second']:.1f}"
        assert row[3].value == ms(level["ttft_s"]["median"])
        truth = TIMING.tokens_per_second(level["asked_concurrency"], TOKENS)
        assert float(row[2].value) == pytest.approx(truth, rel=0.1)
    (latency,) = md_tables(sections["Latency"])
    ttft = {r[0].value: r for r in latency[1:] if r[1].value == "TTFT"}
    assert sorted(ttft) == [f"c={c}" for c in asked]
    for level in levels:
        cells = ttft[f"c={level['asked_concurrency']}"]
        assert cells[3].value == ms(level["ttft_s"]["median"])
        assert int(cells[2].value) == level["ttft_s"]["n"]

    with (source / "sweep.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for level in levels:
        mine = [row for row in rows if row["concurrency"] == str(level["asked_concurrency"])]
        assert len(mine) == len(level["raw"]["records"])
        assert {int(row["stream"]) for row in mine} == set(range(level["asked_concurrency"]))


def test_a_search_reports_its_probes_and_operating_point_from_its_percentiles(
    runs: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    source, env = runs
    shutil.copy(source / "point.json", tmp_path / "point.json")
    code, _, err = sagemeter(["report", "point.json", "--format=md"], env, tmp_path)
    assert code == 0, err
    assert not (tmp_path / "point-report.html").exists()
    result = json.loads((tmp_path / "point.json").read_text())
    sections = md_sections((tmp_path / "point-report.md").read_text())
    assert "Operating point" in sections

    (throughput,) = md_tables(sections["Throughput against load"])
    probes = result["slo_search"]["probes"]
    assert len(throughput) - 1 == len(probes)
    for row, probe in zip(throughput[1:], probes, strict=True):
        assert row[1].value == f"{probe['concurrency']} at once"
        assert row[2].value == f"{probe['output_tokens_per_second']:.1f}"
        assert row[3].value == ms(probe["ttft_s"]) and row[3].note == "p90"
        assert row[7].value == ("yes" if probe["passed"] else "no")
    assert [r[7].value for r in throughput[1:]][:2] == ["yes", "yes"]

    (point_table,) = md_tables(sections["Operating point"])
    (point_row,) = point_table[1:]
    point = result["operating_point"]
    assert point_row[2].value == "yes"
    assert point_row[3].value == "2 at once"  # the server's two slots
    assert point_row[4].value == f"{point['output_tokens_per_second']:.1f}"
    assert point_row[5].value == ms(point["ttft_s"]["p90"])
    assert point_row[8].value == f"{point['usd_per_million_tokens']:.2f}"

    # No raw records: the latency rows are the result's percentiles, and the report says so.
    (latency,) = md_tables(sections["Latency"])
    ttft = next(r for r in latency[1:] if r[1].value == "TTFT")
    assert ttft[7].value == "result's percentiles"
    assert ttft[3].value == ms(result["ttft_s"]["median"])
    e2e = next(r for r in latency[1:] if r[1].value == "end-to-end")
    assert e2e[3].value == "n/a"
    assert "run without `--raw`" in sections["Latency"]
    assert "no timeline" in sections["Timeline"]


def test_a_folder_of_results_is_one_report_and_bad_input_is_one_line(
    runs: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    source, env = runs
    folder = tmp_path / "both"
    folder.mkdir()
    for name in ("raw.json", "point.json"):
        shutil.copy(source / name, folder / name)
    code, _, err = sagemeter(["report", "both", "--format=md"], env, tmp_path)
    assert code == 0, err
    sections = md_sections((folder / "report.md").read_text())
    (runs_table,) = md_tables(sections["The runs"])
    assert sorted(r[0].value for r in runs_table[1:]) == ["point", "raw"]

    code, _, err = sagemeter(["report", "missing.json"], env, tmp_path)
    assert code == 2 and err.strip() == "error: missing.json: no such file", err
    (tmp_path / "other.json").write_text('{"kind": "something else"}')
    code, _, err = sagemeter(["report", "other.json"], env, tmp_path)
    assert code == 2
    assert "nor a `sagemeter load` result file" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_csv_is_the_raw_records_one_row_per_request(
    runs: tuple[Path, dict[str, str]],
) -> None:
    source, _ = runs
    result = json.loads((source / "raw.json").read_text())
    with (source / "raw.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    records = sorted(result["raw"]["records"], key=lambda r: (r["send_us"], r["stream"]))
    assert len(rows) == len(records) == result["requests_completed"] + result["requests_failed"]
    for row, record in zip(rows, records, strict=True):
        assert (int(row["stream"]), int(row["index"])) == (record["stream"], record["index"])
        assert row["concurrency"] == str(STREAMS) and row["rate"] == ""
        assert row["send_s"] == f"{record['send_us'] / 1e6:.6f}"
        assert row["end_s"] == f"{record['end_us'] / 1e6:.6f}"
        assert row["ttft_s"] == f"{(record['first_us'] - record['send_us']) / 1e6:.6f}"
        assert row["output_tokens"] == str(record["usage_tokens"]) == str(TOKENS)
        expected_prompt = record.get("prompt_tokens")
        assert row["prompt_tokens"] == ("" if expected_prompt is None else str(expected_prompt))
        assert (row["status"], row["error"]) == ("ok", "")
    ttfts = [float(row["ttft_s"]) for row in rows]
    assert min(ttfts) >= TIMING.ttft_s and sorted(ttfts)[len(ttfts) // 2] < TIMING.ttft_s + 0.02


def test_csv_without_raw_keeps_the_result_file_as_without_csv(
    runs: tuple[Path, dict[str, str]],
) -> None:
    source, _ = runs
    result = json.loads((source / "point.json").read_text())
    assert result["raw"] is None and result["settings"]["raw"] is False
    with (source / "point.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    # The operating point's probe: its requests, at its concurrency, answered as counted.
    assert {row["concurrency"] for row in rows} == {str(result["operating_point"]["concurrency"])}
    assert sum(row["status"] == "ok" for row in rows) == result["requests_completed"]
    assert (
        sum(int(row["output_tokens"]) for row in rows if row["output_tokens"])
        == (result["output_tokens"])
    )


def test_an_unusable_csv_path_is_refused_before_any_work(tmp_path: Path) -> None:
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home")}
    (tmp_path / "taken.csv").write_text("old\n")
    (tmp_path / "file").write_text("")
    unreachable = "http://127.0.0.1:9/v1"  # never reached: the check comes first
    for args, message in (
        (["--csv=taken.csv"], "already exists; use --force"),
        (["--csv=file/requests.csv"], "--csv"),
        (["--csv=same.json", "--out=same.json"], "is also --out"),
    ):
        code, _, err = sagemeter(["load", unreachable, *args], env, tmp_path)
        assert code == 2, err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "taken.csv").read_text() == "old\n"


def test_chromium_lays_the_load_report_out_on_a_phone(
    raw_run: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    from tests.chromium import Browser

    source, env = raw_run
    shutil.copy(source / "raw.json", tmp_path / "raw.json")
    code, _, err = sagemeter(
        ["report", "raw.json", "--format=html"], env, tmp_path, real_process=True
    )
    assert code == 0, err
    with Browser() as browser:
        browser.open(tmp_path / "raw-report.html", width=390, height=900, mobile=True)
        layout = json.loads(browser.evaluate(LAYOUT))
    assert layout["sections"] == ["runs", "throughput", "latency", "timeline"]
    assert layout["pageWidth"] <= layout["viewport"]  # wide tables scroll in their own frame
    assert [t["scrolls"] for t in layout["tables"]] == ["auto"] * 3
    assert len(layout["images"]) == 3
    for image in layout["images"]:
        assert image["complete"] and (image["natural"], image["naturalH"]) == (1200, 675)
        assert 0 < image["w"] <= layout["viewport"]
