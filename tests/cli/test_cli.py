"""The `sagemeter` command as a user runs it: real subprocesses, exit codes, one-line errors
(bad input through the same entry point in this process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli_run
from tests.busy_host import assert_complete_or_busy, assert_decode_rate_or_busy
from tests.conftest import reference_file


def run(
    args: list[str], env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["measure", "out", "bogus"], "accepted forms"),
        (["measure", "out", "local:smollm2-q4_1", "--levels", "1,x"], "--levels"),
        (
            ["measure", "out", "local:smollm2-q4_1", "--long-tokens", "8", "--short-tokens", "16"],
            "larger",
        ),
        (["measure", "out", "local:smollm2-q4_1", "--repeats", "0"], "--repeats"),
        (["measure", "out", "local:smollm2-q4_1", "--method", "bogus"], "--method 'bogus'"),
        (["measure", "out", "local:nope"], "unknown checkpoint"),
        (["measure", "out", "local:smollm2-q4_1", "--questions", "missing.jsonl"], "question set"),
        (["combine", "c.json", "missing-a.json", "missing-b.json"], "missing-a.json: no such file"),
        (["serve", "http://127.0.0.1:1"], "starts a server on this machine"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], needle: str, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    done = cli_run.invoke(args, {**sagemeter_env, "COLUMNS": "200"}, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    assert needle in lines[0]
    assert not list(tmp_path.glob("out/measure-*.json"))


@pytest.mark.slow
def test_usage_errors_exit_2_without_traceback(sagemeter_env: dict[str, str]) -> None:
    done = run(["measure"], sagemeter_env)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "Missing argument" in done.stderr


@pytest.mark.slow
def test_combine_prints_and_writes_the_article_table(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "compare.json"
    done = run(
        [
            "combine",
            str(out),
            str(reference_file("measure-gemma-4-e2b.json")),
            str(reference_file("measure-gemma-4-e2b-qat.json")),
            "--price-per-hour",
            "1.1267",
        ],
        sagemeter_env,
    )
    assert done.returncode == 0, done.stderr
    for text in ("decode_tokens_per_second", "2.05", "1.74", "1077.25", "6.86", "0.29"):
        assert text in done.stdout
    payload = json.loads(out.read_text())
    assert payload["price_per_hour"] == 1.1267
    assert [row["key"] for row in payload["rows"]][:3] == [
        "weights_gib",
        "kv_cache_tokens",
        "load_seconds",
    ]


@pytest.mark.slow
def test_checkpoints_lists_both(sagemeter_env: dict[str, str]) -> None:
    done = run(["checkpoints"], sagemeter_env)
    assert done.returncode == 0, done.stderr
    assert "smollm2-q4_1" in done.stdout and "smollm2-f32" in done.stdout
    assert "5.74" in done.stdout


@pytest.mark.slow
def test_measure_quick_against_a_running_server(
    engine_url: str, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    done = run(["measure", str(tmp_path), engine_url, "--quick", "--name", "q4"], sagemeter_env)
    assert done.returncode in (0, 3), done.stderr
    path = tmp_path / "measure-q4.json"
    assert f"wrote {path}" in done.stdout
    result = json.loads(path.read_text())
    assert_complete_or_busy(done.returncode, result)
    assert_decode_rate_or_busy(result)
    assert set(result["load_tokens_per_second"]) == {"1", "4"}
    assert result["quality"].endswith("/6")
    detail = result["detail"]
    assert detail["settings"]["quick"] is True
    assert detail["environment"]["engine"] == "llama.cpp"
    assert detail["environment"]["backend"] == "openai-http"
    assert detail["failed_requests"] == 0
