"""Stopping rules through the real MCP client: measure_endpoint's `speed_precision`,
`max_repeats`, `max_batches` and `max_minutes` (as `measure --speed-precision …`), and a plan's
`[stop]` table through run_experiment and its dry run, against known-truth servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.answers import WrongShares
from sagemeter.evidence.sequential import planned_looks
from sagemeter.mcp import ServerConfig, build_server
from tests.mcp_helpers import error_line, ok, text_of

SMALL = {
    "short_tokens": 4,
    "long_tokens": 24,
    "decode_repeats": 3,
    "load_levels": [1],
    "load_max_tokens": 4,
    "load_batches": 1,
    "prefill_tokens": [],
    "questions_per_family": 1,
    "quality_max_tokens": 4,
}


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=0.002)) as url:
        yield url


def _result(results: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((results / f"measure-{name}.json").read_text())
    return data


@pytest.mark.alone  # counts a load level's batches: a starved client would have one refused
async def test_measure_endpoint_repeats_to_a_precision_up_to_its_maximum(
    tmp_path: Path, truth_url: str
) -> None:
    """One part in a million: loopback timing jitters far more, so the maxima end both."""
    results = tmp_path / "results"
    arguments = {**SMALL, "target": truth_url, "name": "p", "speed_precision": 1e-6,
                 "max_repeats": 5, "max_batches": 3}  # fmt: skip
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        result = await client.call_tool("measure_endpoint", arguments)
    answer = ok(result)
    detail = _result(results, "p")["detail"]
    assert detail["settings"]["speed_precision"] == 1e-6
    decode = detail["decode"]["precision"]
    assert decode["min_repeats"] == 3 and decode["repeats"] == decode["max_repeats"] == 5
    assert len(detail["decode"]["long_times_s"]) == 5
    level = detail["load"]["levels"][0]["precision"]
    assert level["repeats"] == level["max_repeats"] == 3 and not level["reached"]
    assert answer["stopped"] == [
        f"decode: {decode['stopping_reason']}",
        f"1 at once: {level['stopping_reason']}",
    ]
    assert decode["stopping_reason"].startswith("stopped after 5 of at most 5 repeats because")
    assert f"decode: {decode['stopping_reason']}" in text_of(result)


async def test_measure_endpoint_refuses_a_maximum_below_the_minimum(
    tmp_path: Path, truth_url: str
) -> None:
    results = tmp_path / "results"
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        for extra, line in [
            ({"max_repeats": 2}, "max_repeats 2 is below decode_repeats 3"),
            ({"max_batches": 1, "load_batches": 2}, "max_batches 1 is below load_batches 2"),
        ]:
            arguments = {**SMALL, "target": truth_url, "speed_precision": 0.03, **extra}
            refused = await client.call_tool("measure_endpoint", arguments)
            assert line in error_line(refused)
        # The argument's own bounds, named as the tool names them.
        wrong = await client.call_tool(
            "measure_endpoint", {"target": truth_url, "speed_precision": 1.5}
        )
        assert wrong.is_error and "speed_precision" in text_of(wrong)
    assert not results.exists() or not list(results.glob("measure-*.json"))


async def test_measure_endpoint_max_minutes_cuts_and_names_the_phase(tmp_path: Path) -> None:
    """0.6 s for the whole measurement; decode alone takes at least 2 s (five 200-token replies
    at 2 ms a token), so decode is cut and nothing after it runs."""
    results = tmp_path / "results"
    arguments = {**SMALL, "long_tokens": 200, "decode_repeats": 5, "name": "cut",
                 "max_minutes": 0.01}  # fmt: skip
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=0.002)) as url:
        async with Client(build_server(ServerConfig(results_dir=results))) as client:
            answer = ok(await client.call_tool("measure_endpoint", {**arguments, "target": url}))
    assert answer["complete"] is False and answer["decode_tokens_per_second"] is None
    why = answer["incomplete_because"]
    assert why[0] == "decode rate: cut short: max_minutes 0.01 reached during decode"
    assert "1 at once: not measured: max_minutes 0.01 reached during parallel" in why
    assert _result(results, "cut")["incomplete_because"] == why


STOP_PLAN = """name = "seq"
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

[stop]
quality = "decided"
block = 50
speed = 0.5
max_repeats = 4
max_minutes = 20

[[arm]]
name = "a"
target = "{a}"

[[arm]]
name = "b"
target = "{b}"
"""
QUESTIONS = 400  # bank-1000, 20 per family


@pytest.mark.slow  # a dry run's simulation, then a whole plan: about 6 CPU-s
async def test_run_experiment_takes_the_stop_table_and_its_dry_run_says_the_bounds(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    timing = TruthTiming(ttft_s=0.0005, itl_s=0.0001)
    with ExitStack() as stack:
        url_a = stack.enter_context(running_truth_server(timing, wrong=WrongShares(0.0)))
        url_b = stack.enter_context(running_truth_server(timing, wrong=WrongShares(0.20)))
        plan = STOP_PLAN.format(a=url_a, b=url_b)
        async with Client(build_server(ServerConfig(results_dir=results))) as client:
            planned = ok(await client.call_tool("run_experiment", {"plan": plan, "dry_run": True}))
            bounds = planned["estimate"]["stop_bounds"]
            assert [line.split(" ")[0] for line in bounds] == [
                "stop.quality", "stop.speed", "stop.max_minutes"
            ]  # fmt: skip
            assert bounds[0].startswith(f'stop.quality "decided": {QUESTIONS} questions per arm')
            assert "maximum of 4 pairs" in bounds[1]
            assert planned["estimate"]["assumptions"].endswith("; ".join(bounds))
            assert bounds[0] in text_of(await client.call_tool(
                "run_experiment", {"plan": plan, "dry_run": True}
            ))  # fmt: skip
            done = ok(await client.call_tool("run_experiment", {"plan": plan}))
    assert done["state"] == "done", done  # incomplete (a busy host may cost a figure) is done too
    run_dir = Path(done["run_dir"])
    record = json.loads((run_dir / "measure-b.json").read_text())["detail"]["quality"]["sequential"]
    assert record["verdict"] == "FAIL" and record["items_asked"] < QUESTIONS
    assert record["items_asked"] in planned_looks(QUESTIONS, 50)
    sentence = f"stopped after {record['items_asked']} of {QUESTIONS} questions because FAIL"
    assert any(sentence in (step["note"] or "") for step in done["steps"]), done["steps"]
    settings = json.loads((run_dir / "measure-a.json").read_text())["detail"]["settings"]
    assert (settings["speed_precision"], settings["speed_max_repeats"]) == (0.5, 4)
    assert settings["max_minutes"] == 20
