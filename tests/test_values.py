"""Values are finite, in range and given once wherever they enter: CLI options, plan fields, MCP
arguments and result files read back. Each refusal says what is wrong, not a neighbouring rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagemeter.errors import UserError
from sagemeter.experiment.plan import load_plan
from tests.conftest import reference_file
from tests.test_outputs import APP

NOTHING = "http://127.0.0.1:9"
CLI_CASES = [
    (["measure", "{tmp}/m", NOTHING, "--margin", "nan"], "--margin: Input should be a finite"),
    (["measure", "{tmp}/m", NOTHING, "--margin", "inf"], "--margin: Input should be a finite"),
    (["measure", "{tmp}/m", NOTHING, "--levels", "4,4,1"], "4 given twice"),
    (["measure", "{tmp}/m", "http://127.0.0.1:0"], "port 0 is no server's port"),
    (["load", "http://127.0.0.1:0"], "port 0 is no server's port"),
    (["selfcheck", "--levels", "4,4"], "give each level once"),
]


@pytest.mark.parametrize(("args", "expected"), CLI_CASES, ids=lambda v: str(v)[:40])
def test_cli_values_are_checked(args: list[str], expected: str, tmp_path: Path) -> None:
    done = CliRunner().invoke(APP, [arg.format(tmp=tmp_path) for arg in args])
    assert isinstance(done.exception, UserError), done.output
    assert expected in str(done.exception)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("decode_tokens_per_second", float("nan"), "finite number"),
        ("decode_tokens_per_second", float("inf"), "finite number"),
        ("decode_tokens_per_second", -50, "greater than or equal to 0"),
        ("ttft_median_ms", -1, "greater than or equal to 0"),
        ("load_tokens_per_second", {"4": float("nan")}, "finite number"),
    ],
)
def test_a_result_file_with_an_impossible_figure_is_refused_by_combine(
    key: str, value: object, expected: str, tmp_path: Path
) -> None:
    source = reference_file("measure-gemma-4-e2b.json")
    payload = json.loads(source.read_text(encoding="utf-8"))
    payload[key] = value
    bad = tmp_path / "measure-bad.json"
    bad.write_text(json.dumps(payload), encoding="utf-8")  # json writes NaN and Infinity
    good = tmp_path / "measure-good.json"
    shutil.copyfile(source, good)
    done = CliRunner().invoke(APP, ["combine", str(tmp_path / "c.json"), str(good), str(bad)])
    assert isinstance(done.exception, UserError), done.output
    message = str(done.exception)
    assert message.startswith(str(bad)) and key in message and expected in message
    assert not (tmp_path / "c.json").exists()


PLAN = """
name = "p"
price_per_hour = {price}

[[arm]]
name = "a"
target = "http://127.0.0.1:8001"

[[arm]]
name = "b"
target = "http://127.0.0.1:8002"
"""


@pytest.mark.parametrize("price", ["inf", "nan", "-1.0"])
def test_a_plan_price_must_be_a_positive_finite_number(price: str, tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(price=price), encoding="utf-8")
    with pytest.raises(UserError, match="price_per_hour"):
        load_plan(path)


async def test_mcp_arguments_are_checked_the_same_way(tmp_path: Path) -> None:
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import text_of

    for suffix in ("", "-qat"):
        name = f"measure-gemma-4-e2b{suffix}.json"
        shutil.copyfile(reference_file(name), tmp_path / name)
    async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
        levels = await client.call_tool(
            "measure_endpoint", {"target": NOTHING, "load_levels": [4, 4]}
        )
        margin = await client.call_tool(
            "compare_results",
            {"results": ["gemma-4-e2b", "gemma-4-e2b-qat"], "margin_points": 101},
        )
    assert levels.is_error and "4 given twice" in text_of(levels)
    assert margin.is_error and "margin_points" in text_of(margin)
    assert not list(tmp_path.glob("compare-*.json"))
