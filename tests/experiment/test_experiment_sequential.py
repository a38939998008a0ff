"""`[stop] quality = "decided"` end to end: `sagemeter run` on two known-truth servers that miss
known shares of bank-1000's questions, interleaved on loopback."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.answers import WrongShares
from sagemeter.evidence.sequential import planned_looks
from tests import cli_run

TIMING = TruthTiming(ttft_s=0.0005, itl_s=0.0001)
QUESTIONS = 400  # bank-1000, 20 per family
BLOCK = 50


def _plan(url_a: str, url_b: str, stop: str = '[stop]\nquality = "decided"\nblock = 50\n') -> str:
    return f"""name = "sequential"
order = "interleaved"

[measure]
short-tokens = 4
long-tokens = 8
repeats = 2
levels = [1]
load-tokens = 4
batches = 1
prefill-tokens = "none"
questions = "bank-1000"
questions-per-family = 20
quality-max-tokens = 8
margin = 5

{stop}
[[arm]]
name = "a"
target = "{url_a}"

[[arm]]
name = "b"
target = "{url_b}"
"""


def _run(tmp_path: Path, a: WrongShares, b: WrongShares, stop: str | None = None) -> Path:
    with ExitStack() as stack:
        url_a = stack.enter_context(running_truth_server(TIMING, wrong=a))
        url_b = stack.enter_context(running_truth_server(TIMING, wrong=b))
        plan = _plan(url_a, url_b) if stop is None else _plan(url_a, url_b, stop)
        (tmp_path / "plan.toml").write_text(plan)
        env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
        done = cli_run.invoke(["run", "plan.toml", "--out", "run"], env, tmp_path)
    # Exit 3: done with a figure missing (a busy shared host may make the client set a batch's
    # pace); what is checked here is the quality phase.
    assert done.returncode in (0, 3), done.stderr
    return tmp_path / "run"


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.slow  # a whole plan of up to 400 questions a side and its report: about 6 CPU-s
def test_a_candidate_missing_a_fifth_fails_early(tmp_path: Path) -> None:
    stop = '[stop]\nquality = "decided"\nblock = 50\nspeed = 0.5\nmax_repeats = 4\n'
    run = _run(tmp_path, WrongShares(0.0), WrongShares(0.20), stop)
    quality_a = _json(run / "measure-a.json")["detail"]["quality"]
    quality_b = _json(run / "measure-b.json")["detail"]["quality"]
    record = quality_a["sequential"]
    assert record == quality_b["sequential"]
    assert record["verdict"] == "FAIL" and record["max_items"] == QUESTIONS
    assert record["items_asked"] in planned_looks(QUESTIONS, BLOCK)
    assert record["items_asked"] < QUESTIONS  # stopped before the end of the set
    assert record["looks_taken"] == planned_looks(QUESTIONS, BLOCK).index(record["items_asked"]) + 1
    assert record["nominal_false_pass"] == record["nominal_false_fail"] == 0.025
    assert "O'Brien–Fleming" in record["method"]
    assert record["stopping_reason"].startswith(f"FAIL at look {record['looks_taken']} of 8")
    # Only the questions asked are kept, every family in each block; A right on all of them.
    assert quality_a["total"] == quality_b["total"] == record["items_asked"]
    assert len(quality_a["by_family"]) == 20 and quality_a["correct"] == quality_a["total"]
    families = [item["family"] for item in quality_b["items"][:BLOCK]]
    assert len(set(families)) == 20
    missed = {item["id"] for item in quality_b["items"] if not item["correct"]}
    named = {item["id"] for item in quality_b["items"] if WrongShares(0.20).misses(item["id"])}
    assert missed == named and missed  # B missed exactly the questions its share names

    check = _json(run / "compare.json")["quality_checks"][0]
    assert check["verdict"] == "FAIL" and check["sequential"] == record
    assert check["summary"][0].startswith(
        f"sequential: stopped after {record['items_asked']} of {QUESTIONS} questions because FAIL"
    )
    report = (run / "report.md").read_text()
    assert f"stopped after {record['items_asked']} of {QUESTIONS} questions because FAIL" in report
    # [stop] speed in the same run: each arm's decode record, in compare.json and the report.
    precision = _json(run / "compare.json")["decode_precision"]
    assert len(precision) == 2
    for name, stop_record in zip("ab", precision, strict=True):
        assert stop_record["min_repeats"] == 2 and 2 <= stop_record["repeats"] <= 4
        assert stop_record == _json(run / f"measure-{name}.json")["detail"]["decode"]["precision"]
        assert f"Decode of {name}: {stop_record['stopping_reason']}." in report


@pytest.mark.slow  # a whole plan of up to 400 questions a side: about 5 CPU-s
def test_equal_shares_stop_at_pass_or_run_out(tmp_path: Path) -> None:
    """Same shares, different seeds: a true tie with about 8.5% of questions flipping both ways.
    At a 5-point margin with 400 questions the verdict is PASS (early or at the end) or, rarely,
    INCONCLUSIVE at the end; never FAIL."""
    run = _run(tmp_path, WrongShares(0.10, 0.05, seed=1), WrongShares(0.10, 0.05, seed=2))
    record = _json(run / "measure-b.json")["detail"]["quality"]["sequential"]
    assert record["verdict"] in ("PASS", "INCONCLUSIVE")
    if record["verdict"] == "INCONCLUSIVE":
        assert record["items_asked"] == QUESTIONS
        assert record["stopping_reason"].startswith("the set ran out at look 8")
    check = _json(run / "compare.json")["quality_checks"][0]
    assert check["verdict"] == record["verdict"]
    flips = check["paired"]["flips"]
    assert flips["losses"] and flips["gains"]  # a tie with noise, not two identical servers


def test_a_sequential_stop_needs_the_interleaved_order(tmp_path: Path) -> None:
    plan = _plan("http://127.0.0.1:9", "http://127.0.0.1:9").replace(
        'order = "interleaved"', 'order = "ABA"'
    )
    (tmp_path / "plan.toml").write_text(plan)
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home")}
    done = cli_run.invoke(["run", "plan.toml", "--dry-run"], env, tmp_path)
    assert done.returncode == 2
    assert 'stop.quality: "decided" needs order = "interleaved"' in done.stderr
    assert "Traceback" not in done.stderr


def test_the_stop_table_is_checked_and_written_back() -> None:
    from sagemeter.errors import UserError
    from sagemeter.experiment.plan import parse_plan, stop_problems
    from sagemeter.experiment.plan_toml import plan_toml

    plan = parse_plan(_plan("http://127.0.0.1:9", "http://127.0.0.1:9"))
    assert plan.stop.quality == "decided" and plan.stop.block == BLOCK
    again = parse_plan(plan_toml(plan.to_data()))
    assert again.stop == plan.stop
    assert stop_problems(plan, QUESTIONS) == []
    many = _plan(
        "http://127.0.0.1:9", "http://127.0.0.1:9", '[stop]\nquality = "decided"\nblock = 1\n'
    )
    assert stop_problems(parse_plan(many), QUESTIONS) == [
        "stop.block: 400 looks (a block of 1 in 400 questions): at most 200; take a block of at "
        "least 2"
    ]
    wrong = _plan("http://127.0.0.1:9", "http://127.0.0.1:9", '[stop]\nquality = "soon"\n')
    with pytest.raises(UserError, match=r"stop\.quality"):
        parse_plan(wrong)


def test_the_stop_tables_speed_target_reaches_the_settings() -> None:
    from sagemeter.errors import UserError
    from sagemeter.experiment.plan import parse_plan

    url = "http://127.0.0.1:9"
    stop = "[stop]\nspeed = 0.03\nmax_repeats = 12\nmax_batches = 4\nmax_minutes = 30\n"
    settings = parse_plan(_plan(url, url, stop)).settings()
    assert settings.speed_precision == 0.03 and settings.speed_max_repeats == 12
    assert settings.speed_max_batches == 4 and settings.max_minutes == 30
    assert parse_plan(_plan(url, url, "")).settings().speed_precision is None
    with pytest.raises(UserError, match=r"stop\.max_repeats 1 is below measure\.repeats 2"):
        parse_plan(_plan(url, url, "[stop]\nspeed = 0.03\nmax_repeats = 1\n"))
