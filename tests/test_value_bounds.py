"""Each kind of value is checked by one rule on every face that takes it: the command line, a plan,
an MCP tool's arguments, and a file read back. A duplicate, an absurd size, a NaN or an endless
wait is one line (exit 2, or the tool's error) before any work: no folder, no file, no request."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from sagemeter.errors import UserError
from tests.test_outputs import APP

NOTHING = "http://127.0.0.1:9"  # never reached: every case is refused before a request
FORTY = ",".join(str(level) for level in range(1, 41))
HUGE = "99999999999999999999"


def _one_line(done: Result) -> str:
    """The refusal's one line: the UserError the command raised (the app prints it as
    `error: …`, exit 2), or the line a guarded command printed itself before exit 2."""
    if isinstance(done.exception, UserError):
        return str(done.exception)
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert done.exit_code == 2 and len(lines) == 1, done.output
    assert lines[0].startswith("error: "), done.output
    return lines[0].removeprefix("error: ")


# (kind, CLI arguments, what the one line says)
CLI_CASES = [
    ("levels twice", ["measure", "{tmp}/m", NOTHING, "--levels", "4,4,1"], "4 given twice"),
    ("levels many", ["measure", "{tmp}/m", NOTHING, "--levels", FORTY], "give at most 32"),
    ("levels zero", ["measure", "{tmp}/m", NOTHING, "--levels", "0"], "give 1–1024"),
    (
        "levels twice",
        [
            "measure",
            "{tmp}/m",
            NOTHING,
            "--prefill-tokens",
            "64,512",
            "--long-prompt-levels",
            "2,2",
        ],
        "--long-prompt-levels: 2 given twice",
    ),
    ("levels twice", ["selfcheck", "--levels", "4,4"], "4 given twice"),
    ("levels many", ["selfcheck", "--levels", FORTY], "give at most 32"),
    ("levels zero", ["selfcheck", "--levels", "0"], "give 1–4096"),
    ("count huge", ["measure", "{tmp}/m", NOTHING, "--repeats", HUGE], "--repeats: Input should"),
    ("count huge", ["measure", "{tmp}/m", NOTHING, "--load-tokens", HUGE], "--load-tokens"),
    ("count huge", ["load", NOTHING, "--max-tokens", HUGE], "--max-tokens"),
    ("count huge", ["load", NOTHING, "--workers", "100000"], "--workers"),
    ("count huge", ["load", NOTHING, "--seed", HUGE], "--seed"),
    ("count huge", ["selfcheck", "--workers", "100000"], "--workers"),
    (
        "not finite",
        ["measure", "{tmp}/m", NOTHING, "--margin", "nan"],
        "--margin: Input should be a finite",
    ),
    ("not finite", ["load", NOTHING, "--rate", "inf"], "--rate inf"),
    ("not finite", ["load", NOTHING, "--start-at", "nan"], "--start-at nan: give a Unix time"),
    ("not finite", ["selfcheck", "--seconds", "inf"], "--seconds inf"),
    ("price", ["load", NOTHING, "--price-per-hour", "inf"], "--price-per-hour inf"),
    ("price", ["load", NOTHING, "--price-per-hour", "1e9"], "up to 10,000"),
    (
        "price",
        ["combine", "{tmp}/c.json", "{tmp}/a.json", "{tmp}/b.json", "--price-per-hour", "1e9"],
        "up to 10,000",
    ),
    (
        "wait",
        ["measure", "{tmp}/m", NOTHING, "--timeout", "25h"],
        "--timeout '25h': more than a day",
    ),
    ("wait", ["measure", "{tmp}/m", NOTHING, "--startup-timeout", "90000"], "more than a day"),
    (
        "wait",
        ["measure", "{tmp}/m", NOTHING, "--metrics-wait", "2h"],
        "--metrics-wait: Input should be less",
    ),
    ("wait", ["load", NOTHING, "--duration", "9" * 400], "--duration '99999"),
    ("wait", ["load", NOTHING, "--timeout", "2000m"], "more than a day"),
    ("wait", ["load", NOTHING, "--start-at", "99999999999"], "give a start within a day"),
    ("wait", ["load", NOTHING, "--sessions", "2", "--think-time", "fixed:25h"], "--think-time"),
    ("wait", ["selfcheck", "--seconds", "1e9"], "--seconds"),
    ("count huge", ["fidelity", "collect", "{tmp}/f.json", NOTHING, "--top-k", "99999"], "--top-k"),
    (
        "count huge",
        ["fidelity", "collect", "{tmp}/f.json", NOTHING, "--max-tokens", HUGE],
        "--max-tokens",
    ),
    ("wait", ["serve", "local:smollm2-q4_1", "--startup-timeout", "25h"], "more than a day"),
    ("wait", ["load", "local:smollm2-q4_1", "--startup-timeout", "25h"], "more than a day"),
    (
        "wait",
        ["sagemaker", "deploy", "x", "--model", "org/m", "--deadline-minutes", "inf", "--dry-run"],
        "--deadline-minutes inf: Input should be a finite",
    ),
    (
        "not finite",
        ["sagemaker", "invoke", "x@us-east-1", "hi", "--temperature", "nan"],
        "--temperature nan",
    ),
]


@pytest.mark.parametrize(("kind", "args", "expected"), CLI_CASES, ids=lambda v: str(v)[:60])
def test_every_command_refuses_a_bad_value_in_one_line_before_any_work(
    kind: str, args: list[str], expected: str, tmp_path: Path
) -> None:
    done = CliRunner().invoke(APP, [arg.format(tmp=tmp_path) for arg in args])
    message = _one_line(done)
    assert expected in message and "\n" not in message, message
    assert len(message) < 300, message  # a 400-digit value is cut, not echoed whole
    assert not list(tmp_path.iterdir()), "work started before the refusal"


PLAN = """
name = "p"
{top}

