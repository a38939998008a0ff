"""calibrate-server's known share of wrong answers: deterministic, nested, independent, real."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.answers import WrongShares
from sagemeter.questions import load_question_set
from sagemeter.questions.scoring import score
from tests import cli_run

BANK = load_question_set("bank-1000")
IDS = [question.id for question in BANK.questions]


def _missed(shares: WrongShares) -> set[str]:
    return {question_id for question_id in IDS if shares.misses(question_id)}


def test_shares_are_nested_independent_and_near_their_size() -> None:
    common = _missed(WrongShares(0.10))
    more = _missed(WrongShares(0.20))
    stacked = _missed(WrongShares(0.10, 0.05))
    other_seed = _missed(WrongShares(0.10, 0.05, seed=1))
    # A larger common share misses every question the smaller one does, and more.
    assert common < more and common < stacked and common < other_seed
    # Sizes: binomial sd at n = 1000 is under 1.3 points; 4 sd either side.
    assert abs(len(common) - 100) < 52 and abs(len(more) - 200) < 52
    extra = stacked - common
    assert abs(len(extra) - 1000 * 0.05 * 0.9) < 4 * (1000 * 0.045 * 0.955) ** 0.5
    # The extra share is drawn independently of the common one and of another seed's.
    overlap = len((stacked - common) & (other_seed - common))
    assert overlap < 0.3 * len(extra)
    assert _missed(WrongShares(0.10, 0.05)) == stacked  # the same every time


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"--wrong-share-extra 1\.5"):
        WrongShares(0.1, 1.5)


def test_the_server_answers_known_questions_with_its_share_wrong() -> None:
    shares = WrongShares(0.25, 0.1, seed=3)
    article = load_question_set("article-40")
    timing = TruthTiming(0.001, 0.0001)
    with running_truth_server(timing, wrong=shares) as url, httpx.Client(base_url=url) as client:
        for question in article.questions:
            body = {
                "model": "m",
                "max_tokens": 48,
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": question.prompt},
                ],
            }
            reply = client.post("/v1/chat/completions", json=body).json()
            text = reply["choices"][0]["message"]["content"]
            correct, _ = score(question, text)
            assert correct is not shares.misses(question.id), question.id
            assert reply["choices"][0]["finish_reason"] == "stop"
        other = {"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
        unknown = client.post("/v1/chat/completions", json=other).json()
        assert unknown["choices"][0]["message"]["content"] == "tok tok tok "


def _sagemeter(*args: str) -> list[str]:
    return [sys.executable, "-m", "sagemeter", *args]


def test_the_command_answers_a_users_own_set(tmp_path: Path) -> None:
    own = tmp_path / "own.jsonl"
    own.write_text('{"id": "x1", "prompt": "Name the colour of grass.", "answer": "green"}\n')
    port_file = tmp_path / "port"
    command = _sagemeter(
        "calibrate-server",
        "--ttft=1ms",
        "--itl=0.1ms",
        f"--port-file={port_file}",
        "--wrong-share=0",
        f"--questions={own}",
    )
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "Name the colour of grass."}],
        }
        reply = httpx.post(url + "/v1/chat/completions", json=body).json()
        assert reply["choices"][0]["message"]["content"] == "green"
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=10)
    assert "1,041 known questions, 0.0% of them wrong" in out


def test_an_extra_share_without_the_common_one_is_refused() -> None:
    done = cli_run.invoke(["calibrate-server", "--wrong-share-extra=0.1"])
    assert done.returncode == 2
    assert "--wrong-share-extra and --questions need --wrong-share" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
