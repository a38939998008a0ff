"""`load --sessions N --turns K --think-time DIST` through the real CLI against the known-truth
server with a prefill cost: every turn's prompt, as the server counts it, must be the whole
conversation so far, and every turn's TTFT the server's known first-token time for that prompt."""

from __future__ import annotations

import csv
import itertools
import json
import os
import statistics
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.prompts import TEMPLATE_TOKENS
from tests import cli_run

TIMING = TruthTiming(ttft_s=0.02, itl_s=0.002, prefill_s=0.0005)
PROMPT = "one two three four five"
WORDS = 5
TOKENS = 8
TURNS = 3
THINK_S = 0.03


def sagemeter(args: list[str], cwd: Path, *, real_process: bool = False) -> tuple[int, str, str]:
    """`sagemeter ARGS` in this process, or as its own process for a run held to timing truth."""
    env = {**os.environ, "SAGEMETER_HOME": str(cwd / "home"), "COLUMNS": "200"}
    run_cli = cli_run.run if real_process else cli_run.invoke
    done = run_cli(args, {**env, "SAGEMETER_PROGRESS": "0"}, cwd)
    return done.returncode, done.stdout, done.stderr


# A real load run held to the TTFT truth: its client must not lag, so it runs with the CPU to itself.
@pytest.mark.alone
def test_each_turn_carries_the_conversation_and_its_ttft_is_the_truth(tmp_path: Path) -> None:
    with running_truth_server(TIMING) as url:
        code, out, err = sagemeter(
            [
                "load",
                url,
                "--sessions=3",
                f"--turns={TURNS}",
                f"--think-time=fixed:{THINK_S * 1000:g}ms",
                f"--max-tokens={TOKENS}",
                f"--prompt={PROMPT}",
                "--duration=0.5s",
                "--raw",
                "--out=sessions.json",
                "--csv=sessions.csv",
            ],
            tmp_path,
            real_process=True,
        )
    assert code == 0, err
    assert "TTFT p50 ms" in out
    result = json.loads((tmp_path / "sessions.json").read_text())
    sessions = result["sessions"]
    assert result["mode"] == "closed" and result["asked_concurrency"] == 3
    assert sessions["sessions_started"] >= 3
    assert sessions["sessions_completed"] == sessions["sessions_started"]
    assert result["requests_failed"] == 0

    # Turn k sends k prompts and the k − 1 replies between them (each TOKENS words long).
    for turn in sessions["by_turn"]:
        k = turn["turn"]
        prompt = TEMPLATE_TOKENS + k * WORDS + (k - 1) * TOKENS
        assert turn["prompt_tokens_median"] == prompt
        assert turn["requests"] == sessions["sessions_started"]
        truth = TIMING.first_token_seconds(prompt)
        assert turn["ttft_s"]["median"] == pytest.approx(truth, abs=0.004)
    first, later = sessions["ttft_first_turn_s"], sessions["ttft_later_turns_s"]
    assert first["n"] == sessions["sessions_started"]
    assert later["n"] == (TURNS - 1) * sessions["sessions_started"]
    assert later["median"] > first["median"] + 0.004  # the longer prompts cost their prefill

    # Closed loop per session: turn k + 1 goes out a think time after turn k's reply ended.
    by_session: dict[int, list[dict[str, int]]] = {}
    for record in result["raw"]["records"]:
        by_session.setdefault(record["stream"], []).append(record)
    assert len(by_session) == sessions["sessions_started"]
    gaps = []
    for records in by_session.values():
        records.sort(key=lambda r: r["index"])
        assert [r["index"] for r in records] == list(range(TURNS))
        for before, after in itertools.pairwise(records):
            gaps.append((after["send_us"] - before["end_us"]) / 1e6)
            assert after["scheduled_us"] - before["end_us"] == pytest.approx(THINK_S * 1e6, abs=2)
    assert min(gaps) >= THINK_S - 0.001
    assert statistics.median(gaps) < THINK_S + 0.01

    with (tmp_path / "sessions.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(result["raw"]["records"])
    assert {row["index"] for row in rows} == {str(k) for k in range(TURNS)}

    code, _, err = sagemeter(["report", "sessions.json", "--format=md"], tmp_path)
    assert code == 0, err
    report = (tmp_path / "sessions-report.md").read_text()
    assert "## Turns" in report
    assert f"| sessions | 2 | {sessions['sessions_started']} | 0 |" in report


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sessions=2", "--think-time=soon"], "--think-time 'soon': give fixed:2s"),
        (["--sessions=2", "--think-time=uniform:3s,1s"], "low end comes first"),
        (["--turns=3"], "give --sessions N"),
        (["--sessions=2", "--rate=5"], "leave out --rate"),
        (["--sessions=2", "--api=completions"], "use --api chat"),
        (["--sessions=0"], "--sessions 0: give 1 to"),
    ],
)
def test_bad_session_input_is_one_line_before_any_work(
    tmp_path: Path, args: list[str], message: str
) -> None:
    code, _, err = sagemeter(["load", "http://127.0.0.1:9/v1", *args], tmp_path)
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err