[measure]
{measure}

[[arm]]
name = "a"
target = "http://127.0.0.1:8001"

[[arm]]
name = "b"
target = "http://127.0.0.1:8002"
{tail}
"""

SAGEMAKER_ARM = '[[arm]]\nname = "c"\n[arm.sagemaker]\nmodel = "org/m"\n'

PLAN_CASES = [
    ("levels twice", {"measure": "levels = [4, 4, 1]"}, "measure.levels: 4 given twice"),
    ("levels twice", {"measure": 'levels = "4,4,1"'}, "measure.levels: 4 given twice"),
    ("levels many", {"measure": f"levels = [{FORTY}]"}, "measure.levels: 40 levels given"),
    ("levels zero", {"measure": 'levels = "0,4"'}, "measure.levels: 0: give 1–1024"),
    (
        "levels twice",
        {"measure": 'long_prompt_levels = "2,2"'},
        "measure.long_prompt_levels: 2 given",
    ),
    ("count huge", {"measure": f"repeats = {HUGE}"}, "measure.repeats: Input should be less"),
    ("count huge", {"measure": "batches = 1000000"}, "measure.batches: Input should be less"),
    ("not finite", {"measure": "margin = nan"}, "measure.margin: Input should be a finite"),
    ("not finite", {"top": "max_cost_usd = nan"}, "max_cost_usd: Input should be a finite"),
    ("price", {"top": "price_per_hour = inf"}, "price_per_hour: Input should be a finite"),
    ("price", {"top": "price_per_hour = 1e9"}, "price_per_hour: Input should be less"),
    ("wait", {"measure": 'timeout = "99999h"'}, "measure.timeout: '99999h': more than a day"),
    ("wait", {"measure": "metrics_wait = inf"}, "measure.metrics_wait: Input should be a finite"),
    ("wait", {"tail": "[stop]\nmax_minutes = 1e12"}, "stop.max_minutes: Input should be less"),
    ("wait", {"tail": '[slo]\nttft = "48h"'}, "slo.ttft: '48h': more than a day"),
    (
        "count huge",
        {"top": 'order = "' + "AB" * 150 + '"'},
        "order: String should have at most 200",
    ),
    (
        "wait",
        {"tail": SAGEMAKER_ARM + "deadline_minutes = inf"},
        'arm "c".sagemaker.deadline_minutes',
    ),
    ("count huge", {"tail": SAGEMAKER_ARM + "max_model_len = 10_000_000_000"}, "max_model_len"),
]


@pytest.mark.parametrize(("kind", "parts", "expected"), PLAN_CASES, ids=lambda v: str(v)[:50])
def test_a_plan_refuses_a_bad_value_in_one_line_before_any_work(
    kind: str, parts: dict[str, str], expected: str, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.toml"
    fields = {"top": "", "measure": "", "tail": ""} | parts
    plan.write_text(PLAN.format(**fields), encoding="utf-8")
    done = CliRunner().invoke(APP, ["run", str(plan), "--dry-run"])
    message = _one_line(done)
    assert message.startswith(f"{plan}: ") and expected in message, message
    assert "\n" not in message, message
    assert [p.name for p in tmp_path.iterdir()] == ["plan.toml"]


MCP_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("levels many", "measure_endpoint", {"load_levels": list(range(1, 10_001))}, "load_levels"),
    ("levels twice", "measure_endpoint", {"load_levels": [4, 4, 1]}, "4 given twice"),
    ("levels zero", "measure_endpoint", {"load_levels": [0, 4]}, "give 1–1024"),
    (
        "levels twice",
        "measure_endpoint",
        {"prefill_tokens": [64, 512], "long_prompt_levels": [2, 2]},
        "2 given twice",
    ),
    ("count huge", "measure_endpoint", {"decode_repeats": 10**20}, "decode_repeats"),
    ("count huge", "measure_endpoint", {"load_batches": 10**6}, "load_batches"),
    ("wait", "measure_endpoint", {"timeout_s": 1e9}, "timeout_s"),
    ("wait", "measure_endpoint", {"metrics_wait_s": 1e9}, "metrics_wait_s"),
    ("price", "compare_results", {"results": ["a", "b"], "price_per_hour": 1e9}, "price_per_hour"),
    (
        "count huge",
        "find_operating_point",
        {"name": "x", "slo_ttft_ms": 500, "max_tokens": 10**11},
        "max_tokens",
    ),
    ("wait", "find_operating_point", {"name": "x", "slo_ttft_ms": 1e12}, "slo_ttft_ms"),
]


async def test_mcp_tools_refuse_a_bad_value_before_any_work(tmp_path: Path) -> None:
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import text_of

    async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
        for kind, tool, arguments, expected in MCP_CASES:
            if tool != "compare_results":
                arguments = {"target": NOTHING, **arguments}
            answer = await client.call_tool(tool, arguments)
            text = text_of(answer)
            assert answer.is_error and expected in text, (kind, tool, text)
            assert "Traceback" not in text, text
    assert not list(tmp_path.iterdir()), "a tool wrote before refusing"


def _first_number_path(value: Any, at: tuple[str | int, ...] = ()) -> tuple[str | int, ...]:
    """Where the first float nested under `detail` sits in a result file."""
    if isinstance(value, float) and len(at) > 2:
        return at
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else []
    )
    for key, child in children:
        found = _first_number_path(child, (*at, key))
        if found:
            return found
    return ()


def _set(payload: Any, where: tuple[str | int, ...], value: object) -> None:
    for key in where[:-1]:
        payload = payload[key]
    payload[where[-1]] = value


@pytest.mark.parametrize("constant", [float("nan"), float("inf"), float("-inf")])
def test_combine_refuses_a_nested_figure_that_is_not_finite_naming_its_key(
    constant: float, tmp_path: Path
) -> None:
    source = Path(__file__).parent / "data" / "report-run" / "measure-smollm2-q4_1.json"
    payload = json.loads(source.read_text(encoding="utf-8"))
    where = _first_number_path(payload["detail"], ("detail",))
    assert where, "the reference file has a nested figure"
    _set(payload, where, constant)
    bad = tmp_path / "measure-bad.json"
    bad.write_text(json.dumps(payload), encoding="utf-8")  # json writes NaN and Infinity
    shutil.copyfile(source, tmp_path / "measure-good.json")
    out = tmp_path / "c.json"
    done = CliRunner().invoke(
        APP, ["combine", str(out), str(tmp_path / "measure-good.json"), str(bad)]
    )
    assert isinstance(done.exception, UserError), done.output
    message = str(done.exception)
    key = ".".join(map(str, where))
    assert message.startswith(f"{bad}: {key}: ") and "not a finite number" in message, message
    assert not out.exists()


def _report_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "data" / "report-run", run)
    return run


def test_report_refuses_a_comparison_whose_price_is_not_finite(tmp_path: Path) -> None:
    run = _report_run(tmp_path)
    compare = run / "compare.json"
    payload = json.loads(compare.read_text(encoding="utf-8"))
    payload["price_per_hour"] = float("inf")
    compare.write_text(json.dumps(payload), encoding="utf-8")
    done = CliRunner().invoke(APP, ["report", str(run)])
    assert isinstance(done.exception, UserError), done.output
    assert str(done.exception) == (
        f"{compare}: price_per_hour: Infinity is not a finite number; give a finite number or null"
    )
    assert not (run / "report.md").exists()


def test_report_refuses_a_load_result_holding_nan(tmp_path: Path) -> None:
    from sagemeter.loadgen.result import RESULT_KIND

    bad = tmp_path / "load.json"
    bad.write_text(json.dumps({"kind": RESULT_KIND, "summary": {"ttft_s": float("nan")}}))
    done = CliRunner().invoke(APP, ["report", str(bad)])
    assert isinstance(done.exception, UserError), done.output
    assert str(done.exception).startswith(f"{bad}: summary.ttft_s: NaN is not a finite number")
    assert list(tmp_path.iterdir()) == [bad]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("name", ["compare.json", "measure-smollm2-q4_1.json"])
def test_report_refuses_a_fifo_in_the_run_folder_without_waiting(name: str, tmp_path: Path) -> None:
    run = _report_run(tmp_path)
    (run / name).unlink()
    os.mkfifo(run / name)
    done = CliRunner().invoke(APP, ["report", str(run)])
    assert isinstance(done.exception, UserError), done.output
    assert (
        str(done.exception)
        == f"{run / name}: is a named pipe (FIFO), not a regular file; give a file"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_resume_refuses_a_journal_that_is_a_fifo(tmp_path: Path) -> None:
    from sagemeter.experiment.journal import JOURNAL_FILE

    run = tmp_path / "runs" / "p"
    run.mkdir(parents=True)
    os.mkfifo(run / JOURNAL_FILE)
    done = CliRunner().invoke(APP, ["run", "--resume", str(run)])
    assert _one_line(done) == (
        f"the journal {run / JOURNAL_FILE}: is a FIFO, not a regular file; give a file name"
    )


def test_the_one_levels_reader_is_what_every_face_uses() -> None:
    """The CLI, the plan and MCP read levels through limits.parse_levels / check_levels."""
    from sagemeter.bounds import MAX_LEVELS
    from sagemeter.limits import parse_levels

    assert parse_levels("1, 4,16") == [1, 4, 16]
    assert parse_levels("none", allow_none=True) == []
    assert parse_levels(",".join(map(str, range(1, MAX_LEVELS + 1)))) == list(
        range(1, MAX_LEVELS + 1)
    )
    for bad, says in (
        ("", "whole numbers"),
        ("1,,4", "whole numbers"),
        ("4,1,4", "4 given twice"),
        ("-1", "give 1–1024"),
    ):
        with pytest.raises(UserError, match=says):
            parse_levels(bad)
